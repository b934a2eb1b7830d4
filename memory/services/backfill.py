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
