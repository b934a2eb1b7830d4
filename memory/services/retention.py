"""Retention: delete memory past its ``retention_until`` with everything derived from it.

The write path sets ``retention_until`` from the request or the agent policy's
``retention_days``. The sweep deletes overdue items with their history and the
idempotency records answering with them (embedding and full-text vector are
columns of the row), skipping whatever is held — and audits, per tenant, what it
deleted and what holds kept (``retention.sweep``, ``legal_hold.blocked``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from governance.models import Tenant
from governance.services.audit import audit_record
from memory.erasure import delete_idempotency_records
from memory.holds import active_holds, audit_blocked, held_items_q
from memory.models import MemoryHistory, MemoryItem


@dataclass
class SweepReport:
    deleted: int = 0
    kept_held: int = 0
    tenants: dict[str, dict[str, int]] = field(default_factory=dict)


def retention_sweep(*, now: datetime | None = None, batch: int = 1000) -> SweepReport:
    """Delete every overdue unheld item. Safe to run concurrently with itself: rows
    are claimed with SKIP LOCKED, so two sweeps never wait on or double-count a row."""
    now = now or timezone.now()
    report = SweepReport()
    tenant_ids = (
        MemoryItem.objects.filter(retention_until__lte=now).values_list("tenant_id", flat=True).distinct()
    )
    for tenant in Tenant.objects.filter(pk__in=list(tenant_ids)):
        deleted, kept = _sweep_tenant(tenant, now=now, batch=batch)
        report.deleted += deleted
        report.kept_held += kept
        report.tenants[str(tenant.pk)] = {"deleted": deleted, "kept_held": kept}
    return report


def _sweep_tenant(tenant: Tenant, *, now: datetime, batch: int) -> tuple[int, int]:
    deleted = 0
    while True:
        with transaction.atomic():
            holds = active_holds(tenant.pk)
            overdue = MemoryItem.objects.filter(tenant=tenant, retention_until__lte=now)
            ids = list(
                overdue.exclude(held_items_q(tenant.pk, holds))
                .select_for_update(skip_locked=True)
                .values_list("pk", flat=True)[:batch]
            )
            if not ids:
                break
            MemoryHistory.objects.filter(tenant=tenant, item_id__in=ids).delete()
            delete_idempotency_records(tenant_id=tenant.pk, item_ids=[str(i) for i in ids])
            deleted += MemoryItem.objects.filter(pk__in=ids).delete()[0]
    with transaction.atomic():
        holds = active_holds(tenant.pk)
        kept_q = MemoryItem.objects.filter(tenant=tenant, retention_until__lte=now).filter(
            held_items_q(tenant.pk, holds)
        )
        kept = kept_q.count()
        audit_record(
            tenant=tenant,
            actor=None,
            action="retention.sweep",
            data={"deleted": deleted, "kept_held": kept, "as_of": now.isoformat()},
        )
        if kept:
            audit_blocked(
                tenant=tenant,
                actor=None,
                operation="retention",
                holds=holds,
                count=kept,
                flagged=kept_q.filter(legal_hold=True).count(),
            )
    return deleted, kept


def overdue_unheld_count(*, now: datetime | None = None) -> int:
    """Overdue items no hold protects (what a sweep leaves must be none)."""
    now = now or timezone.now()
    overdue = MemoryItem.objects.filter(retention_until__lte=now)
    return sum(
        overdue.filter(tenant_id=tenant_id).exclude(held_items_q(tenant_id)).count()
        for tenant_id in set(overdue.values_list("tenant_id", flat=True))
    )
