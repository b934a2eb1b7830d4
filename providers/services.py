"""Writes and engine calls: declare / remove engines, set tenant credentials,
build an adapter for a tenant, health, federated recall.

Every change is one function, keyword-only, in one transaction, and writes its
event to the hash-chained audit trail in that transaction (a shared engine's
events go to the platform chain, a tenant's to its own).
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import IntegrityError, transaction

from core.errors import (
    BadGateway,
    EngineCredentialNotFound,
    EngineExists,
    EngineNotFound,
    MemoryCapabilityUnsupported,
    MemoryEngineCredentialMissing,
    MemoryEngineNoCredential,
    MemoryEngineUnavailable,
    MemoryIsolationInsufficient,
    MemoryNoEngines,
    field_error,
)
from governance.models import Agent, Tenant, User
from governance.services.audit import audit_record
from providers import federation
from providers.adapters.base import (
    KNOWLEDGE_CAPABILITIES,
    MEMORY_CAPABILITIES,
    RECORD_KINDS,
    SCHEMA_VERSION,
    AdapterError,
    CapabilityUnsupported,
    EngineConfig,
    HealthReport,
    MemoryAdapter,
    OperationContext,
)
from providers.adapters.registry import adapter_class, bound, provider_kinds
from providers.credentials import (
    CredentialError,
    CredentialMissing,
    Secret,
    resolve,
    validate_ref,
)
from providers.egress import Resolver, address_refusal
from providers.models import (
    BUILTIN_ENGINE_ID,
    ISOLATION_ORDER,
    AccessControl,
    EngineInstance,
    Isolation,
    TenantEngineCredential,
)
from providers.plans import policy_plan
from providers.selectors import tenant_credential

BUILTIN_PROVIDER = "builtin"


def _audit(event: str, *, actor: Any, tenant: Tenant | None, engine: str, **data: Any) -> None:
    # Never pass a credential reference or value here: names and ids only.
    audit_record(
        tenant=tenant,
        actor=actor,
        action=event,
        target_type="providers.engineinstance",
        target_id=engine,
        data={"engine": engine, **data},
    )


# --- declaring engines -----------------------------------------------------------------


def _check_base_url(base_url: str, *, allow_development_hosts: bool) -> None:
    parts = urlsplit(base_url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise field_error("base_url", "The engine URL must be http(s)://host[:port][/path].", as_message=True)
    if parts.username or parts.password:
        raise field_error("base_url", "Put credentials in credential_ref, never in the URL.", as_message=True)
    if parts.query or parts.fragment:
        raise field_error("base_url", "The engine URL takes no query or fragment.", as_message=True)
    if parts.scheme == "http" and not (settings.FEDMEM_ENGINES_ALLOW_HTTP or settings.DEBUG):
        raise field_error(
            "base_url",
            "Plain http:// engines are refused; set FEDMEM_ENGINES_ALLOW_HTTP to allow them.",
            as_message=True,
        )
    try:
        literal = ipaddress.ip_address(parts.hostname)
    except ValueError:
        return  # a name: resolved and checked on every call
    refusal = address_refusal(literal)
    if refusal and not allow_development_hosts:
        raise field_error(
            "base_url",
            f"The engine address is {refusal}; mark the instance for development to allow it.",
            as_message=True,
        )


@transaction.atomic
def engine_create(
    *,
    actor: User,
    engine_id: str,
    provider: str,
    base_url: str,
    tenant: Tenant | None = None,
    credential_ref: str = "",
    access_control: str = AccessControl.PLATFORM_KEY,
    tls_verify: bool = True,
    timeout_seconds: float = 10.0,
    options: dict[str, Any] | None = None,
    allow_development_hosts: bool = False,
) -> EngineInstance:
    if engine_id == BUILTIN_ENGINE_ID:
        raise field_error("id", "'builtin' is the name of fedmem's own engine.", as_message=True)
    if provider not in provider_kinds():
        raise field_error(
            "provider",
            f"Unknown provider; one of: {', '.join(provider_kinds())}.",
            as_message=True,
        )
    _check_base_url(base_url, allow_development_hosts=allow_development_hosts)
    if not tls_verify and not allow_development_hosts:
        raise field_error(
            "tls_verify",
            "TLS verification can only be turned off for a development instance.",
            as_message=True,
        )
    if access_control == AccessControl.NONE and credential_ref:
        raise field_error(
            "credential_ref",
            "An engine without access control takes no credential.",
            as_message=True,
        )
    if access_control == AccessControl.PLATFORM_KEY and not credential_ref:
        raise field_error(
            "credential_ref",
            "A platform_key engine needs the platform's credential reference.",
            as_message=True,
        )
    if credential_ref:
        try:
            validate_ref(credential_ref, tenant_slug=None)
        except CredentialError as exc:
            raise field_error("credential_ref", str(exc), code=exc.code, as_message=True) from None
    try:
        clean_options = adapter_class(provider).validate_options(options)
    except ValueError as exc:
        raise field_error("options", str(exc), as_message=True) from None
    try:
        with transaction.atomic():
            engine = EngineInstance.objects.create(
                id=engine_id,
                provider=provider,
                base_url=base_url,
                tenant=tenant,
                credential_ref=credential_ref,
                access_control=access_control,
                tls_verify=tls_verify,
                timeout_seconds=timeout_seconds,
                options=clean_options,
                allow_development_hosts=allow_development_hosts,
                created_by=actor,
            )
    except IntegrityError:
        raise EngineExists(f"An engine {engine_id!r} already exists.") from None
    _audit("memory.engine.declare", actor=actor, tenant=tenant, engine=engine.id, provider=provider)
    return engine


@transaction.atomic
def engine_delete(*, actor: User, engine: EngineInstance) -> None:
    engine_id, tenant = engine.id, engine.tenant
    engine.delete()
    _audit("memory.engine.remove", actor=actor, tenant=tenant, engine=engine_id)


@transaction.atomic
def engine_credential_set(
    *, actor: User, engine: EngineInstance, tenant: Tenant, credential_ref: str
) -> TenantEngineCredential:
    if engine.access_control == AccessControl.NONE:
        raise MemoryEngineNoCredential("This engine takes no credential.")
    try:
        validate_ref(credential_ref, tenant_slug=tenant.slug)
    except CredentialError as exc:
        raise field_error("credential_ref", str(exc), code=exc.code, as_message=True) from None
    credential, created = TenantEngineCredential.objects.update_or_create(
        engine=engine,
        tenant=tenant,
        defaults={"credential_ref": credential_ref.strip(), "set_by": actor},
    )
    _audit(
        "memory.engine.credential.set" if created else "memory.engine.credential.rotate",
        actor=actor,
        tenant=tenant,
        engine=engine.id,
    )
    return credential


@transaction.atomic
def engine_credential_remove(*, actor: User, engine: EngineInstance, tenant: Tenant) -> None:
    deleted, _ = TenantEngineCredential.objects.filter(engine=engine, tenant=tenant).delete()
    if not deleted:
        raise EngineCredentialNotFound("This tenant has no credential on this engine.")
    _audit("memory.engine.credential.remove", actor=actor, tenant=tenant, engine=engine.id)


# --- using engines ---------------------------------------------------------------------


def engine_config(engine: EngineInstance) -> EngineConfig:
    return EngineConfig(
        engine_id=engine.id,
        provider=engine.provider,
        base_url=engine.base_url,
        tenant_id=str(engine.tenant_id) if engine.tenant_id else None,
        timeout_seconds=engine.timeout_seconds,
        tls_verify=engine.tls_verify,
        allow_development_hosts=engine.allow_development_hosts,
        options=dict(engine.options or {}),
    )


_LOOK_UP = object()


def credential_ref_for(
    engine: EngineInstance, tenant: Tenant, own_ref: str | object | None = _LOOK_UP
) -> str | None:
    """The reference a call for ``tenant`` carries: its own, else the platform's (if
    allowed); None when the engine takes none, "" when the tenant's is missing.
    ``own_ref`` lets a caller that loaded the tenant's references in bulk skip the query."""
    if engine.access_control == AccessControl.NONE:
        return None
    if own_ref is _LOOK_UP:
        own = tenant_credential(engine, tenant)
        own_ref = own.credential_ref if own is not None else None
    if isinstance(own_ref, str) and own_ref:
        return own_ref
    if engine.access_control == AccessControl.PLATFORM_KEY and engine.credential_ref:
        return engine.credential_ref
    return ""


def credential_getter(
    engine: EngineInstance, tenant: Tenant, own_ref: str | object | None = _LOOK_UP
) -> Callable[[], Secret | None]:
    """The reference is looked up now, resolved only when a call is made."""
    ref = credential_ref_for(engine, tenant, own_ref)

    def get() -> Secret | None:
        if ref is None:
            return None
        if ref == "":
            raise CredentialMissing("This tenant has not set its credential for the engine.")
        return resolve(ref)

    return get


def adapter_for(
    engine: EngineInstance,
    tenant: Tenant,
    *,
    resolver: Resolver | None = None,
    own_ref: str | object | None = _LOOK_UP,
) -> MemoryAdapter:
    klass = adapter_class(engine.provider)
    return klass(
        engine_config(engine),
        credential=credential_getter(engine, tenant, own_ref),
        resolver=resolver,
        # Components bound in code (registry.bind): an injected client, store, transport.
        **bound(engine.id),
    )


def announcement_for(engine: EngineInstance) -> dict[str, Any]:
    """Capabilities come from the adapter class and the declaration: no credential, no call."""
    return adapter_class(engine.provider)(engine_config(engine)).announcement()


def builtin_announcement() -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "provider": BUILTIN_PROVIDER,
        "engine_instance": BUILTIN_ENGINE_ID,
        "capabilities": {
            "memory": list(MEMORY_CAPABILITIES),
            "knowledge": list(KNOWLEDGE_CAPABILITIES),
        },
        # One database for every tenant, every query confined to its tenant: logical.
        "isolation": Isolation.LOGICAL.value,
        "session_memory": True,
        "record_kinds": list(RECORD_KINDS),
    }


def operation_context(
    *,
    tenant: Tenant,
    operation: str,
    agent: Agent | None = None,
    user_id: str | None = None,
    session_id: str | None = None,
    trace_parent: str | None = None,
    timeout_seconds: float | None = None,
    required_isolation: str = Isolation.NONE,
) -> OperationContext:
    return OperationContext(
        operation=operation,
        tenant_id=str(tenant.pk),
        tenant_slug=tenant.slug,
        agent_id=str(agent.pk) if agent else None,
        user_id=user_id,
        session_id=session_id,
        trace_parent=trace_parent,
        deadline=time.monotonic() + timeout_seconds if timeout_seconds else None,
        required_isolation=required_isolation,
    )


def engine_unavailable(exc: AdapterError, engine_id: str) -> BadGateway:
    return MemoryEngineUnavailable(
        f"The engine {engine_id!r} is unavailable.",
        details={
            "engine_id": engine_id,
            "reason": exc.reason,
            "retryable": exc.retryable,
            "message": exc.message[:300],
        },
    )


def engine_health(
    *,
    engine: EngineInstance,
    tenant: Tenant,
    trace_parent: str | None = None,
    resolver: Resolver | None = None,
    timeout_seconds: float | None = None,
) -> HealthReport:
    adapter = adapter_for(engine, tenant, resolver=resolver)
    ctx = operation_context(
        tenant=tenant,
        operation="get_health",
        trace_parent=trace_parent,
        timeout_seconds=min(engine.timeout_seconds, timeout_seconds or engine.timeout_seconds),
    )
    try:
        return adapter.perform("get_health", ctx)
    except CapabilityUnsupported as exc:
        raise MemoryCapabilityUnsupported(
            exc.message,
            details={"engine_id": engine.id, "operation": "get_health"},
        ) from None
    except AdapterError as exc:
        if exc.reason == "credential_missing":
            raise MemoryEngineCredentialMissing(
                exc.message,
                details={"engine_id": engine.id},
            ) from None
        raise engine_unavailable(exc, engine.id) from None


def isolation_satisfies(available: str, required: str) -> bool:
    return ISOLATION_ORDER[Isolation(available)] >= ISOLATION_ORDER[Isolation(required)]


def require_isolation(announcement: dict[str, Any], required: str) -> None:
    if not isolation_satisfies(announcement["isolation"], required):
        raise MemoryIsolationInsufficient(
            f"Engine {announcement['engine_instance']!r} guarantees "
            f"{announcement['isolation']!r} isolation; "
            f"this agent requires {required!r}.",
            details={
                "engine_id": announcement["engine_instance"],
                "engine_isolation": announcement["isolation"],
                "required_isolation": required,
            },
        )


def require_capability(announcement: dict[str, Any], operation: str) -> None:
    capabilities = announcement["capabilities"]
    if operation not in capabilities["memory"] and operation not in capabilities["knowledge"]:
        raise MemoryCapabilityUnsupported(
            f"Engine {announcement['engine_instance']!r} does not support {operation!r}.",
            details={"engine_id": announcement["engine_instance"], "operation": operation},
        )


# --- policy reads ----------------------------------------------------------------------


def _plan_engines(plan: Any) -> list[str] | None:
    if not plan.federated_recall:
        return None  # a builtin policy: every engine the agent may use
    return [BUILTIN_ENGINE_ID, *(e for e in (plan.memory_engine, plan.knowledge_engine) if e)]


def policy_engines(agent: Agent) -> list[str] | None:
    """The engines the agent's policy recalls from: builtin plus its Mem0 / Cognee
    instances; None for a builtin policy (every engine the agent may use)."""
    return _plan_engines(policy_plan(agent))


def policy_required_isolation(agent: Agent) -> str:
    """The isolation the agent's policy requires of every engine it uses."""
    return policy_plan(agent).required_isolation


# --- federated recall --------------------------------------------------------------------


def _strongest(*levels: str) -> str:
    return max(levels, key=lambda level: ISOLATION_ORDER[Isolation(level)])


def federated_sources(
    *,
    agent: Agent,
    engine_ids: Sequence[str] | None,
    required_isolation: str,
    trace_parent: str | None,
    user_id: str | None = None,
    session_id: str | None = None,
    resolver: Resolver | None = None,
) -> list[federation.RecallSource]:
    tenant = agent.tenant
    ctx = operation_context(
        tenant=tenant,
        operation="recall",
        agent=agent,
        user_id=user_id,
        session_id=session_id,
        trace_parent=trace_parent,
        required_isolation=required_isolation,
    )
    explicit = engine_ids is not None
    wanted = list(dict.fromkeys(engine_ids)) if explicit else None  # type: ignore[arg-type]
    if wanted is not None and len(wanted) > settings.FEDMEM_FEDERATION_MAX_SOURCES:
        raise field_error(
            "engines",
            f"At most {settings.FEDMEM_FEDERATION_MAX_SOURCES} engines per recall.",
            as_message=True,
        )

    sources: list[federation.RecallSource] = []
    if wanted is None or BUILTIN_ENGINE_ID in wanted:
        factory = federation.builtin_source_factory()
        if factory is not None:
            if explicit:
                require_isolation(builtin_announcement(), required_isolation)
            sources.append(factory(agent, ctx))
        elif explicit:
            sources.append(
                federation.FailedSource(
                    BUILTIN_ENGINE_ID,
                    BUILTIN_PROVIDER,
                    federation.SourceFailure(
                        federation.SOURCE_UNAVAILABLE,
                        "not_installed",
                        "The builtin engine is not available in this build.",
                    ),
                )
            )

    visible = EngineInstance.objects.visible_to_tenant(tenant)
    if wanted is None:
        engines = list(visible.order_by("id"))
    else:
        named = [engine_id for engine_id in wanted if engine_id != BUILTIN_ENGINE_ID]
        found = {engine.id: engine for engine in visible.filter(pk__in=named)}
        if set(named) - set(found):
            raise EngineNotFound("Engine not found.")
        engines = [found[engine_id] for engine_id in named]
    # One query for the tenant's own references, whatever the number of engines.
    own_refs = dict(
        TenantEngineCredential.objects.filter(engine__in=engines, tenant=tenant).values_list(
            "engine_id", "credential_ref"
        )
    )
    for engine in engines:
        announcement = announcement_for(engine)
        if explicit:
            require_capability(announcement, "recall")
            require_isolation(announcement, required_isolation)
        elif "recall" not in announcement["capabilities"]["memory"] or not isolation_satisfies(
            announcement["isolation"], required_isolation
        ):
            continue  # defaults take only the engines this agent may use for recall
        if credential_ref_for(engine, tenant, own_refs.get(engine.id)) == "":
            if not explicit:
                continue
            sources.append(
                federation.FailedSource(
                    engine.id,
                    engine.provider,
                    federation.SourceFailure(
                        federation.SOURCE_ERROR,
                        "credential_missing",
                        "This tenant has not set its credential for the engine.",
                    ),
                )
            )
            continue
        sources.append(
            federation.AdapterSource(
                adapter_for(engine, tenant, resolver=resolver, own_ref=own_refs.get(engine.id)), ctx
            )
        )
    if len(sources) > settings.FEDMEM_FEDERATION_MAX_SOURCES:
        sources = sources[: settings.FEDMEM_FEDERATION_MAX_SOURCES]
    return sources


def federated_recall(
    *,
    agent: Agent,
    query: str,
    engine_ids: Sequence[str] | None = None,
    top_k: int = 10,
    timeout_ms: int | None = None,
    isolation: str | None = None,
    user_id: str | None = None,
    session_id: str | None = None,
    trace_parent: str | None = None,
    resolver: Resolver | None = None,
) -> dict[str, Any]:
    """Recall for ``agent`` across engines. ``user_id`` / ``session_id`` narrow the
    namespace each engine is asked in (the agent's end user, the conversation)."""
    plan = policy_plan(agent)  # one read for both the engines and the isolation
    required = _strongest(plan.required_isolation, isolation or Isolation.NONE)
    if engine_ids is None:
        engine_ids = _plan_engines(plan)
    sources = federated_sources(
        agent=agent,
        engine_ids=engine_ids,
        required_isolation=required,
        trace_parent=trace_parent,
        user_id=user_id,
        session_id=session_id,
        resolver=resolver,
    )
    if not sources:
        raise MemoryNoEngines("No engine this agent may recall from.")
    return federation.federated_recall(
        sources,
        query=query,
        top_k=top_k,
        timeout_ms=timeout_ms or settings.FEDMEM_FEDERATION_DEFAULT_TIMEOUT_MS,
    )


HEALTH_CACHE_SECONDS = 30


def engines_health_overview(
    *, engines: Sequence[EngineInstance], tenant: Tenant, timeout_seconds: float = 2.0
) -> dict[str, dict[str, Any]]:
    """Health of several engines for an overview page: asked in parallel, each with
    at most ``timeout_seconds``, and cached per tenant for HEALTH_CACHE_SECONDS so a
    page reload never waits on an engine twice in a row.

    Adapters (and their credential references) are built here, in the caller's
    thread and database connection; the worker threads only make the calls.
    """
    from concurrent.futures import ThreadPoolExecutor

    from django.core.cache import cache

    out: dict[str, dict[str, Any]] = {}
    todo: list[tuple[EngineInstance, Any, OperationContext]] = []
    for engine in engines:
        cached = cache.get(f"fedmem:health:{tenant.pk}:{engine.id}")
        if cached is not None:
            out[engine.id] = {**cached, "cached": True}
            continue
        ctx = operation_context(
            tenant=tenant,
            operation="get_health",
            timeout_seconds=min(engine.timeout_seconds, timeout_seconds),
        )
        todo.append((engine, adapter_for(engine, tenant), ctx))

    def ask(job: tuple[EngineInstance, Any, OperationContext]) -> dict[str, Any]:
        _engine, adapter, ctx = job
        try:
            return dict(adapter.perform("get_health", ctx).to_dict())
        except CapabilityUnsupported:
            return {
                "status": "unknown",
                "error": "The engine announces no health check.",
                "code": "unsupported",
            }
        except AdapterError as exc:
            return {"status": "unavailable", "error": exc.message, "code": exc.reason or "error"}

    if todo:
        with ThreadPoolExecutor(max_workers=min(8, len(todo)), thread_name_prefix="fedmem-health") as pool:
            for (engine, _, _), report in zip(todo, pool.map(ask, todo), strict=True):
                cache.set(f"fedmem:health:{tenant.pk}:{engine.id}", report, HEALTH_CACHE_SECONDS)
                out[engine.id] = report
    return out
