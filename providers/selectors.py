"""Reads: which engine instances a caller may see. A foreign tenant's dedicated
engine is the same 404 as an unknown one, so engine ids are not probeable."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from core.errors import EngineNotFound
from governance.models import Role, Tenant
from governance.permissions import has_role, is_agent
from providers.models import EngineInstance, TenantEngineCredential


def engines_for(principal: Any, tenant: Tenant | None) -> QuerySet[EngineInstance]:
    """Shared instances and the tenant's dedicated ones; a platform admin sees every instance."""
    qs = EngineInstance.objects.select_related("tenant")
    if tenant is None:
        return qs.none()
    if not is_agent(principal) and has_role(principal, tenant, [Role.PLATFORM_ADMIN]):
        return qs.all()
    return qs.visible_to_tenant(tenant)


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
    from providers.models import ProviderWrite

    return list(
        ProviderWrite.objects.filter(engine=engine, tenant=tenant)
        .order_by("-created_at")
        .values("id", "operation", "status", "reason", "attempts", "created_at", "settled_at")[:limit]
    )
