"""Console memory pages on a large table: list pages deep into the keyset, filters,
full-text search, an item's detail and the dashboard's memory panel.

    .venv/bin/python bench/console.py                 # 100,000 items
    .venv/bin/python bench/console.py --items 20000

Loads N generated memories into a database of its own (FEDMEM_DB_NAME, default
``fedmem_console_bench``) — 5% in another tenant, 3% retired, four agents,
several kinds, scopes and sessions — with random unit vectors instead of real
embeddings and without the HNSW index (no page timed here ranks by vector, and
embedding 100k texts would take half an hour on a small machine). Then it requests each page through
Django's test client as a tenant admin (session, middleware, permission gate,
policies, template) and prints p50/p95 latency and the number of SQL queries.

Not a test: it asserts nothing, it measures.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

from machine import machine

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")
os.environ.setdefault("FEDMEM_DB_NAME", "fedmem_console_bench")
os.environ.setdefault("FEDMEM_LOG_LEVEL", "WARNING")

KINDS = ["fact", "fact", "fact", "episodic", "preference", "procedural", "semantic"]
SCOPES = ["agent", "agent", "user", "session", "organization"]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=100_000, help="memories to load (default 100000)")
    parser.add_argument("--repeat", type=int, default=30, help="requests per page (default 30)")
    args = parser.parse_args()

    import django

    django.setup()
    import numpy as np
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import override_settings
    from django.utils import timezone
    from recall import generate_texts

    from governance.models import Agent, Role, User
    from governance.services.agents import agent_create
    from governance.services.tenancy import membership_grant, tenant_get_or_create
    from memory.models import MemoryItem
    from memory.text import content_hash

    call_command("migrate", verbosity=0)
    info = machine()
    print(f"machine: {info['cores']} cores, {info['ram']} RAM, {info['cpu']}")
    print("load average at start: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"db {settings.DATABASES['default']['NAME']}")

    tenant = tenant_get_or_create(slug="bench", name="Bench")
    other = tenant_get_or_create(slug="bench-other", name="Bench (other tenant)")
    admin, _ = User.objects.get_or_create(username="bench-admin")
    membership_grant(user=admin, tenant=tenant, role=Role.TENANT_ADMIN)
    agents = [
        Agent.objects.filter(tenant=tenant, name=name).first()
        or agent_create(tenant=tenant, name=name, created_by=admin)
        for name in ("support-bot", "ops-agent", "billing-agent", "triage")
    ]
    foreign = Agent.objects.filter(tenant=other, name="foreign").first() or agent_create(
        tenant=other, name="foreign", created_by=None
    )

    signature = f"console-bench:{args.items}"
    loaded = MemoryItem.objects.filter(source=signature).count()
    if loaded != args.items:
        began = time.perf_counter()
        # A throwaway bench database: emptied directly, not through the services.
        MemoryItem.objects.filter(tenant__in=[tenant, other]).delete()
        # No timed page ranks by vector: the HNSW index is dropped in this database
        # (maintaining it would make the load take most of an hour on a small machine).
        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX IF EXISTS memory_item_embedding_hnsw")
        texts = generate_texts(args.items, seed=1)
        rng = random.Random(5)
        vectors = np.random.default_rng(5).standard_normal((args.items, 384)).astype("float32")
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        now = timezone.now()
        rows = []
        for n, text in enumerate(texts):
            owner = foreign if n % 20 == 19 else agents[n % len(agents)]
            scope = rng.choice(SCOPES)
            created = now - timedelta(seconds=(args.items - n) * 30)
            rows.append(
                MemoryItem(
                    tenant_id=owner.tenant_id,
                    agent=owner,
                    user_id=f"user-{rng.randrange(100)}" if scope == "user" else "",
                    session_id=f"s-{n // 40}" if scope == "session" else "",
                    scope=scope,
                    scopes=[scope],
                    kind=rng.choice(KINDS),
                    content=text,
                    content_hash=content_hash(text),
                    embedding=vectors[n],
                    source=signature,
                    provenance={"via": "bench"},
                    created_at=created,
                    valid_from=created,
                    invalid_at=created + timedelta(hours=1) if n % 33 == 0 else None,
                    extraction_status="done",
                )
            )
            if len(rows) == 5000:
                MemoryItem.objects.bulk_create(rows)
                rows = []
        if rows:
            MemoryItem.objects.bulk_create(rows)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE memory_item")
        print(f"loaded {args.items:,} rows in {time.perf_counter() - began:.1f}s")
    else:
        print(f"reusing {loaded:,} loaded rows")

    client = Client()
    client.force_login(admin)
    sample = MemoryItem.objects.filter(tenant=tenant).order_by("-created_at")[args.items // 3]

    # A cursor deep into the table: walk to it once the way the pager does.
    def deep_cursor(pages: int) -> str:
        url = "/memories/"
        for _ in range(pages):
            html = client.get(url).content
            url = "/memories/" + re.search(rb'href="(\?[^"]*after=[^"]+)"', html).group(1).decode().replace(
                "&amp;", "&"
            )
        return url

    pages = {
        "list, first page": "/memories/",
        "list, page 200 (keyset)": deep_cursor(200),
        "filter agent + kind": f"/memories/?agent={agents[1].pk}&kind=preference",
        "filter session": "/memories/?session=s-100&validity=all",
        "retired only": "/memories/?validity=superseded",
        "full-text search": "/memories/?q=checkout+timed+out",
        "item detail": f"/memories/{sample.pk}/",
        "dashboard memory panel": "/dashboard/memory/",
    }
    with override_settings(DEBUG=True):
        for label, url in pages.items():
            for _ in range(3):
                assert client.get(url).status_code == 200, url
            times = []
            for _ in range(args.repeat):
                reset_queries()
                began = time.perf_counter()
                client.get(url)
                times.append((time.perf_counter() - began) * 1000)
            queries = len(connection.queries)
            print(
                f"{label:<26} p50 {percentile(times, 0.5):7.1f} ms  p95 {percentile(times, 0.95):7.1f} ms  "
                f"mean {statistics.mean(times):7.1f} ms  {queries} queries"
            )


if __name__ == "__main__":
    main()
