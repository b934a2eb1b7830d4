"""Backfill of graph extraction: enqueue the existing ``memory.extract_items`` task
for items written before extraction existed, left pending, or failed.

Safe to repeat: the task is idempotent (a run replaces an item's derived rows),
and each batch is published through the outbox only after its status reset commits.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core.tasks import enqueue_on_commit
from memory.models import MemoryItem

SELECTIONS = ("pending", "failed", "all")


def _skip_held(items: Any) -> Any:
    from governance.models import Tenant
    from memory.holds import Holds, audit_blocked

    keep = items.none()
    for tenant_id in items.order_by().values_list("tenant_id", flat=True).distinct():
        holds = Holds(tenant_id)
        mine = items.filter(tenant_id=tenant_id)
        held = holds.held(mine)
        count = held.count()
        if count:
            audit_blocked(
                tenant=Tenant.objects.get(pk=tenant_id),
                actor=None,
                operation="re_extraction",
                holds=holds.holds_by_id(holds.covering(held)),
                count=count,
                flagged=held.filter(legal_hold=True).count(),
            )
        keep |= items.filter(pk__in=holds.unheld(mine).values("pk"))
    return keep


def extraction_backfill(*, which: str, agent_id: Any = None, tenant_id: Any = None, batch: int = 100) -> int:
    """Enqueue extraction for the selected items, ``batch`` ids per task; returns
    how many items were enqueued. ``failed`` and ``all`` reset the status to
    pending (with the error cleared) so progress shows on the items."""
    if which not in SELECTIONS:
        raise ValueError(f"which must be one of {', '.join(SELECTIONS)}")
    items = MemoryItem.objects.all()
    if which != "all":
        items = items.filter(extraction_status=which)
    if agent_id is not None:
        items = items.filter(agent_id=agent_id)
    if tenant_id is not None:
        items = items.filter(tenant_id=tenant_id)
    if which != "pending":
        # Re-extracting replaces the derived graph and resets the row: held items keep theirs.
        items = _skip_held(items)
    ids = [str(pk) for pk in items.order_by("created_at", "id").values_list("pk", flat=True)]
    for start in range(0, len(ids), batch):
        chunk = ids[start : start + batch]
        with transaction.atomic():
            if which != "pending":
                MemoryItem.objects.filter(pk__in=chunk).update(
                    extraction_status=MemoryItem.Extraction.PENDING, extraction_error=""
                )
            enqueue_on_commit("memory.extract_items", chunk)
    return len(ids)
