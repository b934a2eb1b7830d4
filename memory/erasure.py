"""The builtin memory's subject deleter for erasure (registered in ``MemoryConfig.ready``).

Removes, for one subject (``user_id``) in a tenant or one agent, and for the
datasets the request names (their knowledge chunks, whoever they were written
for): the items — knowledge chunks written for the subject included — (their embedding and
full-text vector live in the same row), every row that depends on them (listed
from the model catalog, hidden ``related_name="+"`` keys included: mentions,
causal edges and their span links, supersessions, contradiction decisions), the
history of those items (old and new text), idempotency records that answer with
those items, and session messages; entities only those items named go, and
entities they shared lose the subject's spellings. Items and messages a legal
hold covers are kept untouched and reported per hold. A named dataset left with
no chunk is deleted as well (as ``DELETE .../datasets/{id}`` does); one a hold or
its own flag keeps chunks of stays with them.

It runs inside the erasure's one transaction (``governance.services.erasure``):
if anything fails, nothing is deleted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.apps import apps
from django.db import connection, models
from django.db.models import Q

from governance.models import Tenant
from governance.services.erasure import DeleterResult, ErasureTarget
from memory.engines import BUILTIN
from memory.extraction.pipeline import delete_orphan_entities, entities_of
from memory.holds import Holds, audit_blocked
from memory.models import Dataset, IdempotencyRecord, MemoryHistory, MemoryItem, SessionMessage
from memory.models.graph import Entity

_BATCH = 2000


def _dataset_chunks(tenant_id: Any, name: str) -> Q:
    """A dataset's chunks, as the dataset hold names them (memory.holds): the
    ``dataset`` key, or ``provenance.dataset`` for rows written without it."""
    named = Dataset.objects.filter(tenant_id=tenant_id, name=name).values("pk")
    return Q(dataset_id__in=named) | Q(provenance__dataset=name)


def check_erasable_datasets(tenant_id: Any, agent_id: Any, names: list[str]) -> dict[str, str]:
    """The dataset checker for erasure requests (registered in ``MemoryConfig.ready``):
    which names this tenant (or, for an agent-scoped request, this agent) has no
    chunks under, and which live in a provider engine (erased by deleting the
    dataset, which asks the engine; erasure here would certify local rows only)."""
    problems: dict[str, str] = {}
    for name in names:
        dataset = Dataset.objects.filter(tenant_id=tenant_id, name=name).first()
        if dataset is None:
            legacy = MemoryItem.objects.filter(tenant_id=tenant_id, provenance__dataset=name)
            if agent_id is not None:
                legacy = legacy.filter(agent_id=agent_id)
            if not legacy.exists():
                problems[name] = "no such dataset in your tenant" + (" for this agent" if agent_id else "")
        elif agent_id is not None and str(dataset.agent_id) != str(agent_id):
            problems[name] = "belongs to another agent; request a tenant-wide erasure"
        elif dataset.engine != BUILTIN:
            problems[name] = f"kept in engine {dataset.engine!r}; delete the dataset to erase it there"
    return problems


def erase_subject_memory(target: ErasureTarget) -> DeleterResult:
    holds = Holds(target.tenant_id)
    scoped = Q(tenant_id=target.tenant_id)
    if target.agent_id is not None:
        scoped &= Q(agent_id=target.agent_id)
    # An empty subject is nobody: a request naming only datasets erases no user's rows.
    mine = scoped & Q(user_id=target.subject) if target.subject else Q(pk__in=[])
    per_dataset = {name: scoped & _dataset_chunks(target.tenant_id, name) for name in target.datasets}
    wanted = mine
    for chunks in per_dataset.values():
        wanted |= chunks
    result = DeleterResult()

    items = MemoryItem.objects.filter(wanted)
    # Before deleting: what each named dataset loses and keeps, for the certificate.
    result.datasets = [
        {
            "name": name,
            "deleted": holds.unheld(MemoryItem.objects.filter(chunks)).count(),
            "held": holds.held(MemoryItem.objects.filter(chunks)).count(),
        }
        for name, chunks in per_dataset.items()
    ]
    # Lock the rows so a concurrent write for the subject waits for the erasure.
    rows = list(holds.unheld(items).select_for_update().values_list("pk", "content_hash"))
    ids = [pk for pk, _ in rows]
    result.content_hashes = [h for _, h in rows]
    counts = delete_items(target.tenant_id, ids)
    if target.subject:
        # History of the subject's items deleted earlier (forget, purge), found by the
        # subject recorded with each event; the history of held items stays with them.
        kept_ids = list(items.values_list("pk", flat=True))
        old_history = MemoryHistory.objects.filter(
            tenant_id=target.tenant_id, details__user_id=target.subject
        )
        if target.agent_id is not None:
            old_history = old_history.filter(agent_id=target.agent_id)
        counts[MemoryHistory._meta.db_table] += old_history.exclude(item_id__in=kept_ids).delete()[0]
    messages = SessionMessage.objects.filter(mine)
    counts[SessionMessage._meta.db_table] = holds.unheld(messages).delete()[0]
    counts[Dataset._meta.db_table] = _delete_emptied_datasets(target, result.datasets)
    result.counts = counts

    result.held = [
        entry for entry in (held_entry(holds, items), held_entry(holds, messages)) if entry is not None
    ]
    if result.held:
        covering = holds.holds_by_id({h for entry in result.held for h in entry["holds"]})
        audit_blocked(
            tenant=Tenant.objects.get(pk=target.tenant_id),
            actor=target.actor,
            # A request naming only datasets is audited under its own operation, so
            # the hold matrix tells the two apart (memory/tests/test_reliability_holds.py).
            operation="erasure" if target.subject else "dataset_erasure",
            holds=covering,
            count=sum(entry["count"] for entry in result.held),
            flagged=sum(entry["flagged"] for entry in result.held),
        )
    return result


def _delete_emptied_datasets(target: ErasureTarget, entries: list[dict[str, Any]]) -> int:
    """Delete each named builtin dataset that has no chunk left and no legal-hold
    flag, noting in its certificate entry whether it went. An agent-scoped request
    names only the agent's own datasets (the request-time check)."""
    deleted = 0
    for entry in entries:
        dataset = Dataset.objects.filter(tenant_id=target.tenant_id, name=entry["name"]).first()
        entry["dataset_deleted"] = False
        if dataset is None:
            continue
        entry["legal_hold_flag"] = dataset.legal_hold
        if dataset.legal_hold or dataset.engine != BUILTIN:
            continue
        if MemoryItem.objects.filter(dataset=dataset).exists():
            continue
        dataset.delete()
        entry["dataset_deleted"] = True
        deleted += 1
    return deleted


def held_entry(holds: Holds, rows: Any) -> dict[str, Any] | None:
    """What a hold kept of ``rows``: the count, which hold covered how many, and how
    many carry the row's own ``legal_hold`` flag (a flag is not a hold row)."""
    kept = rows.count()
    if not kept:
        return None
    by_hold = holds.covering(rows)
    return {
        "table": rows.model._meta.db_table,
        "count": kept,
        "holds": sorted(by_hold),
        "by_hold": dict(sorted(by_hold.items())),
        "flagged": rows.filter(legal_hold=True).count(),
    }


def delete_items(tenant_id: Any, ids: list[Any]) -> dict[str, int]:
    """Delete items with everything derived from them, counted per table: their
    history, idempotency records answering with them, every dependent row the model
    catalog lists, and entities left unnamed (the rest are re-derived). Callers have
    decided holds already and locked the rows."""
    counts: dict[str, int] = {
        MemoryItem._meta.db_table: 0,
        MemoryHistory._meta.db_table: 0,
        IdempotencyRecord._meta.db_table: 0,
        Entity._meta.db_table: 0,
    }
    touched: set[Any] = set()
    for start in range(0, len(ids), _BATCH):
        chunk = ids[start : start + _BATCH]
        counts[MemoryHistory._meta.db_table] += MemoryHistory.objects.filter(
            tenant_id=tenant_id, item_id__in=chunk
        ).delete()[0]
        counts[IdempotencyRecord._meta.db_table] += delete_idempotency_records(
            tenant_id=tenant_id, item_ids=[str(pk) for pk in chunk]
        )
        touched.update(entities_of(chunk))
        for label, count in _delete_dependents(MemoryItem, chunk).items():
            table = apps.get_model(label)._meta.db_table
            counts[table] = counts.get(table, 0) + count
        counts[MemoryItem._meta.db_table] += _delete_rows(MemoryItem, chunk)
    counts[Entity._meta.db_table] += delete_orphan_entities(tenant_id, touched)
    return counts


def reverse_relations(model: type[models.Model]) -> Iterator[Any]:
    """Every foreign key (or one-to-one) pointing at ``model``, from the model
    catalog. ``include_hidden``: ``related_name="+"`` keys are not in
    ``_meta.related_objects``, and missing one leaves a row the database's foreign
    key then refuses to orphan."""
    for field in model._meta.get_fields(include_hidden=True):
        if field.auto_created and not field.concrete and (field.one_to_many or field.one_to_one):
            yield field


def _delete_dependents(model: type[models.Model], ids: list[Any]) -> dict[str, int]:
    """Delete (or detach) every row that points at these rows, model by model.

    Doing it here, in one statement per model, lets the items themselves go in one
    plain DELETE: Django's cascade collector would first load every item (with its
    embedding) into Python, which dominated the erasure time. Each dependent's own
    dependents go through the collector (span links go with their causal edges)."""
    counts: dict[str, int] = {}
    for relation in reverse_relations(model):
        related = relation.related_model
        rows = related._base_manager.filter(**{f"{relation.field.name}__in": ids})
        if relation.on_delete is models.CASCADE:
            _, per_model = rows.delete()
            for label, deleted in per_model.items():
                counts[label] = counts.get(label, 0) + deleted
        elif relation.on_delete is models.SET_NULL:
            rows.update(**{relation.field.name: None})
        # PROTECT and RESTRICT: the database refuses the delete below, and the
        # erasure's one transaction rolls back everything (nothing half-erased).
    return counts


def _delete_rows(model: Any, ids: list[Any]) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {model._meta.db_table} WHERE {model._meta.pk.column} = ANY(%s)",  # noqa: S608 - model names
            [list(ids)],
        )
        return cursor.rowcount


def delete_idempotency_records(*, tenant_id: Any, item_ids: list[str]) -> int:
    """Idempotency records store the answer (item ids), matched by text: a batch
    answer lists many items, and any of them being erased removes the record."""
    if not item_ids:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            DELETE FROM {IdempotencyRecord._meta.db_table} r
            WHERE r.tenant_id = %s
              AND EXISTS (SELECT 1 FROM unnest(%s::text[]) AS i(id)
                          WHERE r.result::text LIKE '%%' || i.id || '%%')
            """,  # noqa: S608 - the table name is the model's own
            [tenant_id, item_ids],
        )
        return cursor.rowcount
