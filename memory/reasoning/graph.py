"""Traversal of the memory graph, always inside what the caller may read.

Every step is a SQL query whose item side is :func:`memory.enforcement.visible_q`
(tenant, scopes, classification, ``as_of`` validity, retention): entities and
edges are only ever reached through items the caller can see, so a same-named
entity in another tenant (a different row) is never a bridge, and nothing here
writes. Work is bounded by ``max_depth``/``hops`` and ``max_visited``.

Span linking: edge A continues into edge B (A.effect is B.cause) when their
normalized content lemmas overlap enough (Jaccard >= ``TERM_OVERLAP``) or their
span embeddings reach ``FEDMEM_SPAN_LINK_THRESHOLD`` cosine similarity.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings
from django.db.models import Q, Subquery
from pgvector.django import CosineDistance

from core.errors import NotFound
from governance.selectors import as_uuid
from memory.embeddings import embed_texts
from memory.enforcement import MemoryAccess
from memory.extraction.pipeline import span_terms
from memory.models import CausalEdge, MemoryItem, Mention
from memory.retrieval.hybrid import RecallQuery, retrieve

TERM_OVERLAP = 0.5
EFFECTS, CAUSES = "effects", "causes"


@dataclass(frozen=True)
class View:
    """What a traversal may touch: the visibility condition of the items."""

    access: MemoryAccess
    q: Q

    def items(self) -> Any:
        return MemoryItem.objects.filter(self.q)

    def edges(self) -> Any:
        return CausalEdge.objects.filter(
            tenant_id=self.access.tenant_id, item_id__in=Subquery(self.items().values("pk"))
        )


@dataclass(frozen=True)
class Span:
    text: str
    terms: frozenset[str]
    vector: Any


def span_of(text: str) -> Span:
    return Span(text, frozenset(span_terms([text])[0]), embed_texts([text])[0])


def _cause(edge: CausalEdge) -> Span:
    return Span(edge.cause, frozenset(edge.cause_terms), np.asarray(edge.cause_embedding))


def _effect(edge: CausalEdge) -> Span:
    return Span(edge.effect, frozenset(edge.effect_terms), np.asarray(edge.effect_embedding))


def _cosine(a: Any, b: Any) -> float:
    a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    denom = float(np.linalg.norm(a) * np.linalg.norm(b)) or 1.0
    return float(np.dot(a, b) / denom)


def same_event(a: Span, b: Span) -> bool:
    if a.terms and b.terms and len(a.terms & b.terms) / len(a.terms | b.terms) >= TERM_OVERLAP:
        return True
    return _cosine(a.vector, b.vector) >= settings.FEDMEM_SPAN_LINK_THRESHOLD


def linked_edges(view: View, span: Span, *, side: str, exclude: set[int], limit: int) -> list[CausalEdge]:
    """Visible edges whose ``side`` ("cause" or "effect") names the same event as ``span``."""
    terms_field, vector_field = f"{side}_terms", f"{side}_embedding"
    threshold = settings.FEDMEM_SPAN_LINK_THRESHOLD
    candidates = (
        view.edges()
        .exclude(pk__in=exclude)
        .annotate(distance=CosineDistance(vector_field, span.vector))
        .filter(Q(**{f"{terms_field}__overlap": sorted(span.terms)}) | Q(distance__lte=1 - threshold))
        .order_by("distance", "id")[: limit * 4]
    )
    pick = _cause if side == "cause" else _effect
    return [edge for edge in candidates if same_event(span, pick(edge))][:limit]


def _edge_json(edge: CausalEdge, depth: int, parent: int | None) -> dict[str, Any]:
    return {
        "edge_id": edge.pk,
        "cause": edge.cause,
        "effect": edge.effect,
        "cue": edge.cue,
        "item_id": str(edge.item_id),
        "depth": depth,
        "from_edge": parent,
    }


def visible_item(view: View, item_id: Any) -> MemoryItem:
    pk = as_uuid(item_id)
    item = view.items().filter(pk=pk).defer("embedding", "search_vector").first() if pk else None
    if item is None:
        raise NotFound("Memory not found.", code="memory_not_found")
    return item


# --- trace ------------------------------------------------------------------------


@dataclass
class Walk:
    """One bounded breadth-first walk over causal edges."""

    hops: list[dict[str, Any]] = field(default_factory=list)
    edges: dict[int, CausalEdge] = field(default_factory=dict)
    terminals: list[CausalEdge] = field(default_factory=list)
    truncated: bool = False


def _origin_edges(view: View, direction: str, item_id: Any, content: str | None, limit: int) -> list[Any]:
    if item_id is not None:
        item = visible_item(view, item_id)
        return list(view.edges().filter(item_id=item.pk).order_by("id"))
    assert content is not None
    # effects of X: edges whose cause is X; causes of X: edges whose effect is X.
    side = "cause" if direction == EFFECTS else "effect"
    return linked_edges(view, span_of(content), side=side, exclude=set(), limit=limit)


def walk(
    view: View,
    start: list[CausalEdge],
    *,
    direction: str,
    max_depth: int,
    max_visited: int,
    pruned: frozenset[int] = frozenset(),
) -> Walk:
    result = Walk()
    queue: deque[tuple[CausalEdge, int, int | None]] = deque()
    for edge in start:
        if edge.pk not in pruned and edge.pk not in result.edges and len(result.edges) < max_visited:
            result.edges[edge.pk] = edge
            queue.append((edge, 1, None))
    while queue:
        edge, depth, parent = queue.popleft()
        result.hops.append(_edge_json(edge, depth, parent))
        if direction == EFFECTS:
            following = linked_edges(
                view, _effect(edge), side="cause", exclude={edge.pk, *pruned}, limit=max_visited
            )
        else:
            following = linked_edges(
                view, _cause(edge), side="effect", exclude={edge.pk, *pruned}, limit=max_visited
            )
        if not following:
            result.terminals.append(edge)
            continue
        if depth >= max_depth:
            result.truncated = True
            continue
        for nxt in following:
            if nxt.pk in result.edges:
                continue
            if len(result.edges) >= max_visited:
                result.truncated = True
                break
            result.edges[nxt.pk] = nxt
            queue.append((nxt, depth + 1, edge.pk))
    return result


def trace(
    view: View,
    *,
    direction: str,
    item_id: Any = None,
    content: str | None = None,
    max_depth: int,
    max_visited: int,
) -> dict[str, Any]:
    start = _origin_edges(view, direction, item_id, content, max_visited)
    result = walk(view, start, direction=direction, max_depth=max_depth, max_visited=max_visited)
    pick = (lambda e: e.effect) if direction == EFFECTS else (lambda e: e.cause)
    terminals = [{"span": pick(e), "item_id": str(e.item_id), "edge_id": e.pk} for e in result.terminals]
    return {
        "origin": {"item_id": str(item_id) if item_id is not None else None, "content": content},
        "direction": direction,
        "chain": result.hops,
        "terminals": terminals,
        "root_causes": terminals if direction == CAUSES else [],
        "visited": len(result.edges),
        "truncated": result.truncated,
    }


# --- causal chain -----------------------------------------------------------------


def causal_chain(view: View, *, source: str, target: str, max_depth: int, max_visited: int) -> Any:
    """The shortest chain of asserted edges from ``source`` to ``target``, or None."""
    goal = span_of(target)
    start = linked_edges(view, span_of(source), side="cause", exclude=set(), limit=max_visited)
    parents: dict[int, int | None] = {}
    edges: dict[int, CausalEdge] = {}
    queue: deque[tuple[CausalEdge, int]] = deque()
    for edge in start:
        parents[edge.pk], edges[edge.pk] = None, edge
        queue.append((edge, 1))
    while queue:
        edge, depth = queue.popleft()
        if same_event(_effect(edge), goal):
            path = []
            at: int | None = edge.pk
            while at is not None:
                path.append(edges[at])
                at = parents[at]
            path.reverse()
            return [_edge_json(e, i + 1, path[i - 1].pk if i else None) for i, e in enumerate(path)]
        if depth >= max_depth:
            continue
        for nxt in linked_edges(view, _effect(edge), side="cause", exclude=set(edges), limit=max_visited):
            if len(edges) >= max_visited:
                break
            parents[nxt.pk], edges[nxt.pk] = edge.pk, nxt
            queue.append((nxt, depth + 1))
    return None


# --- what if ----------------------------------------------------------------------


def what_if(
    view: View, *, item_id: Any, origin: str, direction: str, max_depth: int, max_visited: int
) -> dict[str, Any]:
    """Hypothetically remove one fact: which reached spans lose every causal path from
    ``origin`` (collapsed) and which another path still supports (survived). Reads only."""
    item = visible_item(view, item_id)
    pruned_edges = list(view.edges().filter(item_id=item.pk).order_by("id"))
    pruned = frozenset(e.pk for e in pruned_edges)
    start = _origin_edges(view, direction, None, origin, max_visited)
    full = walk(view, start, direction=direction, max_depth=max_depth, max_visited=max_visited)
    without = walk(
        view, start, direction=direction, max_depth=max_depth, max_visited=max_visited, pruned=pruned
    )
    # Spans that depended, in the full graph, on a pruned edge: the pruned edges and
    # everything downstream of them (in the walk's direction).
    affected_walk = walk(
        view, [e for e in pruned_edges if e.pk in full.edges], direction=direction,
        max_depth=max_depth, max_visited=max_visited,
    )  # fmt: skip
    pick = _effect if direction == EFFECTS else _cause
    collapsed, survived, seen = [], [], set()
    for edge in affected_walk.edges.values():
        span = pick(edge)
        if span.text in seen:
            continue
        seen.add(span.text)
        supporters = [e for e in without.edges.values() if same_event(span, pick(e))]
        entry = {"span": span.text, "item_id": str(edge.item_id)}
        if supporters:
            survived.append({**entry, "supported_by": sorted({str(e.item_id) for e in supporters})})
        else:
            collapsed.append(entry)
    return {
        "item_id": str(item.pk),
        "origin": origin,
        "direction": direction,
        "pruned_edges": [_edge_json(e, 0, None) for e in pruned_edges],
        "collapsed": collapsed,
        "survived": survived,
    }


# --- discover ---------------------------------------------------------------------


@dataclass
class Found:
    item: MemoryItem
    hop: int
    seed_id: Any
    path: list[dict[str, Any]]
    kind: str  # seed | causal | entity
    score: float = 0.0


def discover(
    access: MemoryAccess,
    seeds_query: RecallQuery,
    view: View,
    *,
    hops: int,
    max_results: int,
    max_visited: int,
) -> list[Found]:
    """Seeds by hybrid recall, then ``hops`` rounds of expansion over causal links
    (continuations first) and shared entities (bridges), inside ``view``."""
    found: dict[Any, Found] = {}
    for hit in retrieve(access, seeds_query):
        found[hit.item.pk] = Found(hit.item, 0, hit.item.pk, [], "seed", hit.score)
    frontier = list(found)
    for hop in range(1, hops + 1):
        if not frontier or len(found) >= max_visited:
            break
        nxt: list[Any] = []
        room = max_visited - len(found)
        # Causal continuations: edges asserted by frontier items, linked both ways.
        for edge in view.edges().filter(item_id__in=frontier).order_by("id"):
            for side, span in (("cause", _effect(edge)), ("effect", _cause(edge))):
                for other in linked_edges(view, span, side=side, exclude={edge.pk}, limit=room):
                    if other.item_id in found or room <= 0:
                        continue
                    step = {
                        "from_item": str(edge.item_id),
                        "to_item": str(other.item_id),
                        "bridge": "causal",
                        "link": {"from": span.text, "to": other.cause if side == "cause" else other.effect},
                    }
                    parent = found[edge.item_id]
                    found[other.item_id] = Found(
                        None,
                        hop,
                        parent.seed_id,
                        [*parent.path, step],
                        "causal",  # type: ignore[arg-type]
                    )
                    nxt.append(other.item_id)
                    room -= 1
        # Entity bridges: another visible item mentioning an entity a frontier item mentions.
        if room > 0:
            frontier_mentions = Mention.objects.filter(tenant_id=access.tenant_id, item_id__in=frontier)
            bridges = (
                Mention.objects.filter(
                    tenant_id=access.tenant_id,
                    entity_id__in=Subquery(frontier_mentions.values("entity_id")),
                    item_id__in=Subquery(view.items().values("pk")),
                )
                .exclude(item_id__in=list(found))
                .select_related("entity")
                .order_by("entity_id", "item_id")
            )
            sources: dict[int, Any] = {}
            for m in frontier_mentions.order_by("item_id"):
                sources.setdefault(m.entity_id, m.item_id)
            for mention in bridges[: room * 4]:
                if mention.item_id in found or room <= 0:
                    continue
                parent = found[sources[mention.entity_id]]
                step = {
                    "from_item": str(parent.item.pk if parent.item else sources[mention.entity_id]),
                    "to_item": str(mention.item_id),
                    "bridge": "entity",
                    "entity": mention.entity.name,
                }
                found[mention.item_id] = Found(
                    None,
                    hop,
                    parent.seed_id,
                    [*parent.path, step],
                    "entity",  # type: ignore[arg-type]
                )
                nxt.append(mention.item_id)
                room -= 1
        # Rows for the newly found ids, in one query (visibility already holds).
        rows = {i.pk: i for i in view.items().filter(pk__in=nxt).defer("embedding", "search_vector")}
        for pk in nxt:
            found[pk].item = rows[pk]
        frontier = nxt
    # Seeds, then chain continuations before bridge discoveries, nearer hops first.
    order = {"seed": 0, "causal": 1, "entity": 2}
    ranked = sorted(found.values(), key=lambda f: (order[f.kind], f.hop, -f.score))
    return ranked[:max_results]


def relations_of(item_ids: list[Any]) -> dict[Any, list[dict[str, Any]]]:
    out: dict[Any, list[dict[str, Any]]] = {pk: [] for pk in item_ids}
    for edge in CausalEdge.objects.filter(item_id__in=item_ids).order_by("id"):
        out[edge.item_id].append({"cause": edge.cause, "effect": edge.effect, "cue": edge.cue})
    return out
