"""Who is calling: an agent key's principal, and a person bound to one tenant.

Kept apart from :mod:`governance.authz` because authentication classes import it
while DRF is still loading (``core.errors`` imports DRF's views, which load the
authentication classes), so it imports nothing of ours.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from governance.models.agents import Agent, ApiKey

# Why the identity attributes live in ``__dict__``: the user object is built per
# request (session or key lookup), so a cache or binding on it never outlives it.
ROLES_CACHE = "_fedmem_roles"
_BOUND_TENANT = "_fedmem_bound_tenant_id"
_GENERATION = "_fedmem_generation"


class AgentPrincipal:
    """The caller when a request carries an agent's API key."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False
    pk = None
    id = None

    def __init__(self, agent: Agent, key: ApiKey, *, generation: int | None = None) -> None:
        self.agent = agent
        self.key = key
        self.tenant = agent.tenant
        # The governance generation the key was read under (see identity_generation).
        self.generation = generation

    def __str__(self) -> str:
        return f"agent:{self.agent.name}"

    def get_username(self) -> str:
        return str(self)

    def has_perm(self, perm: str, obj: Any = None) -> bool:
        return False


def is_agent(principal: object) -> bool:
    return isinstance(principal, AgentPrincipal)


def bind_to_tenant(user: Any, tenant_id: Any, *, generation: int | None = None) -> None:
    """Confine this request's user to one tenant (a personal key's)."""
    user.__dict__[_BOUND_TENANT] = tenant_id
    user.__dict__[_GENERATION] = generation
    user.__dict__.pop(ROLES_CACHE, None)


def identity_generation(principal: Any) -> int | None:
    """The governance generation (core.generations) this request's key was read
    under: copies of identity rows made under it are current for this request. None
    for a console session or work without a caller (read those rows afresh)."""
    if isinstance(principal, AgentPrincipal):
        return principal.generation
    return getattr(principal, "__dict__", {}).get(_GENERATION)


def bound_tenant_id(principal: Any) -> Any:
    return getattr(principal, "__dict__", {}).get(_BOUND_TENANT)
