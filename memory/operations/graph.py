"""Graph use cases: discover, trace, causal_chain, what_if, and a memory's
supersede / revive / history."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any
from uuid import UUID

from memory.enforcement import Keys, MemoryAccess, read_scopes
from memory.models import MemoryItem
from memory.readers import MemoryReader
from memory.reasoning import graph
from memory.rendering import item_json
from memory.retrieval import graphrank
from memory.retrieval.hybrid import RecallQuery
from memory.services.supersession import memory_history, memory_revive, memory_supersede


@dataclass(frozen=True)
class Window:
    """What traversal may see in time: what was current at ``as_of`` (now when None),
    optionally with retired facts."""

    as_of: datetime | None = None
    include_superseded: bool = False


# The traversals read through the one read model: one agent's access (API, MCP) or a
# console reader over every agent its user may view.
Readable = MemoryAccess | MemoryReader


def _view(who: Readable, window: Window, scopes: tuple[str, ...] | None = None) -> graph.View:
    """The requested (isolate) or the policy's readable scopes, in ``window``."""
    reader = who if isinstance(who, MemoryReader) else MemoryReader.of(who)
    return reader.view(at=window.as_of, include_superseded=window.include_superseded, scopes=scopes)


@dataclass(frozen=True)
class DiscoverRequest:
    query: str
    scopes: tuple[str, ...] | None = None
    user_id: str | None = None
    session_id: str | None = None
    top_k: int = 5
    hops: int = 2
    max_results: int = 20
    max_visited: int = 200
    isolate: bool = False
    window: Window = Window()


@dataclass(frozen=True)
class DiscoverResult:
    results: list[dict[str, Any]]
    scopes: tuple[str, ...]

    def body(self) -> dict[str, Any]:
        return {"results": self.results, "scopes": list(self.scopes)}


def discover(access: MemoryAccess, request: DiscoverRequest) -> DiscoverResult:
    """Facts for the query ranked by the graph-aware core (memory.retrieval.graphrank):
    relevance fused with a graph score, each with the path that reached it and why."""
    scopes = read_scopes(access, list(request.scopes) if request.scopes is not None else None)
    # A policy requiring strict isolation confines traversal as isolate=true does.
    isolate = request.isolate or access.policy.required_isolation == "strict"
    seeds = RecallQuery(
        query=request.query,
        scopes=scopes,
        keys=Keys(
            user_id=request.user_id or access.default_user_id or None,
            session_id=request.session_id,
            narrow=True,
        ),
        top_k=request.top_k,
        as_of=request.window.as_of,
        include_superseded=request.window.include_superseded,
    )
    view = _view(access, request.window, scopes if isolate else None)
    found = graphrank.rank(
        access, seeds, view, hops=request.hops, limit=request.max_results, max_visited=request.max_visited
    )
    relations = graph.relations_of([f.item.pk for f in found])
    sessions = {f.item.pk: f.item.session_id for f in found}
    results = [
        {
            "id": str(f.item.pk),
            "content": f.item.content,
            "session_id": f.item.session_id,
            "kind": f.kind,
            "hop": f.hop,
            "seed_id": str(f.seed_id),
            "cross_session": f.item.session_id != sessions.get(f.seed_id, f.item.session_id),
            "score": f.score,
            "why": f.why(),
            "path": f.path,
            "relations": relations[f.item.pk],
            "trust": "untrusted",
        }
        for f in found
    ]
    return DiscoverResult(results, scopes)


@dataclass(frozen=True)
class GraphAnswer:
    """A traversal's answer as memory.reasoning.graph shapes it."""

    data: dict[str, Any]

    def body(self) -> dict[str, Any]:
        return self.data


@dataclass(frozen=True, kw_only=True)
class WalkBounds:
    """How far a causal walk may go (hops, edges read) and the window it looks in."""

    max_depth: int = 5
    max_visited: int = 100
    window: Window = Window()


def _walk(access: Readable, request: WalkBounds, walk: Callable[..., Any]) -> Any:
    """One memory.reasoning.graph walk over the caller's view, within the request's
    bounds; the request's own fields are the walk's keyword arguments, by name."""
    own = {f.name: getattr(request, f.name) for f in fields(request) if f.name not in _BOUNDS}
    return walk(
        _view(access, request.window), max_depth=request.max_depth, max_visited=request.max_visited, **own
    )


_BOUNDS = frozenset(f.name for f in fields(WalkBounds))


@dataclass(frozen=True)
class TraceRequest(WalkBounds):
    direction: str  # effects | causes
    item_id: UUID | None = None
    content: str | None = None


def trace(access: Readable, request: TraceRequest) -> GraphAnswer:
    """Follow causal links from a fact or a text to its effects or its root causes
    (404 ``memory_not_found`` when the fact is not visible in the window)."""
    return GraphAnswer(_walk(access, request, graph.trace))


@dataclass(frozen=True)
class CausalChainRequest(WalkBounds):
    source: str
    target: str


def causal_chain(access: Readable, request: CausalChainRequest) -> GraphAnswer:
    """The shortest chain of asserted causal links from one event to another (None if none)."""
    return GraphAnswer({"chain": _walk(access, request, graph.causal_chain)})


@dataclass(frozen=True)
class WhatIfRequest(WalkBounds):
    item_id: UUID
    origin: str
    direction: str = "effects"


def what_if(access: Readable, request: WhatIfRequest) -> GraphAnswer:
    """What collapses if one fact were removed (hypothetical; nothing changes)."""
    return GraphAnswer(_walk(access, request, graph.what_if))


# --- supersession ----------------------------------------------------------------------


@dataclass(frozen=True)
class SupersedeRequest:
    item_id: Any
    content: str
    reason: str = ""


@dataclass(frozen=True)
class Superseded:
    old: MemoryItem
    new: MemoryItem

    def body(self) -> dict[str, Any]:
        return {"old": item_json(self.old), "new": item_json(self.new)}


def supersede(access: MemoryAccess, request: SupersedeRequest) -> Superseded:
    """Replace a fact with a new one; the old one is retired (invalid_at), not deleted."""
    outcome = memory_supersede(
        access=access, item_id=request.item_id, content=request.content, reason=request.reason
    )
    return Superseded(outcome.old, outcome.new)


def revive(access: MemoryAccess, item_id: Any) -> Superseded:
    """Re-assert a retired fact: it becomes current again and retires its successor."""
    outcome = memory_revive(access=access, item_id=item_id)
    return Superseded(outcome.old, outcome.new)


@dataclass(frozen=True)
class History:
    item: MemoryItem
    supersedes: list[dict[str, Any]]
    superseded_by: list[dict[str, Any]]
    events: list[dict[str, Any]]

    def body(self) -> dict[str, Any]:
        return {
            "item": item_json(self.item),
            "supersedes": self.supersedes,
            "superseded_by": self.superseded_by,
            "events": self.events,
        }


def history(access: MemoryAccess, item_id: Any) -> History:
    """A memory's supersession links and every recorded mutation."""
    found = memory_history(access, item_id)
    return History(found["item"], found["supersedes"], found["superseded_by"], found["events"])
