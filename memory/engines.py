"""The seam between the builtin memory and the engine router of the providers app.

An agent's policy may send its memory writes to Mem0, its knowledge to Cognee,
or both (hybrid). Memory code asks :func:`router` once per request; the providers
app registers the router (``providers.routing``) when it loads, so this app never
imports provider adapters. Without a router everything stays builtin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from memory.enforcement import MemoryAccess

BUILTIN = "builtin"


@dataclass(frozen=True)
class EnginePlan:
    """Where one agent's memory goes, read from its policy version."""

    engine: str = BUILTIN  # builtin | mem0 | cognee | hybrid
    memory_engine: str | None = None  # the Mem0 instance memory writes go to
    knowledge_engine: str | None = None  # the Cognee instance knowledge goes to
    required_isolation: str = "none"

    @property
    def federated_recall(self) -> bool:
        return self.memory_engine is not None or self.knowledge_engine is not None


class Router(Protocol):
    def plan(self, agent: Any) -> EnginePlan: ...

    def remember(
        self, access: MemoryAccess, plan: EnginePlan, draft: Any, *, trace_parent: str | None
    ) -> dict[str, Any]: ...

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
    ) -> dict[str, Any]: ...

    def knowledge(
        self,
        access: MemoryAccess,
        engine_id: str,
        operation: str,
        *,
        trace_parent: str | None = None,
        **kwargs: Any,
    ) -> Any: ...


_router: Router | None = None


def register_router(router: Router | None) -> None:
    global _router
    _router = router


def router() -> Router | None:
    return _router


def plan_for(access: MemoryAccess) -> EnginePlan:
    """The plan of the caller's agent, from the policy version its access was built
    with (no query). Without a router (providers not installed) everything is builtin."""
    if _router is None:
        return EnginePlan()
    engine, mem0, cognee = access.engine
    return EnginePlan(
        engine=engine,
        memory_engine=mem0 or None if engine in ("mem0", "hybrid") else None,
        knowledge_engine=cognee or None if engine in ("cognee", "hybrid") else None,
        required_isolation=access.policy.required_isolation,
    )
