"""The providers' engine forgetter for erasure (registered in ``ProvidersConfig.ready``).

For every engine instance the tenant can use, and every agent in the erasure's
scope, it lists the subject's records (adapter ``list`` with the subject as
``user_id``) and forgets each (adapter ``forget``); an engine that cannot list but
can purge a namespace (Zep: the subject's user and graph) is asked to purge the
subject's. It answers one status per engine: ``forgotten`` (with a count),
``unsupported`` (neither), ``held`` (a legal hold on the subject or agent forbids
it; nothing is asked and the attempt is audited), ``failed`` (the engine's error,
or the provider's own reason for a forget it did not carry out) or ``queued``
(the provider had not finished within the wait; the write keeps being followed).

A provider that deletes in the background (Zep answers a task) is waited for the
same way writes settle (:mod:`providers.settlement`), up to
``FEDMEM_ERASURE_PROVIDER_WAIT_SECONDS``; a forget the provider reports failed is
issued once more. The certificate therefore records the provider's final answer,
with the ids of the writes that carried it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from governance.models import Agent, Tenant
from governance.services.erasure import DeleterResult, ErasureTarget, HeldTally
from memory.holds import audit_blocked, holds_covering_subject
from providers.adapters.base import AdapterError, MemoryAdapter, OperationContext, WriteResult
from providers.models import EngineInstance, ProviderWrite
from providers.services import adapter_for, operation_context

LIST_LIMIT = 1000
REISSUES = 1


def _settle(
    engine: EngineInstance,
    tenant: Tenant,
    agent: Agent,
    ctx: OperationContext,
    result: WriteResult,
    redo: Any,
) -> ProviderWrite | None:
    """Wait for one queued forget; issue it once more if the provider says it failed."""
    from providers.settlement import write_track, write_wait

    budget = float(settings.FEDMEM_ERASURE_PROVIDER_WAIT_SECONDS)
    write = None
    for attempt in range(REISSUES + 1):
        write = write_track(
            engine=engine, tenant=tenant, agent=agent, ctx=ctx, operation="forget", result=result
        )
        if write is None:
            return None  # settled in the answer itself
        write = write_wait(write=write, budget_seconds=budget)
        if write.status != ProviderWrite.Status.FAILED or attempt == REISSUES:
            return write
        result = redo()
    return write


def _engine_forget(
    engine: EngineInstance, adapter: MemoryAdapter, tenant: Tenant, agents: Any, target: ErasureTarget
) -> dict[str, Any]:
    forgotten = 0
    held: list[Any] = []
    writes: list[ProviderWrite] = []
    # Holds first, for every agent, and their refusal on record before anything is
    # asked: a failing forget for one agent must not drop another agent's refusal.
    free = []
    for agent in agents:
        holds = holds_covering_subject(tenant.pk, subject=target.subject, agent_id=agent.pk)
        held.extend(holds)
        if not holds:
            free.append(agent)
    if held:
        audit_blocked(
            tenant=tenant, actor=None, operation="provider_forget", holds=list(set(held)), count=len(held)
        )
    for agent in free:
        ctx = operation_context(tenant=tenant, operation="forget", agent=agent, user_id=target.subject)
        if adapter.supports("list") and adapter.supports("forget"):
            for hit in adapter.perform("list", ctx, limit=LIST_LIMIT):

                def redo(external_id: str = hit.external_id, ctx: OperationContext = ctx) -> WriteResult:
                    return adapter.perform("forget", ctx, external_id=external_id)

                write = _settle(engine, tenant, agent, ctx, redo(), redo)
                if write is not None:
                    writes.append(write)
                if write is None or write.status == ProviderWrite.Status.SETTLED:
                    forgotten += 1
        else:

            def purge(ctx: OperationContext = ctx) -> WriteResult:
                return adapter.perform("purge", ctx.for_operation("purge"))

            first = purge()
            write = _settle(engine, tenant, agent, ctx, first, purge)
            if write is not None:
                writes.append(write)
            if write is None and first.detail.get("deleted"):
                forgotten += int(first.detail["deleted"])
            elif write is not None and write.status == ProviderWrite.Status.SETTLED:
                forgotten += 1
    status: dict[str, Any] = {"forgotten": forgotten}
    if writes:
        status["writes"] = [
            {"id": str(w.pk), "status": w.status, **({"reason": w.reason} if w.reason else {})}
            for w in writes
        ]
    failed = [w for w in writes if w.status == ProviderWrite.Status.FAILED]
    queued = [w for w in writes if w.status == ProviderWrite.Status.QUEUED]
    if held:
        return {**status, "status": "held"}
    if failed:
        return {**status, "status": "failed", "detail": failed[0].reason[:300]}
    if queued:
        return {**status, "status": "queued"}
    return {**status, "status": "forgotten"}


def forget_subject_in_engines(target: ErasureTarget) -> list[dict[str, Any]]:
    if not target.subject:
        # A request naming only datasets: builtin datasets are local rows (a dataset
        # kept in an engine is refused at request time), and an empty subject must
        # never become a purge of an engine's empty namespace.
        return []
    tenant = Tenant.objects.get(pk=target.tenant_id)
    agents = Agent.objects.filter(tenant=tenant)
    if target.agent_id is not None:
        agents = agents.filter(pk=target.agent_id)
    statuses: list[dict[str, Any]] = []
    for engine in EngineInstance.objects.visible_to_tenant(tenant).order_by("id"):
        status: dict[str, Any] = {"engine": engine.id, "provider": engine.provider}
        try:
            adapter = adapter_for(engine, tenant)
        except Exception as exc:  # a missing credential or refused address: report, go on
            statuses.append({**status, "status": "failed", "detail": type(exc).__name__})
            continue
        listing = adapter.supports("list") and adapter.supports("forget")
        # A session store (Agents SDK, Letta) keys memory by session, not by subject:
        # there is no namespace of the subject's to purge.
        purging = adapter.supports("purge") and not adapter.session_memory
        if not (listing or purging):
            statuses.append({**status, "status": "unsupported"})
            continue
        try:
            statuses.append({**status, **_engine_forget(engine, adapter, tenant, agents, target)})
        except AdapterError as exc:
            statuses.append({**status, "status": "failed", "detail": exc.reason})
    return statuses


def erase_subject_writes(target: ErasureTarget) -> DeleterResult:
    """Erasure deleter: a followed write names its subject in clear while the provider
    works on it. The subject's erasure ends that: a write still queued is failed (the
    engines' forget that follows covers its records) and every one keeps the subject
    only as its keyed hash. A hold on the subject or agent keeps the write as it is.
    The erasure's own forgets are recorded after this and seal themselves when they
    settle (:func:`providers.settlement.sealed_scope`)."""
    from django.utils import timezone

    from providers.settlement import sealed_scope

    if not target.subject:
        return DeleterResult()
    writes = ProviderWrite.objects.select_for_update().filter(
        tenant_id=target.tenant_id, scope__user_id=target.subject
    )
    if target.agent_id:
        writes = writes.filter(agent_id=target.agent_id)
    sealed = 0
    kept = HeldTally()
    for write in writes:
        holds = holds_covering_subject(target.tenant_id, subject=target.subject, agent_id=write.agent_id)
        if holds:
            kept.keep(holds)
            continue
        if write.status == ProviderWrite.Status.QUEUED:
            write.status = ProviderWrite.Status.FAILED
            write.reason = "The subject was erased; the engines were asked to forget their records."
            write.settled_at = timezone.now()
            write.next_check_at = None
        write.scope = sealed_scope(write.scope)
        write.save(update_fields=["status", "reason", "settled_at", "next_check_at", "scope", "updated_at"])
        sealed += 1
    counts = {"providers_providerwrite": sealed} if sealed else {}
    return DeleterResult(counts=counts, held=kept.entries("providers_providerwrite"))
