"""Retention: delete memory past its ``retention_until`` with everything derived from it.

The write path sets ``retention_until`` from the request or the agent policy's
``retention_days``; an agent policy's ``idle_days`` also expires an item nobody
recalled (``last_recalled_at``, or its creation when never recalled) for that many
days. The sweep deletes expired items with their history and the idempotency
records answering with them (embedding and full-text vector are columns of the
row), skipping whatever is held — and audits, per tenant, what it deleted and
what holds kept (``retention.sweep``, ``legal_hold.blocked``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from governance.models import AgentPolicyVersion, Tenant
from governance.selectors import memory_policies_for_tenant
from governance.services.audit import audit_record
from memory.erasure import delete_items
from memory.holds import Holds, audit_blocked
from memory.models import MemoryItem


@dataclass
class SweepReport:
    deleted: int = 0
    kept_held: int = 0
    tenants: dict[str, dict[str, int]] = field(default_factory=dict)


def _idle_tenants() -> set[Any]:
    """Tenants with at least one agent whose newest policy version sets idle_days."""
    latest = AgentPolicyVersion.objects.in_force().values_list("agent__tenant_id", "policy")
    return {tenant_id for tenant_id, policy in latest if (policy or {}).get("idle_days")}


def expired_q(tenant: Tenant, *, now: datetime) -> Q:
    """Items of a tenant past their retention date, or idle longer than their
    agent's policy allows."""
    q = Q(retention_until__lte=now)
    for agent_id, policy in memory_policies_for_tenant(tenant).items():
        if policy.idle_days:
            cutoff = now - timedelta(days=policy.idle_days)
            q |= Q(agent_id=agent_id) & (
                Q(last_recalled_at__lte=cutoff) | Q(last_recalled_at__isnull=True, created_at__lte=cutoff)
            )
    return q


def retention_sweep(*, now: datetime | None = None, batch: int = 1000) -> SweepReport:
    """Delete every expired unheld item. Safe to run concurrently with itself: rows
    are claimed with SKIP LOCKED, so two sweeps never wait on or double-count a row."""
    now = now or timezone.now()
    report = SweepReport()
    tenant_ids = set(
        MemoryItem.objects.filter(retention_until__lte=now).values_list("tenant_id", flat=True).distinct()
    )
    for tenant in Tenant.objects.filter(pk__in=tenant_ids | _idle_tenants()):
        deleted, kept = _sweep_tenant(tenant, now=now, batch=batch)
        report.deleted += deleted
        report.kept_held += kept
        report.tenants[str(tenant.pk)] = {"deleted": deleted, "kept_held": kept}
    return report


def _sweep_tenant(tenant: Tenant, *, now: datetime, batch: int) -> tuple[int, int]:
    deleted = 0
    expired = expired_q(tenant, now=now)
    while True:
        with transaction.atomic():
            holds = Holds(tenant.pk)
            overdue = MemoryItem.objects.filter(tenant=tenant).filter(expired)
            ids = list(
                holds.unheld(overdue).select_for_update(skip_locked=True).values_list("pk", flat=True)[:batch]
            )
            if not ids:
                break
            # Derived rows, history, idempotency answers and entities go with the items.
            deleted += delete_items(tenant.pk, ids)[MemoryItem._meta.db_table]
    with transaction.atomic():
        holds = Holds(tenant.pk)
        kept_q = holds.held(MemoryItem.objects.filter(expired, tenant=tenant))
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
                holds=holds.holds_by_id(holds.covering(kept_q)),
                count=kept,
                flagged=kept_q.filter(legal_hold=True).count(),
            )
    return deleted, kept


def overdue_unheld_count(*, now: datetime | None = None) -> int:
    """Expired items (by date or idleness) no hold protects (what a sweep leaves must be none)."""
    now = now or timezone.now()
    tenant_ids = set(MemoryItem.objects.filter(retention_until__lte=now).values_list("tenant_id", flat=True))
    return sum(
        Holds(tenant.pk)
        .unheld(MemoryItem.objects.filter(tenant=tenant).filter(expired_q(tenant, now=now)))
        .count()
        for tenant in Tenant.objects.filter(pk__in=tenant_ids | _idle_tenants())
    )
