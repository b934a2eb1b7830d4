"""The builtin memory's subject deleter for erasure (registered in ``MemoryConfig.ready``).

Removes, for one subject (``user_id``) in a tenant or one agent: the items (their
embedding and full-text vector live in the same row), the history of those items
(old and new text), idempotency records that answer with those items, and session
messages. Items and messages a legal hold covers are kept untouched and reported.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.db import connection, models
from django.db.models import Q

from governance.models import Tenant
from governance.services.erasure import DeleterResult, ErasureTarget
from memory.extraction.pipeline import delete_orphan_entities, entities_of
from memory.holds import (
    active_holds,
    audit_blocked,
    held_items_q,
    held_messages_q,
    hold_item_q,
    hold_message_q,
)
from memory.models import IdempotencyRecord, MemoryHistory, MemoryItem, SessionMessage
from memory.models.graph import Entity

_BATCH = 2000


def erase_subject_memory(target: ErasureTarget) -> DeleterResult:
    holds = active_holds(target.tenant_id)
    mine = Q(tenant_id=target.tenant_id, user_id=target.subject)
    if target.agent_id is not None:
        mine &= Q(agent_id=target.agent_id)
    held_q = held_items_q(target.tenant_id, holds)
    held_msg_q = held_messages_q(target.tenant_id, holds)
    result = DeleterResult()

    items = MemoryItem.objects.filter(mine)
    # Lock the rows so a concurrent write for the subject waits for the erasure.
    rows = list(items.exclude(held_q).select_for_update().values_list("pk", "content_hash"))
    ids = [pk for pk, _ in rows]
    result.content_hashes = [h for _, h in rows]
    history = idempotency = deleted_items = 0
    derived: dict[str, int] = {}
    touched: set[Any] = set()
    for start in range(0, len(ids), _BATCH):
        chunk = ids[start : start + _BATCH]
        history += MemoryHistory.objects.filter(tenant_id=target.tenant_id, item_id__in=chunk).delete()[0]
        idempotency += delete_idempotency_records(
            tenant_id=target.tenant_id, item_ids=[str(pk) for pk in chunk]
        )
        touched.update(entities_of(chunk))
        for label, count in _delete_dependents(chunk).items():
            derived[label] = derived.get(label, 0) + count
        deleted_items += _delete_rows(MemoryItem, chunk)
    # An entity name can be the subject's own name: none may outlive its last mention.
    orphans = delete_orphan_entities(target.tenant_id, touched)
    # History of the subject's items deleted earlier (forget, purge), found by the
    # subject recorded with each event; the history of held items stays with them.
    held_ids = list(items.values_list("pk", flat=True))
    old_history = MemoryHistory.objects.filter(tenant_id=target.tenant_id, details__user_id=target.subject)
    if target.agent_id is not None:
        old_history = old_history.filter(agent_id=target.agent_id)
    history += old_history.exclude(item_id__in=held_ids).delete()[0]
    messages = SessionMessage.objects.filter(mine)
    deleted_messages = messages.exclude(held_msg_q).delete()[0]
    result.counts = {
        MemoryItem._meta.db_table: deleted_items,
        MemoryHistory._meta.db_table: history,
        IdempotencyRecord._meta.db_table: idempotency,
        SessionMessage._meta.db_table: deleted_messages,
        Entity._meta.db_table: orphans,
        **{apps.get_model(label)._meta.db_table: count for label, count in derived.items()},
    }

    kept = items.count()
    kept_messages = messages.count()
    if kept or kept_messages:
        covering = [
            h
            for h in holds
            if MemoryItem.objects.filter(mine & hold_item_q(h)).exists()
            or SessionMessage.objects.filter(mine & hold_message_q(h)).exists()
        ]
        hold_ids = [str(h.pk) for h in covering]
        flagged = items.filter(legal_hold=True).count()
        for table, count in (
            (MemoryItem._meta.db_table, kept),
            (SessionMessage._meta.db_table, kept_messages),
        ):
            if count:
                result.held.append({"table": table, "count": count, "holds": hold_ids, "flagged": flagged})
        audit_blocked(
            tenant=Tenant.objects.get(pk=target.tenant_id),
            actor=target.actor,
            operation="erasure",
            holds=covering,
            count=kept + kept_messages,
            flagged=flagged,
        )
    return result


def _delete_dependents(item_ids: list[Any]) -> dict[str, int]:
    """Delete every row that cascades from these items (mentions, causal edges,
    supersessions, and whatever model points at an item later), model by model.

    Listed from the model graph, so a new dependent is covered without editing this.
    Doing it here, in one statement per model, lets the items themselves go in one
    plain DELETE: Django's cascade collector would first load every item (with its
    embedding) into Python, which dominated the erasure time."""
    counts: dict[str, int] = {}
    for relation in MemoryItem._meta.related_objects:
        if relation.many_to_many or relation.on_delete is not models.CASCADE:
            continue
        model = relation.related_model
        # Counted per model, cascades included (span links go with their causal edges).
        _, per_model = model.objects.filter(**{f"{relation.field.name}__in": item_ids}).delete()
        for label, deleted in per_model.items():
            counts[label] = counts.get(label, 0) + deleted
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
