"""The permission gate: who may see or act on which agent, and with which role.

Tenants are a hard boundary. Inside a tenant, roles decide the kind of action and
per-agent object permissions (django-guardian) decide which agents:

* platform_admin / tenant_admin: every agent of their tenant, every permission;
* security_officer / auditor: read (viewer) on every agent of their tenant;
* developer: only the agents they were granted (creating one grants all three);
* an agent's own key: viewer and can_invoke on itself, nothing else.

Guardian's ``accept_global_perms`` default would let a model-level permission
match every agent of every tenant; the gate turns it off, and every match is
also confined to tenants the user is still a member of.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.db.models import Q
from guardian.shortcuts import get_objects_for_user
from rest_framework.permissions import BasePermission

from governance.models.agents import AgentPermission
from governance.models.tenancy import ADMIN_ROLES, Membership, Role, Tenant

if TYPE_CHECKING:
    from governance.models.agents import Agent, AgentQuerySet, ApiKey

READ_ALL_ROLES = frozenset({Role.SECURITY_OFFICER, Role.AUDITOR})
# An object permission satisfying each checked permission (editor/invoke imply read).
_SATISFIED_BY = {
    AgentPermission.VIEWER: [AgentPermission.VIEWER, AgentPermission.EDITOR, AgentPermission.CAN_INVOKE],
    AgentPermission.EDITOR: [AgentPermission.EDITOR],
    AgentPermission.CAN_INVOKE: [AgentPermission.CAN_INVOKE],
}
_AGENT_SELF_PERMISSIONS = {AgentPermission.VIEWER, AgentPermission.CAN_INVOKE}


class AgentPrincipal:
    """The caller when a request carries an agent's API key."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False
    pk = None
    id = None

    def __init__(self, agent: Agent, key: ApiKey) -> None:
        self.agent = agent
        self.key = key
        self.tenant = agent.tenant

    def __str__(self) -> str:
        return f"agent:{self.agent.name}"

    def get_username(self) -> str:
        return str(self)

    def has_perm(self, perm: str, obj: Any = None) -> bool:
        return False


def is_agent(principal: object) -> bool:
    return isinstance(principal, AgentPrincipal)


def roles_in(principal: Any, tenant: Tenant | Any) -> set[str]:
    """The roles a principal holds in a tenant (an agent holds none)."""
    if not getattr(principal, "is_authenticated", False) or is_agent(principal):
        return set()
    tenant_id = getattr(tenant, "pk", tenant)
    cache: dict[Any, set[str]] = principal.__dict__.setdefault("_fedmem_roles", {})
    if tenant_id not in cache:
        cache[tenant_id] = set(
            Membership.objects.filter(user=principal, tenant_id=tenant_id).values_list("role", flat=True)
        )
    return cache[tenant_id]


def has_role(principal: Any, tenant: Tenant | Any, roles: Iterable[str]) -> bool:
    return bool(roles_in(principal, tenant) & set(roles))


def restrict_agents(qs: AgentQuerySet, principal: Any, permission: str) -> AgentQuerySet:
    permission = AgentPermission(permission)
    if not getattr(principal, "is_authenticated", False):
        return qs.none()
    if is_agent(principal):
        if permission not in _AGENT_SELF_PERMISSIONS:
            return qs.none()
        return qs.filter(pk=principal.agent.pk, is_active=True)

    memberships = Membership.objects.filter(user=principal)
    member_tenants = memberships.values("tenant_id")
    role_tenants = memberships.filter(role__in=ADMIN_ROLES)
    if permission == AgentPermission.VIEWER:
        role_tenants = memberships.filter(role__in=ADMIN_ROLES | READ_ALL_ROLES)
    granted = get_objects_for_user(
        principal,
        [f"governance.{perm}" for perm in _SATISFIED_BY[permission]],
        klass=qs.model.objects.all(),
        any_perm=True,
        accept_global_perms=False,
        with_superuser=False,
    )
    return qs.filter(
        Q(tenant_id__in=role_tenants.values("tenant_id")) | Q(pk__in=granted.values("pk")),
        tenant_id__in=member_tenants,
    )


class HasTenantRole(BasePermission):
    """DRF permission: the caller holds one of ``roles`` in the active tenant."""

    roles: frozenset[str] = frozenset()
    message = "Your role does not allow this action."

    def has_permission(self, request: Any, view: Any) -> bool:
        tenant = getattr(request, "tenant", None)
        return tenant is not None and has_role(request.user, tenant, self.roles)


def tenant_role(*roles: str) -> type[HasTenantRole]:
    return type("HasTenantRole_" + "_".join(roles), (HasTenantRole,), {"roles": frozenset(roles)})


class IsUser(BasePermission):
    """The caller is a person (session or user key), not an agent key."""

    message = "This action is not available to agent keys."

    def has_permission(self, request: Any, view: Any) -> bool:
        return bool(request.user and request.user.is_authenticated and not is_agent(request.user))
