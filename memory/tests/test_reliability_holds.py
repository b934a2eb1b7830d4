"""Reliability suite for holds and erasure (issue 15). Each test prints its figures.

* Canary scan: after an erasure in the presence of contradictions, knowledge
  chunks, shared entities, dataset holds and released holds, the canary (in the
  subject id and in the content) is in no text, JSON, array or full-text column
  of any model the catalog lists (every model, ``_meta.get_fields()``) -> 0 hits.
  The same scan after an erasure that names datasets of chunks ingested with no
  ``user_id`` (causal chains, shared entities, a dataset hold and an item hold
  among them): the erased canary -> 0 hits, the held rows' canary -> unchanged.
* Hold x write-path matrix: every write path that can change or delete existing
  memory (provider forget included, against a local engine), against a hold of
  every target the hold model offers, changes 0 held rows (full row snapshots of
  the item and its derived graph before and after), and every refusal is audited
  as ``legal_hold.blocked`` naming the hold.

Run: ``python -m pytest memory/tests/test_reliability_holds.py -q -s``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.search import SearchVectorField
from django.db import connection, models
from django.db.models.functions import Cast
from django.utils import timezone

from core.errors import ApiError
from governance.models import AuditEvent, LegalHold, Role
from governance.services.erasure import ErasureTarget, erasure_request_create, erasure_run
from governance.services.holds import legal_hold_place, legal_hold_release
from governance.tests import factories as f
from memory.extraction.pipeline import extract_item
from memory.models import ContradictionDecision, MemoryItem, SpanLink
from memory.services.backfill import extraction_backfill
from memory.services.items import memory_forget, memory_purge, memory_update
from memory.services.knowledge import knowledge_dataset_delete, knowledge_ingest
from memory.services.retention import retention_sweep
from memory.services.supersession import memory_supersede
from memory.tests.conftest import remember
from memory.tests.graph_helpers import fact
from providers.erasure import forget_subject_in_engines

TEXT_TYPES = (models.CharField, models.TextField, models.JSONField)


def catalog_text_columns() -> list[tuple[type[models.Model], str]]:
    """Every stored text-like field of every model (auto-created through tables
    included): char/text, JSON, arrays of those, and generated full-text vectors."""
    out = []
    for model in apps.get_models(include_auto_created=True):
        if model._meta.proxy or not model._meta.managed:
            continue
        for field in model._meta.get_fields():
            if not getattr(field, "concrete", False) or getattr(field, "column", None) is None:
                continue
            stored = field.output_field if isinstance(field, models.GeneratedField) else field
            if isinstance(stored, ArrayField):
                stored = stored.base_field
            if isinstance(stored, (*TEXT_TYPES, SearchVectorField)):
                out.append((model, field.name))
    return out


def canary_hits(needle: str) -> dict[str, int]:
    """Rows per ``table.column`` whose text (cast, so JSON keys, array items and
    full-text lexemes count) contains ``needle``, case-insensitively."""
    hits: dict[str, int] = {}
    for model, name in catalog_text_columns():
        count = (
            model._base_manager.annotate(_as_text=Cast(name, models.TextField()))
            .filter(_as_text__icontains=needle.lower())
            .count()
        )
        if count:
            hits[f"{model._meta.db_table}.{model._meta.get_field(name).column}"] = count
    return hits


def _erase(world, subject: str):
    request = erasure_request_create(
        tenant=world.tenant, actor=world.officer, subject=subject, scope="tenant", reason="GDPR art. 17"
    )
    return erasure_run(request_id=request.pk)


def test_the_catalog_lists_every_text_column():
    columns = {(m._meta.db_table, n) for m, n in catalog_text_columns()}
    for expected in [
        ("memory_item", "content"),
        ("memory_item", "search_vector"),
        ("memory_item", "provenance"),
        ("memory_entity", "aliases"),
        ("memory_contradiction", "details"),
        ("governance_legalhold", "subject"),
        ("governance_auditevent", "data"),
        ("core_outboxmessage", "args"),
    ]:
        assert expected in columns, expected
    print(
        f"\ncatalog: {len(columns)} text/JSON/array/full-text columns "
        f"over {len({t for t, _ in columns})} tables"
    )


def test_erasure_leaves_zero_canary_hits_in_the_whole_catalog(world, access, settings):
    canary = f"canary{uuid.uuid4().hex[:12]}"
    subject = f"subj-{canary}"
    second = f.member(world.tenant, Role.SECURITY_OFFICER, username="officer2")
    # A released subject hold (the hold row must not keep the subject in clear).
    hold = legal_hold_place(
        tenant=world.tenant, actor=world.officer, target="subject", subject=subject, reason="r"
    )
    legal_hold_release(hold=hold, actor=second, reason="closed")
    # An active dataset hold on someone else's dataset, next to the subject's memory.
    knowledge_ingest(access=access, texts=["The office lease renews in March."], dataset_name="leases")
    legal_hold_place(tenant=world.tenant, actor=world.officer, target="dataset", dataset="leases", reason="r")
    # Plain facts, a contradiction decision, a causal chain linked to another subject's.
    fact(access, "The billing service runs on MySQL.", user_id=subject, scope="user")
    remember(
        access,
        "The billing service runs on PostgreSQL.",
        user_id=subject,
        scope="user",
        check_contradictions=True,
    )
    # (Known wordings make the decision and the span link; the subject id is the canary.)
    fact(access, "Verbose debug logging led to a full disk on db-1.", user_id=subject, scope="user")
    for text in (
        "The database crash happened because of a full disk on db-1.",
        "The database crash caused checkout failures.",
    ):
        fact(access, text, user_id="cust-keep", scope="user")
    # Shared entities: one the subject created and another merged into, one the reverse.
    settings.FEDMEM_ENTITY_MERGE_THRESHOLD = 0.9  # "Zorblax Industries" ~ "... Group" merge
    fact(access, "Zorblax Industries Group signed the lease.", user_id=subject)
    fact(access, "Zorblax Industries bought the plant.", user_id="cust-keep")
    fact(access, "Quentin Ortelius approved the budget.", user_id="cust-keep")
    fact(access, "Quentin Ortelius of Zorblax Industries Group called.", user_id=subject)
    # Knowledge written for the subject, extracted into the graph.
    chunks = knowledge_ingest(
        access=access,
        texts=[f"Case file {canary}: the refund was promised by phone."],
        dataset_name="cases",
        user_id=subject,
    )
    for chunk_id in chunks.item_ids:
        extract_item(chunk_id)
    assert ContradictionDecision.objects.exists() and SpanLink.objects.exists()
    before = canary_hits(canary)
    assert {"memory_item.content", "memory_item.user_id", "memory_history.new_content"} <= set(before)

    request = _erase(world, subject)

    after = canary_hits(canary)
    kept = MemoryItem.objects.filter(user_id="cust-keep").count()
    print(
        f"\ncanary scan: {len(catalog_text_columns())} columns, hits before={sum(before.values())} "
        f"({len(before)} columns), after={sum(after.values())}; status={request.status}; "
        f"deleted={sum(request.certificate['deleted'].values())} rows; other subject's items kept={kept}"
    )
    assert after == {}, after
    assert request.status == "completed"
    assert kept == 4
    assert not LegalHold.objects.filter(subject__icontains=canary).exists()


def test_a_dataset_erasure_leaves_zero_canary_hits_outside_held_rows(world, access, settings):
    """Chunks with no user_id reach erasure only by their dataset. Two canaries: one
    in what must go, one in what holds keep (an item hold on a chunk of the named
    dataset, a dataset hold on a second named dataset)."""
    # Two unrelated tokens: neither canary may contain the other.
    erased, held = f"canary{uuid.uuid4().hex[:12]}", f"keptcanary{uuid.uuid4().hex[:12]}"
    settings.FEDMEM_ENTITY_MERGE_THRESHOLD = 0.9  # "Zorblax Industries" ~ "... Group" merge
    fact(access, "Zorblax Industries bought the plant.", user_id="cust-keep")
    fact(access, "The database crash caused checkout failures.", user_id="cust-keep")
    outcome = knowledge_ingest(
        access=access,
        texts=[
            f"Vendor note {erased}: Zorblax Industries Group signed the lease.",
            f"The {erased} outage caused checkout failures.",
            f"Held note {held}: the vendor disputes the invoice.",
        ],
        dataset_name="vendor-notes",
    )
    leases = knowledge_ingest(
        access=access, texts=[f"Lease note {held}: renews in March."], dataset_name="leases"
    )
    for chunk_id in [*outcome.item_ids, *leases.item_ids]:
        extract_item(chunk_id)
    chunks = MemoryItem.objects.filter(pk__in=outcome.item_ids)
    assert not chunks.exclude(user_id="").exists()  # no subject reaches these
    held_chunk = chunks.get(content__contains=held)
    item_hold = legal_hold_place(
        tenant=world.tenant, actor=world.officer, target="item", item_id=held_chunk.pk, reason="r"
    )
    set_hold = legal_hold_place(
        tenant=world.tenant, actor=world.officer, target="dataset", dataset="leases", reason="r"
    )
    before, before_held = canary_hits(erased), canary_hits(held)
    assert {"memory_item.content", "memory_history.new_content"} <= set(before)

    request = erasure_request_create(
        tenant=world.tenant,
        actor=world.officer,
        datasets=["vendor-notes", "leases"],
        scope="tenant",
        reason="vendor contract ended",
    )
    request = erasure_run(request_id=request.pk)

    after, after_held = canary_hits(erased), canary_hits(held)
    kept = MemoryItem.objects.filter(user_id="cust-keep").count()
    per_dataset = {d["name"]: (d["deleted"], d["held"]) for d in request.certificate["datasets"]}
    by_hold = {h["hold"]: h["rows"] for h in request.certificate["holds"]}
    print(
        f"\ndataset erasure canary scan: {len(catalog_text_columns())} columns, erased canary "
        f"before={sum(before.values())} ({len(before)} columns) after={sum(after.values())}; held "
        f"canary before={sum(before_held.values())} after={sum(after_held.values())}; "
        f"status={request.status}; datasets (deleted, held)={per_dataset}; other items kept={kept}"
    )
    assert after == {}, after
    assert after_held == before_held
    assert request.status == "completed"
    assert per_dataset == {"vendor-notes": (2, 1), "leases": (0, 1)}
    assert by_hold == {str(item_hold.pk): {"memory_item": 1}, str(set_hold.pk): {"memory_item": 1}}
    assert kept == 2


# --- hold x write-path matrix -----------------------------------------------------------

SUBJECT = "cust-held"
ROW = "SELECT row_to_json(t)::text FROM"
CHUNK = "The billing service runs on MySQL."


def _hold_fields(world, chunk: MemoryItem) -> dict[str, dict[str, Any]]:
    """A hold of each target covering the chunk; a target added to the model without
    an entry here fails the matrix (KeyError), so it cannot go untested."""
    return {
        LegalHold.Target.SUBJECT: {"subject": SUBJECT},
        LegalHold.Target.AGENT: {"agent": world.agent},
        LegalHold.Target.SCOPE: {"scope": "agent", "agent": world.agent},
        LegalHold.Target.DATASET: {"dataset": "held-set"},
        LegalHold.Target.ITEM: {"item_id": chunk.pk},
    }


def _snapshot(chunk_id: Any) -> dict[str, list[str]]:
    """The held rows as the database stores them: the item, its mentions, causal
    edges, their span links, and its dataset row."""
    queries = {
        "memory_item": f"{ROW} memory_item t WHERE id = %s",
        "memory_mention": f"{ROW} memory_mention t WHERE item_id = %s ORDER BY id",
        "memory_causal_edge": f"{ROW} memory_causal_edge t WHERE item_id = %s ORDER BY id",
        "memory_span_link": (
            f"{ROW} memory_span_link t WHERE source_id IN "
            "(SELECT id FROM memory_causal_edge WHERE item_id = %s) ORDER BY id"
        ),
        "memory_dataset": (
            f"{ROW} memory_dataset t WHERE id = (SELECT dataset_id FROM memory_item WHERE id = %s)"
        ),
    }
    out = {}
    with connection.cursor() as cursor:
        for table, sql in queries.items():
            cursor.execute(sql, [chunk_id])
            out[table] = [row[0] for row in cursor.fetchall()]
    return out


def _attempt(call: Callable[[], Any]) -> None:
    # A refusal is one correct answer; the snapshot and the audit decide.
    with contextlib.suppress(ApiError):
        call()


# Holds that reach a subject's records in a provider engine (the others name local rows).
REMOTE_TARGETS = {LegalHold.Target.SUBJECT, LegalHold.Target.AGENT}


@pytest.fixture
def crm():
    """A provider engine (the ``custom`` protocol, on loopback) holding the subject's records."""
    from providers.tests.engines import custom_engine, declare

    server = custom_engine([{"id": "r1", "kind": "fact", "text": CHUNK}])
    declare("crm", server.url)
    yield server
    server.stop()


def _paths(world, access, chunk: MemoryItem) -> dict[str, Callable[[], Any]]:
    """Every write path that can change or delete existing memory -> one attempt on
    the held chunk. Keyed by the ``operation`` its ``legal_hold.blocked`` event names."""
    later = timezone.now() + timedelta(days=2)
    return {
        "update": lambda: memory_update(
            access=access, item_id=chunk.pk, content="The billing service is gone."
        ),
        "delete": lambda: memory_forget(access=access, item_id=chunk.pk),
        "purge": lambda: memory_purge(access=access, scope="agent", confirm=True),
        "supersede": lambda: memory_supersede(
            access=access, item_id=chunk.pk, content="The billing service runs on Oracle."
        ),
        "contradiction": lambda: remember(
            access,
            "The billing service runs on PostgreSQL.",
            user_id=SUBJECT,
            scope="agent",
            check_contradictions=True,
        ),
        "dedup_merge": lambda: knowledge_ingest(
            access=access,
            texts=[CHUNK],
            dataset_name="held-set",
            user_id=SUBJECT,
            classification="confidential",
            retention_days=36500,
        ),
        "re_extraction": lambda: (extraction_backfill(which="all"), extract_item(chunk.pk)),
        "retention": lambda: retention_sweep(now=later),
        "provider_forget": lambda: forget_subject_in_engines(
            ErasureTarget(tenant_id=world.tenant.pk, subject=SUBJECT, agent_id=None)
        ),
        "erasure": lambda: _erase(world, SUBJECT),
        "dataset_erasure": lambda: erasure_run(
            request_id=erasure_request_create(
                tenant=world.tenant, actor=world.officer, datasets=["held-set"], scope="tenant", reason="r"
            ).pk
        ),
        "dataset_delete": lambda: knowledge_dataset_delete(access=access, name="held-set"),
    }


@pytest.mark.parametrize("target", LegalHold.Target.values)
def test_no_write_path_changes_a_held_row(world, access, target, crm):
    outcome = knowledge_ingest(
        access=access, texts=[CHUNK], dataset_name="held-set", user_id=SUBJECT, retention_days=1
    )
    [chunk_id] = outcome.item_ids
    extract_item(chunk_id)
    chunk = MemoryItem.objects.get(pk=chunk_id)
    hold = legal_hold_place(
        tenant=world.tenant,
        actor=world.officer,
        target=target,
        reason="matrix",
        **_hold_fields(world, chunk)[target],
    )
    before = _snapshot(chunk_id)
    changed: dict[str, list[str]] = {}
    unaudited: list[str] = []
    for operation, call in _paths(world, access, chunk).items():
        _attempt(call)
        after = _snapshot(chunk_id)
        diff = [table for table in before if before[table] != after[table]]
        if diff:
            changed[operation] = diff
        if operation == "provider_forget" and target not in REMOTE_TARGETS:
            continue  # the remote records are not what this hold names
        events = AuditEvent.objects.filter(action="legal_hold.blocked", data__operation=operation)
        if not any(str(hold.pk) in e.data["holds"] for e in events):
            unaudited.append(operation)
    paths = len(_paths(world, access, chunk))
    refusals = paths if target in REMOTE_TARGETS else paths - 1
    remote_deletes = [r.path for r in crm.requests if r.method == "DELETE"]
    print(
        f"\nhold matrix target={target}: paths={paths} changed={len(changed)} {changed or ''} "
        f"refusals audited={refusals - len(unaudited)}/{refusals} {unaudited or ''} "
        f"remote forgets={len(remote_deletes)}"
    )
    assert changed == {}
    assert unaudited == []
    if target in REMOTE_TARGETS:
        assert remote_deletes == []
