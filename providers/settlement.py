"""Settled writes: follow a queued provider write until the provider says it is done.

Mem0 adds, Zep adds and deletes, Cognee cognify runs and Graphiti messages are
processed by the provider after it answered. Such a write is recorded as a
:class:`ProviderWrite` (in the caller's transaction) and a reconcile task is
enqueued through the outbox; the task asks the provider's own status
(``MemoryAdapter.settle``: Mem0 ``/v1/event/{id}/``, Zep ``task.get``, Cognee
``/datasets/status``, Graphiti's episodes) and records ``settled`` or ``failed``
with the provider's reason. A write still queued is asked again by the beat task
(:func:`writes_reconcile_due`) with a growing delay, up to a bound, after which it
is ``failed`` with fedmem's reason (the provider never answered).
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.tasks import enqueue_on_commit
from governance.models import Agent, Tenant
from governance.services.audit import subject_hash
from providers.adapters.base import AdapterError, OperationContext, Settlement, WriteResult
from providers.models import EngineInstance, ProviderWrite

FIRST_DELAY_SECONDS = 5
MAX_DELAY_SECONDS = 600


def _max_attempts() -> int:
    return int(getattr(settings, "FEDMEM_RECONCILE_MAX_ATTEMPTS", 40))


def _delay(attempts: int) -> timedelta:
    return timedelta(seconds=min(MAX_DELAY_SECONDS, FIRST_DELAY_SECONDS * 2 ** min(attempts, 8)))


def write_track(
    *,
    engine: EngineInstance,
    tenant: Tenant,
    agent: Agent | None,
    ctx: OperationContext,
    operation: str,
    result: WriteResult,
    erasure_id: Any = None,
    enqueue: bool = True,
) -> ProviderWrite | None:
    """Record a queued write and enqueue its first check after commit; None for a write
    that is already settled (or gave nothing to follow)."""
    if result.status != "queued" or not result.handle:
        return None
    write = ProviderWrite.objects.create(
        id=uuid.uuid4(),
        tenant=tenant,
        agent=agent,
        engine=engine,
        operation=operation,
        handle=dict(result.handle),
        scope={"user_id": ctx.user_id, "session_id": ctx.session_id},
        external_ids=list(result.external_ids),
        detail=dict(result.detail),
        erasure_id=erasure_id,
        next_check_at=timezone.now() + _delay(0),
    )
    if enqueue:
        enqueue_on_commit("providers.reconcile_write", str(write.pk))
    return write


def _context(write: ProviderWrite) -> OperationContext:
    from providers.services import operation_context

    return operation_context(
        tenant=write.tenant,
        operation="settle",
        agent=write.agent,
        user_id=write.scope.get("user_id") or None,
        session_id=write.scope.get("session_id") or None,
        timeout_seconds=write.engine.timeout_seconds,
    )


def sealed_scope(scope: dict[str, Any]) -> dict[str, Any]:
    """The scope a write keeps once it has its final answer: nothing is asked any more,
    so the subject stays only as its keyed hash (an erasure leaves it nowhere in clear)."""
    user = scope.get("user_id")
    if not user:
        return scope
    return {**scope, "user_id": None, "subject_hash": subject_hash(user)}


def _apply(write: ProviderWrite, outcome: Settlement) -> None:
    write.attempts += 1
    write.detail = {**write.detail, **outcome.to_dict()["detail"]}
    if outcome.status == "queued":
        if write.attempts >= _max_attempts():
            write.status = ProviderWrite.Status.FAILED
            write.reason = f"The provider had not settled the write after {write.attempts} checks."
            write.settled_at = timezone.now()
            write.scope = sealed_scope(write.scope)
        else:
            write.next_check_at = timezone.now() + _delay(write.attempts)
        return
    write.status = outcome.status
    write.reason = (outcome.reason or "")[:2000]
    if outcome.external_ids:
        write.external_ids = outcome.external_ids
    write.settled_at = timezone.now()
    write.next_check_at = None
    write.scope = sealed_scope(write.scope)


def _dataset_follow(write: ProviderWrite) -> None:
    """A Cognee graph build settled or failed: the dataset's graph status says so."""
    from memory.models import Dataset

    name = write.handle.get("dataset")
    if write.operation != "build_graph" or not name or write.status == ProviderWrite.Status.QUEUED:
        return
    status = Dataset.Graph.BUILT if write.status == ProviderWrite.Status.SETTLED else Dataset.Graph.FAILED
    Dataset.objects.filter(tenant=write.tenant, engine=write.engine_id, name=name).update(
        graph_status=status, graph_built_at=timezone.now() if status == Dataset.Graph.BUILT else None
    )


def write_reconcile(*, write_id: Any) -> str | None:
    """Ask the provider once about one queued write; returns its status (None: gone)."""
    from providers.services import adapter_for

    with transaction.atomic():
        write = (
            ProviderWrite.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("tenant", "agent", "engine")
            .filter(pk=write_id)
            .first()
        )
        if write is None:
            return None
        if write.status != ProviderWrite.Status.QUEUED:
            return str(write.status)
        try:
            adapter = adapter_for(write.engine, write.tenant)
            outcome = adapter.check_write(_context(write), write.handle)
        except AdapterError as exc:
            if exc.retryable:
                # The provider is down or slow: its answer is still to come.
                outcome = Settlement("queued", detail={"last_error": exc.reason})
            else:
                outcome = Settlement("failed", reason=exc.message, detail={"error": exc.reason})
        _apply(write, outcome)
        write.save()
        _dataset_follow(write)
        return str(write.status)


def writes_reconcile_due(*, limit: int = 200) -> dict[str, int]:
    """The beat task's body: every queued write whose next check is due."""
    due = list(
        ProviderWrite.objects.filter(status=ProviderWrite.Status.QUEUED, next_check_at__lte=timezone.now())
        .order_by("next_check_at")
        .values_list("pk", flat=True)[:limit]
    )
    counts = {"checked": 0, "settled": 0, "failed": 0, "queued": 0}
    for write_id in due:
        status = write_reconcile(write_id=write_id)
        if status is not None:
            counts["checked"] += 1
            counts[status] = counts.get(status, 0) + 1
    return counts


def write_wait(
    *, write: ProviderWrite, budget_seconds: float, interval_seconds: float = 0.2
) -> ProviderWrite:
    """Ask about a write until it is settled or failed, or the budget is spent (an
    erasure waits for the provider's final answer this way). The budget bounds the
    wait, never the outcome: a write still queued keeps being followed by the beat."""
    deadline = time.monotonic() + max(0.0, budget_seconds)
    while True:
        write_reconcile(write_id=write.pk)
        write.refresh_from_db()
        if write.status != ProviderWrite.Status.QUEUED or time.monotonic() >= deadline:
            return write
        time.sleep(interval_seconds)
