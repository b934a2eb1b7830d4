"""The providers' engine forgetter for erasure (registered in ``ProvidersConfig.ready``).

For every engine instance the tenant can use, and every agent in the erasure's
scope, it lists the subject's records (adapter ``list`` with the subject as
``user_id``) and forgets each (adapter ``forget``), answering one status per
engine: ``forgotten`` (with a count), ``unsupported`` (no ``list``/``forget``),
``held`` (a legal hold on the subject or agent forbids it; nothing is asked and
the attempt is audited) or ``failed`` (the engine's error reason).
"""

from __future__ import annotations

from typing import Any

from governance.models import Agent, Tenant
from governance.services.erasure import ErasureTarget
from memory.holds import audit_blocked, holds_covering_subject
from providers.adapters.base import AdapterError
from providers.models import EngineInstance

LIST_LIMIT = 1000


def forget_subject_in_engines(target: ErasureTarget) -> list[dict[str, Any]]:
    from providers.services import adapter_for, operation_context

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
        if not (adapter.supports("list") and adapter.supports("forget")):
            statuses.append({**status, "status": "unsupported"})
            continue
        forgotten = 0
        # Holds first, for every agent: a failure on one agent's forget must not
        # leave another agent's refusal unrecorded.
        held: list[Any] = []
        free = []
        for agent in agents:
            holds = holds_covering_subject(tenant.pk, subject=target.subject, agent_id=agent.pk)
            held.extend(holds)
            if not holds:
                free.append(agent)
        try:
            for agent in free:
                ctx = operation_context(
                    tenant=tenant, operation="forget", agent=agent, user_id=target.subject
                )
                for hit in adapter.perform("list", ctx, limit=LIST_LIMIT):
                    adapter.perform("forget", ctx, external_id=hit.external_id)
                    forgotten += 1
        except AdapterError as exc:
            statuses.append({**status, "status": "failed", "detail": exc.reason, "forgotten": forgotten})
        else:
            statuses.append({**status, "status": "held" if held else "forgotten", "forgotten": forgotten})
        if held:
            audit_blocked(
                tenant=tenant, actor=None, operation="provider_forget", holds=list(set(held)), count=len(held)
            )
    return statuses
