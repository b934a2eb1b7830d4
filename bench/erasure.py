"""Erasure of one subject with a large footprint: time and residue.

    .venv/bin/python bench/erasure.py                  # 10,000 items
    .venv/bin/python bench/erasure.py --items 2000

Writes N memory items about one subject through the real write service (with
embeddings and history), plus what extraction would derive from them — entities
(some named only by this subject, some shared with another subject), mentions,
causal edges — and supersessions with their history text, into a database of its
own (FEDMEM_DB_NAME, default ``fedmem_bench_erasure``). Another subject's items
share the tenant and must survive. It then runs the erasure (the service the
worker runs, in this process) and prints:

* the erasure time (goal <= 10 s for 10,000 items);
* the residue: rows still holding the subject's data — items, mentions, causal
  edges, supersessions, history, entities only the subject named, session
  messages, candidates — plus every text column of every table scanned for the
  subject's canary (goal 0);
* that the other subject's items are intact, and the machine.

Not a test: it asserts nothing, it measures.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")
os.environ.setdefault("FEDMEM_DB_NAME", "fedmem_bench_erasure")
os.environ.setdefault("FEDMEM_LOG_LEVEL", "WARNING")

from bench.machine import describe  # noqa: E402

SUBJECT = "bench-subject-1"
OTHER = "bench-subject-2"
TEXT_TYPES = ("text", "character varying", "jsonb", "ARRAY")


def canary_scan(cursor, needle: str) -> dict[str, int]:
    cursor.execute(
        """
        SELECT c.table_name, c.column_name FROM information_schema.columns c
        JOIN information_schema.tables t USING (table_schema, table_name)
        WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' AND c.data_type = ANY(%s)
        """,
        [list(TEXT_TYPES)],
    )
    hits = {}
    for table, column in cursor.fetchall():
        cursor.execute(
            f'SELECT count(*) FROM "{table}" WHERE "{column}"::text LIKE %s',  # noqa: S608 - catalog names
            [f"%{needle}%"],
        )
        count = cursor.fetchone()[0]
        if count:
            hits[f"{table}.{column}"] = count
    return hits


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=10_000, help="items about the subject (default 10000)")
    parser.add_argument(
        "--profile", action="store_true", help="print the slowest SQL statements of the erasure"
    )
    parser.add_argument("--other", type=int, default=1_000, help="items about another subject (default 1000)")
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction

    from governance.models import Agent, ErasureRequest, Membership, Role, User
    from governance.services.agents import agent_create
    from governance.services.erasure import erasure_request_create, erasure_run
    from governance.services.tenancy import tenant_get_or_create
    from memory.embeddings import embed_texts, get_embedder
    from memory.models import CausalEdge, Entity, MemoryHistory, MemoryItem, Mention, Supersession
    from memory.text import content_hash

    call_command("migrate", verbosity=0)
    print(f"machine: {describe()}")
    get_embedder()
    # A fresh tenant per run: the bench database is throwaway, and nothing is deleted
    # behind the services' back. A tenant whose load completed but was never erased
    # (an interrupted run) is reused, since loading is the slow part.
    from django.db.models import Count, Q

    from governance.models import Tenant

    reusable = (
        Tenant.objects.filter(slug__startswith="bench-erasure-", erasure_requests__isnull=True)
        .annotate(n=Count("agents__memory_items", filter=Q(agents__memory_items__user_id=SUBJECT)))
        .filter(n=args.items)
        .first()
    )
    run = reusable.slug.removeprefix("bench-erasure-") if reusable else uuid.uuid4().hex[:8]
    tenant = tenant_get_or_create(slug=f"bench-erasure-{run}", name=f"Bench erasure {run}")
    officer, _ = User.objects.get_or_create(username=f"bench-officer-{run}")
    Membership.objects.get_or_create(user=officer, tenant=tenant, role=Role.SECURITY_OFFICER)
    agent = Agent.objects.filter(tenant=tenant, name="erasure-agent").first() or agent_create(
        tenant=tenant, name="erasure-agent", created_by=officer
    )
    canary = f"canary{run}"

    began = time.perf_counter()
    if reusable is None:
        # Rows as the write service stores them (embedding of the content, a
        # "created" history event), inserted in bulk: the write path has its own
        # bench (recall.py); this one measures the erasure.
        for subject, count, tag in ((SUBJECT, args.items, canary), (OTHER, args.other, "keep")):
            for start in range(0, count, 500):
                texts = [
                    f"{tag} note {n}: order {n % 97} shipped to depot {n % 13} after a delay"
                    for n in range(start, min(start + 500, count))
                ]
                vectors = embed_texts(texts)
                rows = MemoryItem.objects.bulk_create(
                    MemoryItem(
                        tenant=tenant,
                        agent=agent,
                        user_id=subject,
                        session_id=f"s{(start + i) // 50}",
                        scope="user",
                        scopes=["user"],
                        content=text,
                        content_hash=content_hash(text),
                        embedding=vector,
                        extraction_status="done",
                    )
                    for i, (text, vector) in enumerate(zip(texts, vectors, strict=True))
                )
                MemoryHistory.objects.bulk_create(
                    MemoryHistory(
                        tenant=tenant,
                        agent=agent,
                        item_id=row.pk,
                        event="created",
                        actor_type="agent",
                        new_content=row.content,
                        details={"user_id": subject},
                    )
                    for row in rows
                )
    load = time.perf_counter() - began
    items = list(MemoryItem.objects.filter(tenant=tenant, user_id=SUBJECT).values_list("pk", "embedding"))
    others = list(MemoryItem.objects.filter(tenant=tenant, user_id=OTHER).values_list("pk", "embedding"))

    # What extraction derives: entities (one per 5 subject items, named only by the
    # subject; 20 shared with the other subject), mentions, causal edges; and
    # supersessions of every tenth item with their history text.
    with transaction.atomic():
        vector = items[0][1]
        own = Entity.objects.bulk_create(
            Entity(
                tenant=tenant, name=f"{canary} place {n}", normalized=f"{canary} place {n}", embedding=vector
            )
            for n in range(max(1, len(items) // 5))
        )
        shared = Entity.objects.bulk_create(
            Entity(tenant=tenant, name=f"depot {n}", normalized=f"depot {n}", embedding=vector)
            for n in range(20)
        )
        mentions = []
        for n, (pk, _) in enumerate(items):
            mentions.append(
                Mention(
                    tenant=tenant,
                    item_id=pk,
                    entity=own[n % len(own)],
                    text=own[n % len(own)].name,
                    start=0,
                    end=10,
                )
            )
            mentions.append(
                Mention(tenant=tenant, item_id=pk, entity=shared[n % 20], text="depot", start=40, end=45)
            )
        for n, (pk, _) in enumerate(others):
            mentions.append(
                Mention(tenant=tenant, item_id=pk, entity=shared[n % 20], text="depot", start=40, end=45)
            )
        Mention.objects.bulk_create(mentions, batch_size=2000)
        CausalEdge.objects.bulk_create(
            (
                CausalEdge(
                    tenant=tenant,
                    item_id=pk,
                    cause=f"{canary} delay {n}",
                    effect=f"order {n} shipped late",
                    cue="after",
                    cause_terms=["delay"],
                    effect_terms=["order", "shipped"],
                    cause_embedding=emb,
                    effect_embedding=emb,
                )
                for n, (pk, emb) in enumerate(items)
            ),
            batch_size=2000,
        )
        pairs = [(items[n][0], items[n + 1][0]) for n in range(0, len(items) - 1, 10)]
        Supersession.objects.bulk_create(
            (
                Supersession(tenant=tenant, old_item_id=old, new_item_id=new, reason="corrected")
                for old, new in pairs
            ),
            batch_size=2000,
        )
        MemoryHistory.objects.bulk_create(
            (
                MemoryHistory(
                    tenant=tenant,
                    agent=agent,
                    item_id=old,
                    event="superseded",
                    actor_type="system",
                    old_content=f"{canary} old text of {old}",
                    new_content=f"{canary} new text",
                )
                for old, _ in pairs
            ),
            batch_size=2000,
        )
    print(
        f"loaded {len(items):,} items about the subject and {len(others):,} about another "
        f"{'(reused from an interrupted run)' if reusable else f'in {load:.1f} s'}; "
        f"{len(own):,} + 20 shared entities, {len(mentions):,} mentions, {len(items):,} causal edges, "
        f"{len(pairs):,} supersessions"
    )

    request = erasure_request_create(
        tenant=tenant, actor=officer, subject=SUBJECT, scope="tenant", reason="bench"
    )
    timings: list[tuple[float, str]] = []

    def timed(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            timings.append((time.perf_counter() - t0, sql[:160]))

    began = time.perf_counter()
    with connection.execute_wrapper(timed):
        request = erasure_run(request_id=request.pk)
    elapsed = time.perf_counter() - began
    if args.profile:
        print(f"  SQL: {len(timings)} statements, {sum(t for t, _ in timings):.2f} s in the database")
        for seconds, sql in sorted(timings, reverse=True)[:8]:
            print(f"  {seconds:7.3f} s  {sql}")
    assert isinstance(request, ErasureRequest)

    ids = [pk for pk, _ in items]
    residue = {
        "memory_item": MemoryItem.objects.filter(tenant=tenant, user_id=SUBJECT).count(),
        "mentions": Mention.objects.filter(item_id__in=ids).count(),
        "causal_edges": CausalEdge.objects.filter(item_id__in=ids).count(),
        "supersessions": Supersession.objects.filter(old_item_id__in=ids).count(),
        "history": MemoryHistory.objects.filter(item_id__in=ids).count(),
        "subject_only_entities": Entity.objects.filter(pk__in=[e.pk for e in own]).count(),
    }
    with connection.cursor() as cursor:
        scan = canary_scan(cursor, canary)
    total = sum(residue.values()) + sum(scan.values())
    kept = MemoryItem.objects.filter(tenant=tenant, user_id=OTHER).count()
    shared_left = Entity.objects.filter(pk__in=[e.pk for e in shared]).count()
    print(f"erasure of {len(items):,} items: {elapsed:.2f} s (status {request.status}; goal <= 10 s)")
    print(f"deleted per table: {request.certificate.get('deleted')}")
    print(f"residue: {total} (rows {residue}; canary in columns {scan or 'none'}; goal 0)")
    print(
        f"other subject's items kept: {kept:,} of {len(others):,}; shared entities kept: {shared_left} of 20"
    )


if __name__ == "__main__":
    main()
