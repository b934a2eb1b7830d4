"""Reads. Every agent lookup goes through ``Agent.objects.restrict``."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.db.models import QuerySet

from core.errors import (
    AgentInactive,
    AgentNotFound,
    ErasureRequestNotFound,
    JobNotFound,
    LegalHoldNotFound,
    PolicyVersionNotFound,
)
from governance.authz import own_agent
from governance.models import (
    Agent,
    AgentPolicyVersion,
    ApiKey,
    AuditEvent,
    ErasureRequest,
    Job,
    LegalHold,
    Membership,
    Tenant,
)
from governance.models.agents import AgentPermission
from governance.policy import DEFAULT_POLICY, MemoryPolicy, PolicyError

logger = logging.getLogger(__name__)


def tenants_for_user(user: Any) -> QuerySet[Tenant]:
    return Tenant.objects.filter(memberships__user=user).distinct().order_by("name")


def agents_for(
    principal: Any, permission: str = AgentPermission.VIEWER, *, tenant: Tenant | None = None
) -> QuerySet[Agent]:
    qs = Agent.objects.restrict(principal, permission).select_related("tenant")
    if tenant is not None:
        qs = qs.filter(tenant=tenant)
    return qs


def as_uuid(value: Any) -> uuid.UUID | None:
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError):
        return None


def access_agent(principal: Any, agent_id: Any, permission: str = AgentPermission.VIEWER) -> Agent:
    """Fetch one agent the principal may act on; anything else (foreign, unknown,
    malformed id, missing permission) is the same 404, so ids are not probeable."""
    pk = as_uuid(agent_id)
    # An agent key on its own agent (nearly every API call) needs no second lookup.
    agent = own_agent(principal, pk, permission) if pk else None
    if agent is None and pk:
        agent = agents_for(principal, permission).filter(pk=pk).first()
    if agent is None:
        raise AgentNotFound("Agent not found.")
    if permission == AgentPermission.CAN_INVOKE and not agent.is_active:
        # A deactivated agent keeps its memory for compliance, but nobody acts as it:
        # its own keys stop working and users holding can_invoke are refused too.
        raise AgentInactive("This agent is deactivated; reactivate it to use its memory.")
    return agent


def keys_for_agent(agent: Agent) -> QuerySet[ApiKey]:
    return agent.api_keys.select_related("created_by").order_by("-created_at")


def keys_for_user(user: Any, tenant: Tenant) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(user=user, tenant=tenant).order_by("-created_at")


def memberships_for(tenant: Tenant) -> QuerySet[Membership]:
    return Membership.objects.filter(tenant=tenant).select_related("user").order_by("user__username", "role")


def jobs_for(principal: Any, tenant: Tenant) -> QuerySet[Job]:
    """The tenant's jobs the principal may follow, newest first."""
    return Job.objects.restrict(principal).filter(tenant=tenant).order_by("-created_at")


def access_job(principal: Any, job_id: Any) -> Job:
    """A job the principal may follow (see governance.authz.restrict_jobs); anything
    else, a colleague's job included, is the same 404."""
    pk = as_uuid(job_id)
    job = Job.objects.restrict(principal).filter(pk=pk).first() if pk else None
    if job is None:
        raise JobNotFound("Job not found.")
    return job


def audit_events(tenant: Tenant) -> QuerySet[AuditEvent]:
    return AuditEvent.objects.filter(chain=str(tenant.pk)).order_by("-seq")


def current_policy_version(agent: Agent) -> AgentPolicyVersion | None:
    return AgentPolicyVersion.objects.newest_first(agent).first()


def policy_versions(agent: Agent) -> QuerySet[AgentPolicyVersion]:
    return AgentPolicyVersion.objects.newest_first(agent).select_related("created_by")


def memory_policy_for(agent: Agent) -> MemoryPolicy:
    """The policy in force for an agent (the documented defaults when none was set).

    One query. A stored version that no longer validates (a vocabulary shrank)
    fails closed to the defaults' read/write scopes rather than granting more.
    """
    row = AgentPolicyVersion.objects.newest_first(agent).values("policy").first()
    return _policy_or_default(agent.pk, row["policy"] if row else None)


def memory_policies_for_tenant(tenant: Tenant) -> dict[Any, MemoryPolicy]:
    """The policy in force for every agent of a tenant, in one query (list pages)."""
    latest = (
        AgentPolicyVersion.objects.filter(agent__tenant=tenant).in_force().values_list("agent_id", "policy")
    )
    stored = dict(latest)
    return {
        agent_id: _policy_or_default(agent_id, stored.get(agent_id))
        for agent_id in Agent.objects.filter(tenant=tenant).values_list("pk", flat=True)
    }


def memory_policy_from_stored(agent_id: Any, raw: Any) -> MemoryPolicy:
    """The policy a stored version's JSON stands for (for callers that read the row
    themselves, e.g. with its engine fields); fails closed like memory_policy_for."""
    return _policy_or_default(agent_id, raw)


def _policy_or_default(agent_id: Any, raw: Any) -> MemoryPolicy:
    if raw is None:
        return DEFAULT_POLICY
    try:
        return MemoryPolicy.from_json(raw)
    except PolicyError:
        logger.error("agent %s has an invalid stored policy; using the defaults", agent_id)
        return DEFAULT_POLICY


def legal_holds_for(tenant: Tenant, *, active: bool | None = None) -> QuerySet[LegalHold]:
    qs = LegalHold.objects.filter(tenant=tenant).select_related("placed_by", "released_by", "agent")
    if active is not None:
        qs = qs.filter(released_at__isnull=active)
    return qs.order_by("-placed_at")


def access_legal_hold(tenant: Tenant, hold_id: Any) -> LegalHold:
    pk = as_uuid(hold_id)
    hold = legal_holds_for(tenant).filter(pk=pk).first() if pk else None
    if hold is None:
        raise LegalHoldNotFound("Legal hold not found.")
    return hold


def erasure_requests_for(tenant: Tenant) -> QuerySet[ErasureRequest]:
    return (
        ErasureRequest.objects.filter(tenant=tenant)
        .select_related("job", "requested_by", "agent")
        .order_by("-created_at")
    )


def access_erasure_request(tenant: Tenant, request_id: Any) -> ErasureRequest:
    pk = as_uuid(request_id)
    found = erasure_requests_for(tenant).filter(pk=pk).first() if pk else None
    if found is None:
        raise ErasureRequestNotFound("Erasure request not found.")
    return found


def policy_version_documents(agent: Agent) -> dict[int, dict[str, Any]]:
    """Every version as one flat document (engine fields + policy keys), version 0 = defaults."""
    docs = {0: {"engine": "builtin", "mem0_instance": "", "cognee_instance": "", **DEFAULT_POLICY.to_json()}}
    for row in AgentPolicyVersion.objects.filter(agent=agent).order_by("version"):
        policy = _policy_or_default(agent.pk, row.policy).to_json()
        docs[row.version] = {
            "engine": row.engine,
            "mem0_instance": row.mem0_instance,
            "cognee_instance": row.cognee_instance,
            **policy,
        }
    return docs


def policy_diff(agent: Agent, old: int, new: int) -> list[dict[str, Any]]:
    """What changed from version ``old`` to ``new``: one row per differing key."""
    docs = policy_version_documents(agent)
    if old not in docs or new not in docs:
        raise PolicyVersionNotFound("Policy version not found.")
    a, b = docs[old], docs[new]
    return [{"key": key, "old": a.get(key), "new": b.get(key)} for key in b if a.get(key) != b.get(key)]
