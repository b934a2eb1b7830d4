"""Reads: which engine instances a caller may see. A foreign tenant's dedicated
engine is the same 404 as an unknown one, so engine ids are not probeable."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from core.errors import EngineNotFound, ProviderWriteNotFound
from governance import authz
from governance.authz import Capability
from governance.models import Agent, Tenant
from governance.models.restricted import CHANGE, VIEW, register_gate
from governance.selectors import as_uuid
from providers.models import EngineInstance, ProviderWrite, TenantEngineCredential


def engines_for(principal: Any, tenant: Tenant | None) -> QuerySet[EngineInstance]:
    """Shared instances and the tenant's dedicated ones; a platform admin sees every instance."""
    qs = EngineInstance.objects.select_related("tenant")
    if tenant is None:
        return qs.none()
    if authz.can(principal, tenant, Capability.ENGINE_READ_ALL):
        return qs.all()
    return qs.visible_to_tenant(tenant)


def restrict_engines(qs: QuerySet[Any], principal: Any, action: str) -> QuerySet[Any]:
    """``EngineInstance.objects.restrict``: view = shared instances and the dedicated ones
    of the tenants that count (every instance with ``ENGINE_READ_ALL``); change =
    every instance where the principal may declare engines, nothing otherwise."""
    member_of = authz.memberships_of(principal).values("tenant_id")
    if action == CHANGE:
        return qs if authz.tenant_ids_with(principal, Capability.ENGINE_DECLARE).exists() else qs.none()
    if authz.tenant_ids_with(principal, Capability.ENGINE_READ_ALL).exists():
        return qs
    if authz.is_agent(principal):
        return qs.filter(Q(tenant__isnull=True) | Q(tenant_id=principal.agent.tenant_id))
    if not getattr(principal, "is_authenticated", False):
        return qs.none()
    return qs.filter(Q(tenant__isnull=True) | Q(tenant_id__in=member_of))


register_gate(EngineInstance._meta.label, restrict_engines)


def restrict_provider_writes(qs: QuerySet[Any], principal: Any, action: str) -> QuerySet[Any]:
    """``ProviderWrite.objects.restrict``: a write is readable by whoever may view its
    agent (the agent's own key included) and, with ``PROVIDER_WRITE_READ_ALL``, every
    write of the tenant; only the reconcile task changes one."""
    if action == CHANGE:
        return qs.none()
    viewed = authz.restrict_agents(Agent.objects.all(), principal, VIEW).values("pk")
    everything = authz.tenant_ids_with(principal, Capability.PROVIDER_WRITE_READ_ALL)
    return qs.filter(Q(agent__in=viewed) | Q(tenant_id__in=everything))


register_gate(ProviderWrite._meta.label, restrict_provider_writes)


def provider_writes_for(principal: Any, tenant: Tenant) -> QuerySet[ProviderWrite]:
    """The tenant's provider writes the principal may read, newest first."""
    return ProviderWrite.objects.restrict(principal).filter(tenant=tenant).order_by("-created_at")


def access_provider_write(principal: Any, write_id: Any) -> ProviderWrite:
    """A provider write the principal may read; another tenant's, another agent's the
    caller cannot view, and an unknown id are the same 404."""
    pk = as_uuid(write_id)
    write = ProviderWrite.objects.restrict(principal).filter(pk=pk).first() if pk else None
    if write is None:
        raise ProviderWriteNotFound("Provider write not found.")
    return write


def access_engine(principal: Any, tenant: Tenant | None, engine_id: str) -> EngineInstance:
    engine = engines_for(principal, tenant).filter(pk=str(engine_id)[:63]).first()
    if engine is None:
        raise EngineNotFound("Engine not found.")
    return engine


def engine_for_tenant(tenant: Tenant, engine_id: str) -> EngineInstance:
    """An engine the tenant may use (never another tenant's dedicated one)."""
    engine = EngineInstance.objects.visible_to_tenant(tenant).filter(pk=str(engine_id)[:63]).first()
    if engine is None:
        raise EngineNotFound("Engine not found.")
    return engine


def tenant_credential(engine: EngineInstance, tenant: Tenant) -> TenantEngineCredential | None:
    return TenantEngineCredential.objects.filter(engine=engine, tenant=tenant).first()


def tenants_with_credentials(engines: list[EngineInstance], tenant: Tenant) -> set[str]:
    """Engine ids for which the tenant set its own credential (one query for a list page)."""
    return set(
        TenantEngineCredential.objects.filter(engine__in=engines, tenant=tenant).values_list(
            "engine_id", flat=True
        )
    )


def engine_writes(engine: Any, tenant: Any, *, limit: int = 20) -> list[dict[str, Any]]:
    """The tenant's most recent provider writes on an engine that were queued when the
    engine answered, with where each stands now (one query; never another tenant's)."""
    rows = (
        ProviderWrite.objects.filter(engine=engine, tenant=tenant)
        .order_by("-created_at")
        .values("id", "operation", "status", "reason", "attempts", "created_at", "settled_at")[:limit]
    )
    return [dict(row) for row in rows]
