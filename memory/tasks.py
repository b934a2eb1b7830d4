"""Celery entry points for builtin memory upkeep; each calls one service."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="memory.retention_sweep", acks_late=True)
def retention_sweep() -> dict[str, int]:
    from memory.services.retention import retention_sweep as sweep

    report = sweep()
    return {"deleted": report.deleted, "kept_held": report.kept_held}
