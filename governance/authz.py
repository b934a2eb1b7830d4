"""The capability table: which tenant roles may do which kind of thing.

Every role check of the platform asks this table, whatever the surface: DRF
permission classes (:func:`requires`), console views (:func:`can`), services
(:func:`require`) and the ``restrict()`` querysets of tenant-owned models
(:func:`tenant_ids_with`). A role tuple anywhere else is a bug.

Two rules hold for every capability:

* **Tenants are a hard boundary.** A role counts only in the tenant of the
  membership. A request authenticated by a personal API key is bound to the
  tenant the key was created in (:func:`bind_to_tenant`): the user's roles in
  their other tenants do not exist for that request. Console sessions are not
  bound; they act in the tenant chosen with the switcher.
* **Agent keys hold no role.** What an agent may do is decided by the object
  permissions on itself (``governance.permissions.restrict_agents``).

The platform admin runs the platform (engine instances, every agent's policy and
keys); it is not compliance staff, so it reads no legal hold, erasure request,
certificate or audit event unless it also holds a compliance role in that
tenant. docs/architecture.md#permissions prints the table.
"""

from __future__ import annotations

import enum
from typing import Any

from django.db.models import Q, QuerySet
from guardian.shortcuts import get_objects_for_user
from rest_framework.permissions import BasePermission

from core.errors import Forbidden
from governance.models import (
    Agent,
    AgentPolicyVersion,
    ApiKey,
    Candidate,
    ErasureRequest,
    Job,
    LegalHold,
    Membership,
    Role,
    Tenant,
)
from governance.models.agents import AgentPermission
from governance.models.restricted import CHANGE, VIEW, register_gate
from governance.principals import (
    ROLES_CACHE,
    AgentPrincipal,
    bind_to_tenant,
    bound_tenant_id,
    is_agent,
)

__all__ = [
    "ROLES",
    "AgentPrincipal",
    "Capability",
    "bind_to_tenant",
    "bound_tenant_id",
    "can",
    "capabilities_in",
    "is_agent",
    "register_agent_job_kind",
    "register_job_kind",
    "require",
    "requires",
    "restrict_agents",
    "roles_in",
    "tenant_ids_with",
]


class Capability(enum.StrEnum):
    """One kind of action. Add a member and its row in ``ROLES`` (docs/development.md)."""

    AGENT_CREATE = "agent.create"
    AGENT_SHARE = "agent.share"
    AGENT_READ_ALL = "agent.read_all"
    AGENT_MANAGE_ALL = "agent.manage_all"
    POLICY_READ = "policy.read"
    RETENTION_READ = "retention.read"
    RETENTION_SET = "retention.set"
    HOLD_READ = "hold.read"
    HOLD_MANAGE = "hold.manage"
    ERASURE_READ = "erasure.read"
    ERASURE_REQUEST = "erasure.request"
    AUDIT_READ = "audit.read"
    CANDIDATE_REVIEW_FOR_SUBJECT = "candidate.review_for_subject"
    ENGINE_DECLARE = "engine.declare"
    ENGINE_READ_ALL = "engine.read_all"
    ENGINE_HEALTH = "engine.health"
    ENGINE_CREDENTIALS = "engine.credentials"
    PROVIDER_WRITE_READ_ALL = "provider_write.read_all"
    SELF_CHECK_RUN = "system.self_check"


_ADMINS = frozenset({Role.PLATFORM_ADMIN, Role.TENANT_ADMIN})
_COMPLIANCE = frozenset({Role.SECURITY_OFFICER, Role.AUDITOR})

ROLES: dict[Capability, frozenset[Role]] = {
    # Agents: admins act on every agent of the tenant, compliance staff read every one,
    # developers only the agents they were granted (object permissions).
    Capability.AGENT_CREATE: _ADMINS | {Role.DEVELOPER},
    Capability.AGENT_SHARE: _ADMINS | {Role.DEVELOPER},
    Capability.AGENT_READ_ALL: _ADMINS | _COMPLIANCE,
    Capability.AGENT_MANAGE_ALL: _ADMINS,
    Capability.POLICY_READ: _ADMINS | {Role.DEVELOPER},
    # Retention is a policy field that compliance staff set (DESIGN: "set retention")
    # and admins edit with the rest of the policy.
    Capability.RETENTION_READ: _ADMINS | _COMPLIANCE,
    Capability.RETENTION_SET: _ADMINS | {Role.SECURITY_OFFICER},
    # Holds and erasures name end users: compliance staff and the tenant's own admin.
    Capability.HOLD_READ: frozenset({Role.SECURITY_OFFICER, Role.AUDITOR, Role.TENANT_ADMIN}),
    Capability.HOLD_MANAGE: frozenset({Role.SECURITY_OFFICER}),
    Capability.ERASURE_READ: frozenset({Role.SECURITY_OFFICER, Role.AUDITOR, Role.TENANT_ADMIN}),
    Capability.ERASURE_REQUEST: frozenset({Role.SECURITY_OFFICER, Role.TENANT_ADMIN}),
    Capability.AUDIT_READ: frozenset({Role.AUDITOR}),
    Capability.CANDIDATE_REVIEW_FOR_SUBJECT: frozenset({Role.TENANT_ADMIN}),
    Capability.ENGINE_DECLARE: frozenset({Role.PLATFORM_ADMIN}),
    Capability.ENGINE_READ_ALL: frozenset({Role.PLATFORM_ADMIN}),
    Capability.ENGINE_HEALTH: frozenset({Role.TENANT_ADMIN, Role.DEVELOPER}) | _COMPLIANCE,
    Capability.ENGINE_CREDENTIALS: frozenset({Role.TENANT_ADMIN}),
    # Where a queued provider write stands (ids and statuses, never text): every write of
    # the tenant for admins and compliance staff; others see the writes of agents they view.
    Capability.PROVIDER_WRITE_READ_ALL: _ADMINS | _COMPLIANCE,
    Capability.SELF_CHECK_RUN: _ADMINS,
}

# Which capability lets a role read a job of a kind (its creator always may, and a
# job about an agent is readable by whoever may view the agent). Apps whose jobs
# are tenant-wide register their kinds when they load.
_JOB_KINDS: dict[str, Capability] = {
    "self_check": Capability.SELF_CHECK_RUN,
    "erasure": Capability.ERASURE_READ,
}


def register_job_kind(kind: str, capability: Capability) -> None:
    _JOB_KINDS[kind] = capability


# Kinds of work an agent key starts itself (a queued ingest, a graph build): the agent
# follows such a job about itself; every other job stays a person's business.
_AGENT_JOB_KINDS: set[str] = set()


def register_agent_job_kind(kind: str) -> None:
    _AGENT_JOB_KINDS.add(kind)


def _is_person(principal: Any) -> bool:
    return bool(getattr(principal, "is_authenticated", False)) and not is_agent(principal)


def memberships_of(principal: Any) -> QuerySet[Membership]:
    """The memberships that count for this request (none for agents and anonymous)."""
    if not _is_person(principal):
        return Membership.objects.none()
    qs = Membership.objects.filter(user=principal)
    bound = bound_tenant_id(principal)
    return qs if bound is None else qs.filter(tenant_id=bound)


def roles_in(principal: Any, tenant: Tenant | Any) -> set[str]:
    """The roles a principal holds in a tenant (an agent holds none)."""
    if not _is_person(principal):
        return set()
    tenant_id: Any = getattr(tenant, "pk", tenant)
    bound = bound_tenant_id(principal)
    if bound is not None and str(bound) != str(tenant_id):
        return set()
    cache: dict[Any, set[str]] = principal.__dict__.setdefault(ROLES_CACHE, {})
    if tenant_id not in cache:
        cache[tenant_id] = set(
            Membership.objects.filter(user=principal, tenant_id=tenant_id).values_list("role", flat=True)
        )
    return cache[tenant_id]


def capabilities_in(principal: Any, tenant: Tenant | Any) -> set[Capability]:
    roles = roles_in(principal, tenant)
    return {capability for capability, allowed in ROLES.items() if roles & allowed}


def can(principal: Any, tenant: Tenant | Any, capability: Capability) -> bool:
    return tenant is not None and bool(roles_in(principal, tenant) & ROLES[capability])


def require(principal: Any, tenant: Tenant | Any, capability: Capability, message: str | None = None) -> None:
    """Raise ``Forbidden`` (403) unless the principal holds the capability in the tenant."""
    if not can(principal, tenant, capability):
        raise Forbidden(message or "Your role does not allow this action.")


def tenant_ids_with(principal: Any, capability: Capability) -> QuerySet[Membership, Any]:
    """The ids of the tenants where the principal holds the capability (a subquery)."""
    return memberships_of(principal).filter(role__in=ROLES[capability]).values("tenant_id")


class HasCapability(BasePermission):
    """DRF permission: the caller holds ``capability`` in the request's tenant."""

    capability: Capability
    message = "Your role does not allow this action."

    def has_permission(self, request: Any, view: Any) -> bool:
        return can(request.user, getattr(request, "tenant", None), self.capability)


_PERMISSION_CLASSES: dict[Capability, type[HasCapability]] = {}


def requires(capability: Capability) -> type[HasCapability]:
    """The DRF permission class for one capability (one class per capability)."""
    if capability not in _PERMISSION_CLASSES:
        name = "Requires_" + capability.name
        _PERMISSION_CLASSES[capability] = type(name, (HasCapability,), {"capability": capability})
    return _PERMISSION_CLASSES[capability]


# --- restrict() gates: the rows of each tenant-owned model a principal may act on ---

# An object permission satisfying each checked permission (editor/invoke imply read).
_SATISFIED_BY = {
    AgentPermission.VIEWER: [AgentPermission.VIEWER, AgentPermission.EDITOR, AgentPermission.CAN_INVOKE],
    AgentPermission.EDITOR: [AgentPermission.EDITOR],
    AgentPermission.CAN_INVOKE: [AgentPermission.CAN_INVOKE],
}
_AGENT_SELF_PERMISSIONS = {AgentPermission.VIEWER, AgentPermission.CAN_INVOKE}
_AGENT_PERMISSION_FOR = {VIEW: AgentPermission.VIEWER, CHANGE: AgentPermission.EDITOR}


def restrict_agents(qs: QuerySet[Any], principal: Any, permission: str) -> QuerySet[Any]:
    """Agents: roles with ``AGENT_MANAGE_ALL`` (``AGENT_READ_ALL`` for viewer) see every
    agent of their tenant, others only the agents granted to them (guardian), an
    agent key only itself. Guardian's global permissions and the superuser flag
    are ignored, and every match is confined to the tenants that count."""
    permission = AgentPermission(_AGENT_PERMISSION_FOR.get(permission, permission))
    if not getattr(principal, "is_authenticated", False):
        return qs.none()
    if is_agent(principal):
        if permission not in _AGENT_SELF_PERMISSIONS:
            return qs.none()
        return qs.filter(pk=principal.agent.pk, is_active=True)
    every = Capability.AGENT_READ_ALL if permission == AgentPermission.VIEWER else Capability.AGENT_MANAGE_ALL
    granted = get_objects_for_user(
        principal,
        [f"governance.{perm}" for perm in _SATISFIED_BY[permission]],
        klass=Agent.objects.all(),
        any_perm=True,
        accept_global_perms=False,
        with_superuser=False,
    )
    return qs.filter(
        Q(tenant_id__in=tenant_ids_with(principal, every)) | Q(pk__in=granted.values("pk")),
        tenant_id__in=memberships_of(principal).values("tenant_id"),
    )


def own_agent(principal: Any, agent_pk: Any, permission: str) -> Any:
    """What :func:`restrict_agents` grants an agent key on ``agent_pk``, without asking
    the database again: its own agent, active, as the key's lookup loaded it (with
    its tenant) at the start of this very request; None for anything else (a
    person, another agent, a permission an agent key never has)."""
    permission = AgentPermission(_AGENT_PERMISSION_FOR.get(permission, permission))
    if not is_agent(principal) or permission not in _AGENT_SELF_PERMISSIONS:
        return None
    agent = principal.agent
    return agent if agent.pk == agent_pk and agent.is_active else None


def _visible_agents(principal: Any, action: str) -> QuerySet[Any]:
    return restrict_agents(Agent.objects.all(), principal, action).values("pk")


def _by_capability(read: Capability, change: Capability) -> Any:
    def gate(qs: QuerySet[Any], principal: Any, action: str) -> QuerySet[Any]:
        return qs.filter(tenant_id__in=tenant_ids_with(principal, change if action == CHANGE else read))

    return gate


def restrict_jobs(qs: QuerySet[Any], principal: Any, action: str) -> QuerySet[Any]:
    """A job is readable by its creator, by roles holding the capability of its kind
    (``register_job_kind``) and, for a job about an agent, by whoever may view the
    agent; never by every member of the tenant. An agent key reads the jobs about
    its own agent of the kinds it can start (``register_agent_job_kind``)."""
    if is_agent(principal):
        agent = principal.agent
        return qs.filter(agent=agent, tenant_id=agent.tenant_id, kind__in=sorted(_AGENT_JOB_KINDS))
    if not _is_person(principal):
        return qs.none()
    member_of = memberships_of(principal).values("tenant_id")
    visible = Q(created_by=principal) | Q(agent__in=_visible_agents(principal, VIEW))
    for capability in set(_JOB_KINDS.values()):
        kinds = [kind for kind, needed in _JOB_KINDS.items() if needed == capability]
        visible |= Q(kind__in=kinds, tenant_id__in=tenant_ids_with(principal, capability))
    return qs.filter(visible, tenant_id__in=member_of)


def restrict_by_agent(qs: QuerySet[Any], principal: Any, action: str) -> QuerySet[Any]:
    """Rows that belong to one agent (candidates, policy versions): what the agent allows."""
    return qs.filter(agent__in=_visible_agents(principal, action))


def restrict_api_keys(qs: QuerySet[Any], principal: Any, action: str) -> QuerySet[Any]:
    """A person's own keys (of the tenants that count) and the keys of agents they edit."""
    if not _is_person(principal):
        return qs.none()
    own = Q(user=principal, tenant_id__in=memberships_of(principal).values("tenant_id"))
    return qs.filter(own | Q(agent__in=_visible_agents(principal, CHANGE)))


register_gate(Agent._meta.label, restrict_agents)
register_gate(LegalHold._meta.label, _by_capability(Capability.HOLD_READ, Capability.HOLD_MANAGE))
register_gate(ErasureRequest._meta.label, _by_capability(Capability.ERASURE_READ, Capability.ERASURE_REQUEST))
register_gate(Job._meta.label, restrict_jobs)
register_gate(Candidate._meta.label, restrict_by_agent)
register_gate(AgentPolicyVersion._meta.label, restrict_by_agent)
register_gate(ApiKey._meta.label, restrict_api_keys)
