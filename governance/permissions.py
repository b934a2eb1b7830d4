"""The permission gate for agents (implemented in governance.authz): who may see or act on which agent.

Tenants are a hard boundary. Inside a tenant, the capability table
(:mod:`governance.authz`) decides the kind of action and per-agent object
permissions (django-guardian) decide which agents:

* holders of ``AGENT_MANAGE_ALL`` (platform_admin, tenant_admin): every agent of
  their tenant, every permission;
* holders of ``AGENT_READ_ALL`` (also security_officer, auditor): viewer on every
  agent of their tenant;
* everyone else (developer): only the agents they were granted (creating one
  grants all three);
* an agent's own key: viewer and can_invoke on itself, nothing else.

Guardian's ``accept_global_perms`` default would let a model-level permission
match every agent of every tenant; the gate turns it off, and every match is
also confined to the tenants that count for the request (a personal key's own
tenant, see :func:`governance.authz.bind_to_tenant`).
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission

from governance.authz import AgentPrincipal, is_agent, restrict_agents

__all__ = ["AgentPrincipal", "IsUser", "is_agent", "restrict_agents"]


class IsUser(BasePermission):
    """The caller is a person (session or user key), not an agent key."""

    message = "This action is not available to agent keys."

    def has_permission(self, request: Any, view: Any) -> bool:
        return bool(request.user and request.user.is_authenticated and not is_agent(request.user))
