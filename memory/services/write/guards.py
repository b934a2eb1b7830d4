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
from typing import Any

from django.db import transaction

from core.errors import Conflict, ErrorCode, MemoryNotFound
from governance.selectors import as_uuid
from memory import enforcement
from memory.enforcement import MemoryAccess
from memory.holds import audit_blocked, holds_covering_item
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


def modifiable(access: MemoryAccess, item_id: Any, *, lock: bool) -> MemoryItem:
    """The agent's own item in a writable scope, and (like every read) current and not
    expired: an item GET cannot see cannot be changed or deleted by id either.
    ``lock``: take its row lock (inside a transaction)."""
    pk = as_uuid(item_id)
    own = MemoryItem.objects.current().filter(enforcement.modifiable_q(access))
    qs = own.filter(pk=pk) if pk else MemoryItem.objects.none()
    item = (qs.select_for_update() if lock else qs).first()
    if item is None:
        raise MemoryNotFound("Memory not found.")
    return item


def refuse_if_held(item: MemoryItem) -> None:
    """Raise :class:`MemoryHeld` when a hold covers ``item`` (run with its row locked)."""
    holds = holds_covering_item(item)
    if item.legal_hold or holds:
        raise MemoryHeld(item, holds)


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
def modifying(access: MemoryAccess, item_id: Any, operation: str) -> Iterator[MemoryItem]:
    """One transaction changing one existing item: locked, refused (and audited) when
    held. The body runs inside the transaction with the locked item."""
    with audited(access, operation), transaction.atomic():
        item = modifiable(access, item_id, lock=True)
        refuse_if_held(item)
        yield item
