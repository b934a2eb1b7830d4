"""Engine selection: where an agent's memory writes, recalls and knowledge go.

Read from the agent's current policy version (engine, mem0_instance,
cognee_instance, required_isolation):

=========  ==============  ===================  ===============================
engine     memory writes   knowledge            recall
=========  ==============  ===================  ===============================
builtin    builtin         builtin              builtin
mem0       Mem0 instance   builtin              builtin + Mem0, merged
cognee     builtin         Cognee instance      builtin + Cognee, merged
hybrid     Mem0 instance   Cognee instance      builtin + Mem0 + Cognee, merged
=========  ==============  ===================  ===============================

Session memory always stays builtin. Before any call leaves the process the
engine must exist for the tenant, announce the operation (else 422
``memory_capability_unsupported``) and guarantee the policy's isolation (else 422
``memory_isolation_insufficient``); an engine that fails answers 502
``memory_engine_unavailable``. Registered with :mod:`memory.engines` when the
providers app loads; the memory app calls it once per request.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from core.errors import (
    MemoryCapabilityUnsupported,
    MemoryEngineCredentialMissing,
    MemoryEngineMissing,
    MemoryEngineRefused,
    MemoryIsolationInsufficient,
)
from governance.models import Agent, AgentPolicyVersion
from governance.selectors import memory_policy_from_stored
from memory.enforcement import MemoryAccess
from memory.engines import BUILTIN, EnginePlan, FederatedGroup, FederatedRecall
from providers import federation, services
from providers.adapters.base import AdapterError, CapabilityUnsupported, NewRecord
from providers.models import EngineInstance

Engine = AgentPolicyVersion.Engine


def policy_plan(agent: Agent) -> EnginePlan:
    """The agent's engine choice and required isolation, from its current policy version
    (one query)."""
    row = (
        AgentPolicyVersion.objects.filter(agent=agent)
        .order_by("-version")
        .values("engine", "mem0_instance", "cognee_instance", "policy")
        .first()
    )
    engine = row["engine"] if row else Engine.BUILTIN
    mem0 = row["mem0_instance"] if row and engine in (Engine.MEM0, Engine.HYBRID) else ""
    cognee = row["cognee_instance"] if row and engine in (Engine.COGNEE, Engine.HYBRID) else ""
    return EnginePlan(
        engine=engine,
        memory_engine=mem0 or None,
        knowledge_engine=cognee or None,
        required_isolation=memory_policy_from_stored(
            agent.pk, row["policy"] if row else None
        ).required_isolation,
    )


def _engine(agent: Agent, engine_id: str, operation: str, required_isolation: str) -> EngineInstance:
    engine = EngineInstance.objects.visible_to_tenant(agent.tenant).filter(pk=engine_id).first()
    if engine is None:
        raise MemoryEngineMissing(
            f"The agent's policy names engine {engine_id!r}, which no longer exists.",
            details={"engine_id": engine_id},
        )
    announcement = services.announcement_for(engine)
    services.require_capability(announcement, operation)
    services.require_isolation(announcement, required_isolation)
    return engine


def _perform(engine: EngineInstance, agent: Agent, operation: str, ctx: Any, **kwargs: Any) -> Any:
    adapter = services.adapter_for(engine, agent.tenant)
    try:
        return adapter.perform(operation, ctx, **kwargs)
    except CapabilityUnsupported as exc:
        raise MemoryCapabilityUnsupported(
            exc.message,
            details={"engine_id": engine.id, "operation": operation},
        ) from None
    except AdapterError as exc:
        if exc.reason == "credential_missing":
            raise MemoryEngineCredentialMissing(exc.message, details={"engine_id": engine.id}) from None
        if exc.reason == "isolation_insufficient":
            raise MemoryIsolationInsufficient(exc.message, details={"engine_id": engine.id}) from None
        if exc.reason in ("not_found", "request_refused") and not exc.retryable:
            # The engine answered, and said no to this request (e.g. an unknown dataset).
            raise MemoryEngineRefused(
                exc.message,
                details={"engine_id": engine.id, "reason": exc.reason},
            ) from None
        raise services.engine_unavailable(exc, engine.id) from None


def _context(
    access: MemoryAccess, engine: EngineInstance, operation: str, plan_isolation: str, **keys: Any
) -> Any:
    return services.operation_context(
        tenant=access.agent.tenant,
        operation=operation,
        agent=access.agent,
        user_id=keys.get("user_id") or None,
        session_id=keys.get("session_id") or None,
        trace_parent=keys.get("trace_parent"),
        timeout_seconds=engine.timeout_seconds,
        required_isolation=plan_isolation,
    )


def merge_by_content(groups: list[dict[str, Any]], *, rrf_k: int = federation.RRF_K) -> list[dict[str, Any]]:
    """Federation groups by kind and text; a hybrid recall dedups by content alone
    (Mem0 calls it a fact, Cognee a document): one entry per text, every source match
    kept, fused again by ordinal rank (one vote per engine, its best rank)."""
    merged: dict[str, dict[str, Any]] = {}
    for group in groups:
        norm = federation.normalize_text(group["text"])
        entry = merged.get(norm)
        if entry is None:
            merged[norm] = {**group, "matches": list(group["matches"]), "kinds": [group["kind"]]}
            continue
        entry["matches"].extend(group["matches"])
        if group["kind"] not in entry["kinds"]:
            entry["kinds"].append(group["kind"])
        entry["conflict"] = entry["conflict"] or group["conflict"]
    for entry in merged.values():
        best: dict[str, int] = {}
        for match in entry["matches"]:
            best[match["engine_id"]] = min(best.get(match["engine_id"], 10**9), match["rank"])
        entry["rrf_score"] = round(sum(1.0 / (rrf_k + rank) for rank in best.values()), 6)
    return sorted(merged.values(), key=lambda e: (-e["rrf_score"], -len(e["matches"])))


def _follow(
    engine: EngineInstance, access: MemoryAccess, ctx: Any, operation: str, result: Any
) -> dict[str, Any]:
    """A queued write is followed until the provider settles it (providers.settlement);
    the answer names the record that tracks it."""
    from providers.settlement import write_track

    write = write_track(
        engine=engine,
        tenant=access.agent.tenant,
        agent=access.agent,
        ctx=ctx,
        operation=operation,
        result=result,
    )
    return {"write_id": str(write.pk)} if write is not None else {}


class Router:
    """What memory.engines.Router describes; one instance, registered at start-up."""

    def plan(self, agent: Agent) -> EnginePlan:
        return policy_plan(agent)

    def remember(
        self, access: MemoryAccess, plan: EnginePlan, draft: Any, *, trace_parent: str | None
    ) -> dict[str, Any]:
        assert plan.memory_engine is not None
        engine = _engine(access.agent, plan.memory_engine, "remember", plan.required_isolation)
        ctx = _context(
            access, engine, "remember", plan.required_isolation,
            user_id=draft.user_id if draft.user_id is not None else access.default_user_id,
            session_id=draft.session_id, trace_parent=trace_parent,
        )  # fmt: skip
        record = NewRecord(text=draft.content.strip(), kind=draft.record_kind, metadata=dict(draft.metadata))
        result = _perform(engine, access.agent, "remember", ctx, record=record)
        return {
            "engine_id": engine.id,
            "provider": engine.provider,
            **result.to_dict(),
            **_follow(engine, access, ctx, "remember", result),
        }

    def recall(
        self,
        access: MemoryAccess,
        plan: EnginePlan,
        *,
        query: str,
        top_k: int,
        user_id: str | None,
        session_id: str | None,
        trace_parent: str | None,
    ) -> FederatedRecall:
        engine_ids = [BUILTIN, *(e for e in (plan.memory_engine, plan.knowledge_engine) if e)]
        for engine_id in engine_ids[1:]:
            _engine(access.agent, engine_id, "recall", plan.required_isolation)
        result = services.federated_recall(
            agent=access.agent,
            query=query,
            engine_ids=engine_ids,
            top_k=top_k,
            timeout_ms=settings.FEDMEM_FEDERATION_DEFAULT_TIMEOUT_MS,
            user_id=user_id,
            session_id=session_id,
            trace_parent=trace_parent,
        )
        groups = [
            FederatedGroup(
                text=g["text"],
                kind=g["kind"],
                kinds=g["kinds"],
                matches=g["matches"],
                rrf_score=g["rrf_score"],
                conflict=g["conflict"],
            )
            for g in merge_by_content(result["results"])[:top_k]
        ]
        return FederatedRecall(groups=groups, status=result["status"], sources=result["sources"])

    def knowledge(
        self,
        access: MemoryAccess,
        engine_id: str,
        operation: str,
        *,
        trace_parent: str | None = None,
        **kwargs: Any,
    ) -> Any:
        from memory.engines import plan_for

        plan = plan_for(access)
        engine = _engine(access.agent, engine_id, operation, plan.required_isolation)
        ctx = _context(access, engine, operation, plan.required_isolation, trace_parent=trace_parent)
        result = _perform(engine, access.agent, operation, ctx, **kwargs)
        if isinstance(result, list):
            return [hit.to_dict() for hit in result]
        return {**result.to_dict(), **_follow(engine, access, ctx, operation, result)}


ROUTER = Router()
