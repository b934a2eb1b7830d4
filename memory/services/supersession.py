"""Soft supersession: retire a fact in favour of a new one, and revive it later.

Each item keeps one validity interval (``valid_from`` .. ``invalid_at``), so
``as_of`` answers stay exact across any sequence: superseding writes a new item
and closes the old one's interval; reviving re-asserts the old text as a new
item that supersedes the current successor (the retired row is never reopened,
which would rewrite what was current in between).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from core.errors import ApiError, MemoryNotFound, MemoryNotSuperseded, field_error
from core.vocabulary import Classification
from governance.selectors import as_uuid
from memory.enforcement import MemoryAccess, modifiable_q, read_scopes, visible_q
from memory.models import MemoryHistory, MemoryItem, Supersession
from memory.services.write import MemoryDraft, Prepared, checked_content, guards, history_row, prepare, store


@dataclass
class SupersedeOutcome:
    old: MemoryItem
    new: MemoryItem
    record: Supersession


def successor_draft(old: MemoryItem, content: str) -> MemoryDraft:
    return MemoryDraft(
        content=content,
        scope=old.scope,
        kind=old.kind,
        record_kind=old.record_kind,
        classification=str(Classification(old.classification).label),
        user_id=old.user_id,
        session_id=old.session_id,
        team=old.team,
        project=old.project,
        source=old.source,
        metadata=old.metadata,
    )


def memory_supersede(
    *, access: MemoryAccess, item_id: Any, content: str, reason: str = "", event: str = "superseded"
) -> SupersedeOutcome:
    """Write ``content`` as a new item with the old one's keys and retire the old one."""
    began = timezone.now()
    current = guards.modifiable(access, item_id, lock=False)  # 404 before the slow work
    prepared = _successor(access, current, checked_content(content))
    # A concurrent supersede that retired the item meanwhile makes this one 409.
    with guards.modifying(access, item_id, "supersede", since=began) as old:
        new = store(access, [prepared], "supersede")[0].item
        record = retire(access, old=old, new=new, reason=reason, event=event)
    return SupersedeOutcome(old, new, record)


def _successor(access: MemoryAccess, current: MemoryItem, text: str) -> Prepared:
    """The prepared successor of ``current`` (outside any transaction: detection and
    embedding are slow)."""
    if text == current.content:
        raise field_error("content", "Same as the memory it supersedes.")
    prepared = prepare(access, [successor_draft(current, text)])[0]
    if isinstance(prepared, ApiError):
        raise prepared  # refused by the policy (for example personal data)
    return prepared


def retire(
    access: MemoryAccess, *, old: MemoryItem, new: MemoryItem, reason: str, event: str = "superseded"
) -> Supersession:
    """Retire ``old`` in favour of the stored ``new``: run inside the transaction that
    locked ``old``. The old interval ends exactly where the new one starts: at no
    moment are both current, and at no moment is neither."""
    now = new.valid_from
    old.invalid_at = now
    old.save(update_fields=["invalid_at", "updated_at"])
    record = Supersession.objects.create(
        tenant_id=access.tenant_id,
        old_item=old,
        new_item=new,
        reason=reason[:200],
        actor=access.actor.as_json(),
        created_at=now,
    )
    history_row(
        access,
        old,
        event,
        old=old.content,
        new=new.content,
        details={"new_item_id": str(new.pk), "reason": reason[:200]},
    ).save()
    return record


def memory_revive(*, access: MemoryAccess, item_id: Any) -> SupersedeOutcome:
    """Re-assert a retired item: its text becomes current again as a new item that
    supersedes whatever currently succeeds it."""
    pk = as_uuid(item_id)
    retired = (
        MemoryItem.objects.filter(modifiable_q(access), pk=pk, invalid_at__isnull=False).first()
        if pk
        else None
    )
    if retired is None:
        raise MemoryNotFound("No retired memory with this id.")
    successor = retired
    # Follow the chain to the item currently in force (bounded: a chain is acyclic).
    for _ in range(1000):
        record = (
            Supersession.objects.filter(old_item=successor, reverted_at__isnull=True)
            .order_by("-created_at")
            .first()
        )
        if record is None:
            break
        successor = record.new_item
    if successor.invalid_at is not None:
        raise MemoryNotSuperseded("Nothing currently supersedes this memory.")
    # The revived text is prepared before the transaction, like any write.
    prepared = _successor(access, successor, checked_content(retired.content))
    with guards.modifying(access, successor.pk, "revive") as current:
        new = store(access, [prepared], "supersede")[0].item
        record = retire(
            access, old=current, new=new, reason=f"revived {retired.pk}", event=MemoryHistory.Event.SUPERSEDED
        )
        Supersession.objects.filter(old_item=retired, reverted_at__isnull=True).update(
            reverted_at=timezone.now()
        )
        history_row(access, retired, MemoryHistory.Event.REVIVED, details={"new_item_id": str(new.pk)}).save()
    return SupersedeOutcome(current, new, record)


def memory_history(access: MemoryAccess, item_id: Any) -> dict[str, Any]:
    """An item (retired ones included), what it supersedes, what superseded it, and
    every recorded mutation."""
    pk = as_uuid(item_id)
    q = visible_q(access, read_scopes(access, None), include_superseded=True)
    item = MemoryItem.objects.filter(q, pk=pk).defer("embedding", "search_vector").first() if pk else None
    if item is None:
        raise MemoryNotFound("Memory not found.")
    visible_ids = MemoryItem.objects.filter(q).values("pk")

    def record(r: Supersession, other: Any) -> dict[str, Any]:
        return {
            "item_id": str(other),
            "reason": r.reason,
            "at": r.created_at.isoformat(),
            "reverted_at": r.reverted_at.isoformat() if r.reverted_at else None,
        }

    supersedes = Supersession.objects.filter(new_item=item, old_item__in=visible_ids)
    superseded_by = Supersession.objects.filter(old_item=item, new_item__in=visible_ids)
    events = MemoryHistory.objects.filter(tenant_id=access.tenant_id, item_id=item.pk)
    return {
        "item": item,
        "supersedes": [record(r, r.old_item_id) for r in supersedes],
        "superseded_by": [record(r, r.new_item_id) for r in superseded_by],
        "events": [
            {
                "event": e.event,
                "actor_type": e.actor_type,
                "actor_id": e.actor_id,
                "old_content": e.old_content,
                "new_content": e.new_content,
                "details": e.details,
                "at": e.created_at.isoformat(),
            }
            for e in events
        ],
    }
