"""The seam between the builtin memory and the engines an agent's policy names.

An agent's policy may send its memory writes to Mem0, its knowledge to Cognee,
or both (hybrid). Operations ask :func:`for_access` once per request and talk to
the :class:`Engine` it returns; the builtin store is an engine like the others.
The providers app registers the router of the external engines
(``providers.routing``) when it loads, so this app never imports provider
adapters. Without a router every agent gets the builtin engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from core.errors import ApiError
from core.vocabulary import Scope
from memory import enforcement
from memory.enforcement import MemoryAccess
from memory.pii import detect_personal_data
from memory.services import items as item_services
from memory.services.items import MAX_BATCH, MemoryDraft, WriteOutcome

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


# --- results --------------------------------------------------------------------------

WriteStatus = Literal["stored", "queued", "settled"]


@dataclass(frozen=True)
class WriteResult:
    """One remember as an engine answered it: ``stored`` by the builtin store (with
    its outcome), or ``queued`` / ``settled`` by an external engine (with its record;
    queued means the engine accepted it and has not applied it yet)."""

    status: WriteStatus
    outcome: WriteOutcome | None = None
    record: dict[str, Any] | None = None


@dataclass
class WriteEntry:
    """One write of a batch: stored builtin (``outcome``), handed to an engine
    (``record``) or refused (``error``)."""

    index: int
    outcome: WriteOutcome | None = None
    record: dict[str, Any] | None = None
    error: ApiError | None = None

    @property
    def status(self) -> str:
        if self.error is not None:
            return "error"
        if self.record is not None:
            return str(self.record["status"])
        assert self.outcome is not None
        return "deduplicated" if self.outcome.deduplicated else "created"


@dataclass(frozen=True)
class BatchWrite:
    """A batch's entries, in request order. ``routed``: the policy sends memory to an
    external engine, so the counts also name queued and settled writes."""

    entries: list[WriteEntry]
    routed: bool = False


@dataclass(frozen=True)
class FederatedGroup:
    """One text found by one or more engines, every source's match kept."""

    text: str
    kind: str
    kinds: list[str]
    matches: list[dict[str, Any]]
    rrf_score: float
    # Set when sources disagree about the same subject (see providers.federation).
    conflict: dict[str, Any] | None = None


@dataclass(frozen=True)
class FederatedRecall:
    """A recall merged over builtin and the policy's engines, with each source's status."""

    groups: list[FederatedGroup]
    status: str
    sources: list[dict[str, Any]] = field(default_factory=list)


# --- the router the providers app registers ----------------------------------------------


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
    ) -> FederatedRecall: ...

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


# --- engines ----------------------------------------------------------------------------


@dataclass(frozen=True)
class FederatedQuery:
    """A hybrid recall as the engines are asked it."""

    query: str
    top_k: int
    user_id: str | None = None
    session_id: str | None = None
    trace_parent: str | None = None


def _builtin_entries(results: list[item_services.BatchResult]) -> list[WriteEntry]:
    return [WriteEntry(r.index, outcome=r.outcome, error=r.error) for r in results]


@dataclass(frozen=True)
class BuiltinEngine:
    """fedmem's own store: writes are stored here, recall is the builtin retrieval.
    ``federates_recall``: whether a hybrid recall also asks external engines."""

    plan: EnginePlan = EnginePlan()

    @property
    def federates_recall(self) -> bool:
        return False

    def remember(
        self,
        access: MemoryAccess,
        draft: MemoryDraft,
        *,
        idempotency_key: str | None,
        trace_parent: str | None,
    ) -> WriteResult:
        if self._routes(access, draft):
            return self._hand_over(access, draft, trace_parent)
        outcome = item_services.memory_remember(access=access, draft=draft, idempotency_key=idempotency_key)
        return WriteResult("stored", outcome=outcome)

    def remember_batch(
        self,
        access: MemoryAccess,
        drafts: Sequence[MemoryDraft | ApiError],
        *,
        idempotency_key: str | None,
        trace_parent: str | None,
        via: str = "batch",
    ) -> BatchWrite:
        if self.plan.memory_engine is not None:
            return self._hand_over_batch(access, drafts, trace_parent)
        results = item_services.memory_remember_batch(
            access=access, drafts=drafts, idempotency_key=idempotency_key, via=via
        )
        return BatchWrite(_builtin_entries(results))

    # The hooks a routed engine fills; the builtin store keeps every write.

    def _routes(self, access: MemoryAccess, draft: MemoryDraft) -> bool:
        return False

    def _hand_over(self, access: MemoryAccess, draft: MemoryDraft, trace_parent: str | None) -> WriteResult:
        raise NotImplementedError("the builtin engine hands no write over")

    def _hand_over_batch(
        self, access: MemoryAccess, drafts: Sequence[MemoryDraft | ApiError], trace_parent: str | None
    ) -> BatchWrite:
        raise NotImplementedError("the builtin engine hands no write over")

    def recall(self, access: MemoryAccess, query: FederatedQuery) -> FederatedRecall:
        """Only engines that federate recall answer this; builtin recall is
        memory.retrieval's, asked by the operation directly."""
        raise NotImplementedError("the builtin engine does not federate recall")


@dataclass(frozen=True)
class RoutedEngine(BuiltinEngine):
    """A mem0 / cognee / hybrid policy: memory writes go to the Mem0 instance (session
    memory always stays builtin), a hybrid recall merges builtin with every engine."""

    router: Router | None = None

    @property
    def federates_recall(self) -> bool:
        return self.plan.federated_recall

    def _routes(self, access: MemoryAccess, draft: MemoryDraft) -> bool:
        return (
            self.plan.memory_engine is not None
            and (draft.scope or access.policy.default_scope) != Scope.SESSION
        )

    def _hand_over(self, access: MemoryAccess, draft: MemoryDraft, trace_parent: str | None) -> WriteResult:
        """The same policy checks as a builtin write, then the engine takes it."""
        assert self.router is not None
        checked = item_services.validate_draft(access, draft)
        finding = detect_personal_data([checked["content"]])[0]
        enforcement.check_personal_data(
            access, personal_data=finding.personal_data or draft.personal_data, types=finding.types
        )
        record = self.router.remember(access, self.plan, draft, trace_parent=trace_parent)
        return WriteResult("queued" if record["status"] == "queued" else "settled", record=record)

    def _hand_over_batch(
        self, access: MemoryAccess, drafts: Sequence[MemoryDraft | ApiError], trace_parent: str | None
    ) -> BatchWrite:
        # Each write goes to the engine in order; session memory stays builtin.
        if not 1 <= len(drafts) <= MAX_BATCH:
            raise item_services.field_error("items", f"Send between 1 and {MAX_BATCH} items.")
        entries: list[WriteEntry] = []
        for index, draft in enumerate(drafts):
            if isinstance(draft, ApiError):
                entries.append(WriteEntry(index, error=draft))
                continue
            try:
                if self._routes(access, draft):
                    entries.append(
                        WriteEntry(index, record=self._hand_over(access, draft, trace_parent).record)
                    )
                else:
                    outcome = item_services.memory_remember(access=access, draft=draft, via="batch")
                    entries.append(WriteEntry(index, outcome=outcome))
            except ApiError as exc:
                entries.append(WriteEntry(index, error=exc))
        return BatchWrite(entries, routed=True)

    def recall(self, access: MemoryAccess, query: FederatedQuery) -> FederatedRecall:
        assert self.router is not None
        return self.router.recall(
            access,
            self.plan,
            query=query.query,
            top_k=query.top_k,
            user_id=query.user_id,
            session_id=query.session_id,
            trace_parent=query.trace_parent,
        )


# What an operation talks to: the builtin store or a policy's routed engines.
Engine = BuiltinEngine | RoutedEngine
BUILTIN_ENGINE = BuiltinEngine()


def for_access(access: MemoryAccess) -> Engine:
    """The engine the caller's agent's policy names (builtin without a router)."""
    plan = plan_for(access)
    if _router is None or plan.engine == BUILTIN:
        return BUILTIN_ENGINE
    return RoutedEngine(plan=plan, router=_router)
