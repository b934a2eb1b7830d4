"""What a change to an existing memory must pass: the item exists for the caller,
its row is locked for the change, and no legal hold covers it.

A refusal is also a record: :func:`modifying` writes the ``legal_hold.blocked``
audit event itself, after the refused transaction rolled back, so every write
path that changes or deletes an item (update, forget, supersede, revive, undo)
leaves the same trace. Whether a hold covers an item is decided by
:mod:`memory.holds`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.errors import Conflict, ErrorCode, MemoryNotFound, MemorySuperseded
from governance.selectors import as_uuid
from memory import enforcement
from memory.enforcement import MemoryAccess
from memory.holds import Holds, audit_blocked
from memory.models import MemoryItem
from memory.services.write.tx import in_transaction


class MemoryHeld(Conflict):
    """The item is under legal hold; ``holds`` are the hold rows covering it."""

    code = ErrorCode.MEMORY_LEGAL_HOLD

    def __init__(self, item: MemoryItem, holds: list[Any]) -> None:
        self.item = item
        self.holds = holds
        super().__init__(
            "This memory is under legal hold and cannot be changed or deleted.",
            details={"item_id": str(item.pk)},
        )


def modifiable(
    access: MemoryAccess, item_id: Any, *, lock: bool, since: datetime | None = None
) -> MemoryItem:
    """The agent's own item in a writable scope, and (like every read) current and not
    expired: an item GET cannot see cannot be changed or deleted by id either.
    ``lock``: take its row lock (inside a transaction).

    With the lock, currency is decided once the lock is granted, at that moment: a
    "current at t" filter evaluated while waiting would use a t taken before a
    concurrent supersede committed, and that supersede retires the row at its own
    (later) clock, so the retired row still looked current at t and two supersedes
    of one item both won. An item retired after ``since`` (when the request began,
    default now) answers 409 ``memory_superseded``; one retired before it is not
    found (404), as without a race."""
    pk = as_uuid(item_id)
    own = MemoryItem.objects.filter(enforcement.modifiable_q(access))
    qs = own.filter(pk=pk) if pk else MemoryItem.objects.none()
    if not lock:
        found = qs.current().first()
        if found is None:
            raise MemoryNotFound("Memory not found.")
        return found
    since = since or timezone.now()
    item = qs.select_for_update().first()
    if item is None:
        raise MemoryNotFound("Memory not found.")
    moment = timezone.now()  # the lock is ours: nothing changes the row from here
    if item.invalid_at is not None and since < item.invalid_at <= moment:
        raise MemorySuperseded(
            "This memory was superseded by a concurrent change; read it again.",
            details={"item_id": str(item.pk)},
        )
    retired = item.invalid_at is not None and item.invalid_at <= moment
    expired = item.retention_until is not None and item.retention_until <= moment
    if retired or expired or item.valid_from > moment:
        raise MemoryNotFound("Memory not found.")
    return item


def refuse_if_held(item: MemoryItem) -> None:
    """Raise :class:`MemoryHeld` when a hold covers ``item`` (run with its row locked)."""
    holds = Holds(item.tenant_id)
    if holds.item_is_held(item):
        raise MemoryHeld(item, holds.covering_item(item))


def held_unchanged(access: MemoryAccess, item: MemoryItem, operation: str) -> bool:
    """For writes that would change an item in passing (a dedup merge): True when a
    hold covers it, and then the change it was spared is audited; the caller leaves
    the row as it is. Runs inside the write's transaction: the write itself goes on."""
    holds = Holds(item.tenant_id)
    if not holds.item_is_held(item):
        return False
    audit_blocked(
        tenant=access.agent.tenant,
        actor=access.actor,
        operation=operation,
        holds=holds.covering_item(item),
        count=1,
        flagged=int(item.legal_hold),
        target=("memory.memoryitem", str(item.pk)),
    )
    return True


def audit_refusal(access: MemoryAccess, exc: MemoryHeld, operation: str) -> None:
    """The blocked-attempt record; outside the refused transaction, so it stays."""
    audit_blocked(
        tenant=access.agent.tenant,
        actor=access.actor,
        operation=operation,
        holds=exc.holds,
        count=1,
        flagged=int(exc.item.legal_hold),
        target=("memory.memoryitem", str(exc.item.pk)),
    )


@contextmanager
def audited(access: MemoryAccess, operation: str) -> Iterator[None]:
    """Around a write's transaction: a :class:`MemoryHeld` raised inside is audited
    once the transaction has rolled back, then re-raised. Must be entered outside
    any transaction, or the record would roll back with the refusal."""
    if in_transaction():
        raise AssertionError("guards.audited() wraps the outermost transaction of a write")
    try:
        yield
    except MemoryHeld as exc:
        audit_refusal(access, exc, operation)
        raise


@contextmanager
def modifying(
    access: MemoryAccess, item_id: Any, operation: str, *, since: datetime | None = None
) -> Iterator[MemoryItem]:
    """One transaction changing one existing item: locked, refused (and audited) when
    held. The body runs inside the transaction with the locked item. ``since``: when
    the request began (see :func:`modifiable`)."""
    with audited(access, operation), transaction.atomic():
        item = modifiable(access, item_id, lock=True, since=since)
        refuse_if_held(item)
        yield item
