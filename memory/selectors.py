"""Reads of the builtin memory that do not rank: one item, listings, export.

Every queryset starts from :func:`memory.enforcement.visible_q`, so tenant,
scope keys, classification, validity and expiry are always part of the SQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from core.errors import MemoryNotFound
from core.vocabulary import Scope
from governance.selectors import as_uuid
from memory.enforcement import MemoryAccess, read_scopes, visible_q
from memory.models import MemoryItem, SessionMessage

# Columns a listing never needs; the embedding alone is ~1.5 KB of text per row.
HEAVY_FIELDS = ("embedding", "search_vector")


def memory_items_visible(
    access: MemoryAccess,
    *,
    scopes: list[str] | None = None,
    kind: str | None = None,
    session_id: str | None = None,
    user_id: str | None = None,
    include_content: bool = True,
) -> QuerySet[MemoryItem]:
    """Everything the caller may read in the given scopes (all of an agent's sessions
    and users unless narrowed), newest first."""
    covered = read_scopes(access, scopes)
    qs = MemoryItem.objects.filter(visible_q(access, covered))
    if kind:
        qs = qs.filter(kind=kind)
    if session_id:
        qs = qs.filter(session_id=session_id)
    if user_id:
        qs = qs.filter(user_id=user_id)
    deferred = HEAVY_FIELDS if include_content else (*HEAVY_FIELDS, "content")
    return qs.defer(*deferred).order_by("-created_at")


def memory_item_get(access: MemoryAccess, item_id: Any) -> MemoryItem:
    """One readable item; a foreign, unknown, expired or out-of-scope id is the same 404."""
    pk = as_uuid(item_id)
    item = None
    if pk is not None:
        q = visible_q(access, read_scopes(access, None))
        item = MemoryItem.objects.filter(q, pk=pk).defer(*HEAVY_FIELDS).first()
    if item is None:
        raise MemoryNotFound("Memory not found.")
    return item


EXPORT_CHUNK = 500


def memory_export_rows(access: MemoryAccess, scopes: list[str] | None) -> Iterator[tuple[str, Any]]:
    """Everything the caller may read, oldest first, as (kind, row) pairs.

    Read in keyset-paginated chunks (one short query per chunk) rather than through
    one server-side cursor: memory stays bounded and no cursor or snapshot is held
    open for as long as a slow client takes to download the export.
    """
    covered = read_scopes(access, scopes)
    items = (
        MemoryItem.objects.filter(visible_q(access, covered))
        .defer(*HEAVY_FIELDS)
        .order_by("created_at", "id")
    )
    after: Q | None = None
    while True:
        chunk = list((items.filter(after) if after is not None else items)[:EXPORT_CHUNK])
        for item in chunk:
            yield "memory", item
        if len(chunk) < EXPORT_CHUNK:
            break
        last = chunk[-1]
        after = Q(created_at__gt=last.created_at) | Q(created_at=last.created_at, id__gt=last.pk)
    if Scope.SESSION in covered:
        messages = session_messages_visible(access).order_by("id")
        last_id = 0
        while True:
            batch = list(messages.filter(id__gt=last_id)[:EXPORT_CHUNK])
            for message in batch:
                yield "session_message", message
            if len(batch) < EXPORT_CHUNK:
                break
            last_id = batch[-1].pk


def session_messages_visible(access: MemoryAccess, session_id: str | None = None) -> QuerySet[SessionMessage]:
    read_scopes(access, [Scope.SESSION])
    qs = SessionMessage.objects.filter(
        Q(retention_until__isnull=True) | Q(retention_until__gt=timezone.now()),
        tenant_id=access.tenant_id,
        agent_id=access.agent.pk,
        classification__lte=access.policy.max_classification_level,
    )
    return qs.filter(session_id=session_id) if session_id else qs
