"""Recall and search: ranked memories for a query, recall framed as untrusted data."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory import engines
from memory.enforcement import Keys, MemoryAccess, read_scopes
from memory.readers import MemoryReader
from memory.rendering import item_json
from memory.retrieval.framing import frame, new_nonce
from memory.retrieval.hybrid import Hit, RecallQuery, retrieve

# The fields of a result that go between the untrusted-data markers.
FRAMED = ("id", "scope", "kind", "created_at", "score", "content")


@dataclass(frozen=True)
class RecallRequest:
    query: str
    scopes: tuple[str, ...] | None = None  # None: the policy's read_scopes
    top_k: int | None = None  # None: the policy's recall_top_k
    session_id: str | None = None
    user_id: str | None = None  # None: a user caller's own name
    team: str | None = None
    project: str | None = None
    min_score: float | None = None
    search_mode: str = "hybrid"  # hybrid | vector | keyword
    recency_weight: float | None = None
    as_of: datetime | None = None
    include_superseded: bool = False
    mode: str = "hybrid"  # hybrid | graph
    hops: int = 2  # graph mode only
    trace_parent: str | None = None


@dataclass(frozen=True)
class SearchRequest(RecallRequest):
    kinds: tuple[str, ...] = ()
    record_kinds: tuple[str, ...] = ()
    created_after: datetime | None = None
    created_before: datetime | None = None


@dataclass(frozen=True)
class RecallResult:
    results: list[dict[str, Any]]
    context: str
    nonce: str
    search_mode: str
    mode: str
    scopes: tuple[str, ...]
    # A recall merged over the policy's engines: the engine choice and every source.
    federated: engines.FederatedRecall | None = None
    engine: str = engines.BUILTIN

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "results": self.results,
            "context": self.context,
            "nonce": self.nonce,
            "search_mode": self.search_mode,
            "mode": self.mode,
            "scopes": list(self.scopes),
        }
        if self.federated is not None:
            body.update(engine=self.engine, status=self.federated.status, sources=self.federated.sources)
        return body


@dataclass(frozen=True)
class SearchResult:
    results: list[dict[str, Any]]
    search_mode: str
    scopes: tuple[str, ...]

    def body(self) -> dict[str, Any]:
        return {"results": self.results, "search_mode": self.search_mode, "scopes": list(self.scopes)}


def recall_query(access: MemoryAccess, request: RecallRequest) -> RecallQuery:
    """The retrieval query of a request: scopes checked against the policy, keys
    narrowed, the policy's defaults filled in; a search also carries its filters."""
    scopes = read_scopes(access, list(request.scopes) if request.scopes is not None else None)
    search = request if isinstance(request, SearchRequest) else None
    return RecallQuery(
        query=request.query,
        scopes=scopes,
        keys=Keys(
            user_id=request.user_id or access.default_user_id or None,
            session_id=request.session_id,
            team=request.team,
            project=request.project,
            narrow=True,
        ),
        top_k=request.top_k or access.policy.recall_top_k,
        mode=request.search_mode,
        min_score=request.min_score,
        recency_weight=request.recency_weight,
        kinds=search.kinds if search else (),
        record_kinds=search.record_kinds if search else (),
        created_after=search.created_after if search else None,
        created_before=search.created_before if search else None,
        as_of=request.as_of,
        include_superseded=request.include_superseded,
    )


def _row(hit: Hit) -> dict[str, Any]:
    item = hit.item
    return {
        "id": str(item.pk),
        "content": item.content,
        "score": hit.score,
        "similarity": hit.similarity,
        "vector_rank": hit.vector_rank,
        "keyword_rank": hit.keyword_rank,
        "scope": item.scope,
        "scopes": list(item.scopes),
        "kind": item.kind,
        "record_kind": item.record_kind,
        "created_at": item.created_at.isoformat(),
        "provenance": item.provenance,
        "trust": "untrusted",
    }


def _framed(
    results: list[dict[str, Any]], *, rq: RecallQuery, mode: str, search_mode: str, **extra: Any
) -> RecallResult:
    nonce = new_nonce()
    context = frame([{k: r[k] for k in FRAMED} for r in results], nonce)
    return RecallResult(results, context, nonce, search_mode, mode, rq.scopes, **extra)


def recall(access: MemoryAccess, request: RecallRequest) -> RecallResult:
    """Results and the same results framed as untrusted data under a fresh nonce. A
    hybrid recall under a mem0 / cognee / hybrid policy also asks the policy's
    engines and merges by content."""
    rq = recall_query(access, request)
    engine = engines.for_access(access)
    if request.mode == "hybrid" and engine.federates_recall:
        return _federated(access, engine, request, rq)
    if request.mode == "graph":
        results = graph_recall(access, rq, hops=request.hops)
    else:
        results = [_row(hit) for hit in retrieve(access, rq)]
    return _framed(results, rq=rq, mode=request.mode, search_mode=rq.mode)


def _federated(
    access: MemoryAccess, engine: engines.Engine, request: RecallRequest, rq: RecallQuery
) -> RecallResult:
    merged = engine.recall(
        access,
        engines.FederatedQuery(
            query=rq.query,
            top_k=rq.top_k,
            user_id=rq.keys.user_id,
            session_id=rq.keys.session_id,
            trace_parent=request.trace_parent,
        ),
    )
    results = []
    for group in merged.groups:
        own = next((m for m in group.matches if m["engine_id"] == engines.BUILTIN), None)
        first = own or group.matches[0]
        results.append(
            {
                "id": first["external_id"],
                "content": group.text,
                "score": group.rrf_score,
                "kind": group.kind,
                "kinds": group.kinds,
                "scope": (own or {}).get("metadata", {}).get("scope", ""),
                "created_at": first["created_at"],
                "engines": list(dict.fromkeys(m["engine_id"] for m in group.matches)),
                "matches": group.matches,
                "conflict": group.conflict,
                "trust": "untrusted",
            }
        )
    return _framed(
        results,
        rq=rq,
        mode=request.mode,
        search_mode="federated",
        federated=merged,
        engine=engine.plan.engine,
    )


def graph_recall(access: MemoryAccess, rq: RecallQuery, *, hops: int) -> list[dict[str, Any]]:
    """Graph mode: the graph-aware ranking (memory.retrieval.graphrank) in the policy's
    readable scopes (or only the requested ones under strict isolation), top_k in all."""
    from memory.retrieval import graphrank

    strict = access.policy.required_isolation == "strict"
    view = MemoryReader.of(access).view(
        at=rq.as_of, include_superseded=rq.include_superseded, scopes=rq.scopes if strict else None
    )
    results = []
    for f in graphrank.rank(access, rq, view, hops=hops, limit=rq.top_k, max_visited=max(200, rq.top_k * 10)):
        entry = _row(Hit(f.item, f.score, f.similarity, f.vector_rank, f.keyword_rank))
        entry["graph"] = {
            "kind": f.kind, "hop": f.hop, "seed_id": str(f.seed_id), "path": f.path, "why": f.why(),
        }  # fmt: skip
        results.append(entry)
    return results


def search(access: MemoryAccess, request: SearchRequest) -> SearchResult:
    """A plain ranked list with filters (no framing)."""
    rq = recall_query(access, request)
    results = [
        {
            **item_json(hit.item),
            "score": hit.score,
            "similarity": hit.similarity,
            "vector_rank": hit.vector_rank,
            "keyword_rank": hit.keyword_rank,
        }
        for hit in retrieve(access, rq)
    ]
    return SearchResult(results, rq.mode, rq.scopes)


__all__ = ["RecallRequest", "RecallResult", "SearchRequest", "SearchResult", "recall", "search"]
