"""Traversal of the memory graph, always inside what the caller may read.

Every step is a SQL query whose item side is :func:`memory.enforcement.visible_q`
(tenant, scopes, classification, ``as_of`` validity, retention), joined on the
item row of each edge or mention reached: entities and edges are only ever reached
through items the caller can see, so a same-named entity in another tenant (a
different row) is never a bridge, and nothing here writes. Work is bounded by
``max_depth``/``hops`` and ``max_visited``.

Causal continuations follow the span links stored at extraction time
(:mod:`memory.extraction.links`): a walk issues one set-based query per hop for
the whole frontier, whatever its width.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar

from django.db import connection
from django.db.models import BooleanField, FloatField, Q
from django.db.models.expressions import RawSQL

from core.errors import MemoryNotFound
from core.statements import compiled
from governance.selectors import as_uuid
from memory.embeddings import embed_texts
from memory.enforcement import MemoryAccess
from memory.extraction.links import FANOUT, matching_spans, span_match
from memory.extraction.pipeline import span_terms
from memory.models import CausalEdge, MemoryItem, Mention, SpanLink
from memory.retrieval.hybrid import QUERY_VECTOR, RecallQuery, retrieve
from memory.retrieval.language import detect
from memory.retrieval.vectors import CHOSEN_ROWS

EFFECTS, CAUSES = "effects", "causes"
LIGHT = ("id", "item_id", "cause", "effect", "cue")


def prefixed(q: Q, prefix: str) -> Q:
    """``q`` (a condition on MemoryItem) as a condition on a relation reaching it
    through ``prefix`` (for example ``"item__"``): a plain join, not a subquery."""
    out = Q()
    out.connector, out.negated = q.connector, q.negated
    out.children = [
        prefixed(child, prefix) if isinstance(child, Q) else (prefix + child[0], child[1])
        for child in q.children
    ]
    return out


@dataclass(frozen=True, slots=True)
class Candidate:
    """What a rank reads of a candidate fact before it knows which it returns."""

    COLUMNS: ClassVar[tuple[str, ...]] = ("id", "agent_id", "session_id")

    pk: Any
    agent_id: Any
    session_id: str
    similarity: float | None


@dataclass(frozen=True)
class View:
    """What a traversal may touch: the visibility condition of the items."""

    access: MemoryAccess
    q: Q

    def items(self) -> Any:
        return MemoryItem.objects.filter(self.q)

    def edges(self) -> Any:
        return CausalEdge.objects.filter(prefixed(self.q, "item__"), tenant_id=self.access.tenant_id)

    def edge_rows(self, qs: Any) -> list[Edge]:
        return [Edge(*row) for row in qs.values_list(*LIGHT)]

    def statement(self, purpose: tuple[Any, ...]) -> tuple[str, list[Any]]:
        """The statement of :data:`STATEMENTS` for ``purpose`` over this view, compiled
        once per shape of the visibility condition (:mod:`core.statements`); its
        markers (:data:`SENTINEL`, :data:`IDS`) left for the caller to bind."""
        condition, build = STATEMENTS[purpose]
        return compiled(purpose, condition(self), build, markers=(SENTINEL, IDS))

    def items_of(
        self,
        item_ids: Sequence[Any],
        *,
        only: tuple[str, ...] = (),
        defer: tuple[str, ...] = (),
        similar_to: str | None = None,
    ) -> list[MemoryItem]:
        """The visible items of ``item_ids``, with ``only`` (or all but ``defer``) of
        their fields and, given a query vector literal, their ``similarity`` to it:
        one statement per shape of the visibility condition, the ids one array."""
        if not item_ids:
            return []
        return list(MemoryItem.objects.raw(*self._items_sql(item_ids, only, defer, similar_to)))

    def _items_sql(
        self, item_ids: Sequence[Any], only: tuple[str, ...], defer: tuple[str, ...], similar_to: str | None
    ) -> tuple[str, list[Any]]:
        """The items statement (compiled once per shape) and its bound parameters."""
        sql, params = compiled(
            ("items", only, defer, similar_to is not None),
            self.q & Q(pk__any=list(item_ids)),
            partial(_items_statement, only, defer, similar_to is not None),
            markers=(QUERY_VECTOR,),
        )
        return sql, [similar_to if p is QUERY_VECTOR else p for p in params]

    def candidates(self, item_ids: Sequence[Any], similar_to: str) -> list[Candidate]:
        """The visible items of ``item_ids`` as :class:`Candidate` rows, with their
        similarity to the query vector literal ``similar_to``: the statement of
        ``items_of(item_ids, only=Candidate.COLUMNS, similar_to=...)``, read as tuples. A
        rank reads a few hundred per call; a model per row cost more than the statement."""
        if not item_ids:
            return []
        with connection.cursor() as cursor:
            cursor.execute(*self._items_sql(item_ids, Candidate.COLUMNS, (), similar_to))
            columns = [c.name for c in cursor.description]
            at = [columns.index(name) for name in (*Candidate.COLUMNS, "similarity")]
            return [Candidate(*(row[i] for i in at)) for row in cursor.fetchall()]

    def edges_of(self, item_ids: list[Any]) -> list[Edge]:
        """The visible edges the items of ``item_ids`` assert, by id."""
        if not item_ids:
            return []
        sql, params = self.statement(("edges of items",))
        bound = [[as_uuid(i) or i for i in item_ids] if p is IDS else p for p in params]
        with connection.cursor() as cursor:
            cursor.execute(sql, bound)
            return [Edge(*row) for row in cursor.fetchall()]

    def links(
        self,
        edge_ids: list[int],
        direction: str,
        per_edge: int | list[int],
        exclude: frozenset[int] = frozenset(),
    ) -> list[tuple[int, Edge, float]]:
        """(from edge, visible next edge, score) for the best ``per_edge`` stored links
        leaving each of ``edge_ids`` in ``direction`` (one limit for all, or one per
        edge): one query for a whole frontier, whose size is bounded by the frontier,
        not by the graph."""
        limits = per_edge if isinstance(per_edge, list) else [per_edge] * len(edge_ids)
        if not edge_ids or max(limits, default=0) <= 0:
            return []
        sql, params = lateral_statement(*self.statement(("links", direction)), per_row_limit=True)
        bound = [sorted(exclude) if p is IDS else p for p in params]
        rows = run_lateral(sql, bound, edge_ids, limits)
        out = [(src, Edge(*edge), score) for src, score, *edge in rows]
        out.sort(key=lambda r: (r[0], -r[2], r[1].pk))
        return out

    def mentions(
        self, entity_ids: list[int], *, limit: int, exclude: Sequence[Any] = (), names: bool = False
    ) -> list[tuple[Any, ...]]:
        """(entity, visible item[, entity name]) for the first ``limit`` items by id
        mentioning each entity of ``entity_ids``, items of ``exclude`` left out: one
        LATERAL statement for all the entities."""
        if not entity_ids:
            return []
        sql, params = lateral_statement(*self.statement(("mentions", names)), per_row_limit=True)
        bound = [[as_uuid(i) or i for i in exclude] if p is IDS else p for p in params]
        return run_lateral(sql, bound, sorted(entity_ids), [limit] * len(entity_ids))


def _items_statement(only: tuple[str, ...], defer: tuple[str, ...], similarity: bool, cond: Q) -> Any:
    qs = MemoryItem.objects.filter(cond)
    if similarity:
        qs = qs.annotate(
            similarity=RawSQL(  # noqa: S611 - fixed fragments, the vector is a parameter
                f'1 - ("memory_item"."embedding" <=> %s::vector) {CHOSEN_ROWS}',
                [QUERY_VECTOR],
                output_field=FloatField(),
            )
        )
    return qs.only(*only) if only else qs.defer(*defer)


def _edges_statement(cond: Q) -> Any:
    return (
        CausalEdge.objects.filter(cond)
        .filter(_in_array(f'"{CausalEdge._meta.db_table}"."item_id"', "uuid"))
        .order_by("id")
        .values_list(*LIGHT)
    )


def _links_statement(direction: str, cond: Q) -> Any:
    # The per-edge query, written by the ORM (visibility joined on the far edge's
    # item), then run once per frontier edge as a LATERAL subquery: with the (edge,
    # -score) index each reads its best links in order and stops at its row's limit,
    # so a hub edge costs no more than any other. The edges left out and the limits
    # are parameters, so one compiled statement serves every depth of every walk whose
    # visibility has the same shape.
    near, far = ("source", "target") if direction == EFFECTS else ("target", "source")
    return (
        SpanLink.objects.filter(cond)
        .filter(**{f"{near}_id": SENTINEL})
        .filter(_in_array(f'"{SpanLink._meta.db_table}"."{far}_id"', "bigint", negated=True))
        .order_by("-score", f"{far}_id")
        .values_list(
            "score", f"{far}_id", f"{far}__item_id", f"{far}__cause", f"{far}__effect", f"{far}__cue"
        )[:PER_ROW]
    )


def _mentions_statement(names: bool, cond: Q) -> Any:
    columns = ("item_id", "entity__name") if names else ("item_id",)
    return (
        Mention.objects.filter(cond)
        .filter(entity_id=SENTINEL)
        .filter(_in_array(f'"{Mention._meta.db_table}"."item_id"', "uuid", negated=True))
        .order_by("item_id")
        .values_list(*columns)[:PER_ROW]
    )


def _far_q(view: View, direction: str) -> Q:
    far = "target" if direction == EFFECTS else "source"
    return prefixed(view.q, f"{far}__item__") & Q(tenant_id=view.access.tenant_id)


# Every statement a view compiles once per shape of its visibility: purpose -> (the
# condition it is compiled on, the statement over that condition).
STATEMENTS: dict[tuple[Any, ...], tuple[Callable[[View], Q], Callable[[Q], Any]]] = {
    ("edges of items",): (
        lambda view: prefixed(view.q, "item__") & Q(tenant_id=view.access.tenant_id),
        _edges_statement,
    ),
    **{("links", d): (partial(_far_q, direction=d), partial(_links_statement, d)) for d in (EFFECTS, CAUSES)},
    # No tenant condition on the mention itself: the entity ids are the tenant's and
    # the item's visibility includes the tenant; without it the planner reads the
    # (entity, item) index in order and stops at the limit.
    **{
        ("mentions", names): (lambda view: prefixed(view.q, "item__"), partial(_mentions_statement, names))
        for names in (False, True)
    },
}


def _in_array(column: str, cast: str, *, negated: bool = False) -> RawSQL:
    """``column`` among the elements of an array parameter (:data:`IDS` until bound).
    ``column`` and ``cast`` are fixed names chosen by the callers."""
    condition = f"{column} = ANY(%s::{cast}[])"
    return RawSQL(  # noqa: S611 - fixed fragments; the array is a bound parameter
        f"NOT ({condition})" if negated else condition, [IDS], output_field=BooleanField()
    )


# Stands for the frontier row in a per-row query (never an id).
SENTINEL = -7_000_000_000_001


# Stands for an array of ids in a compiled statement, until a caller binds it.
IDS = object()


# Stands for the per-row limit of a per-row query (never a real limit).
PER_ROW = 987_654_321


def lateral_statement(sql: str, params: list[Any], *, per_row_limit: bool = False) -> tuple[str, list[Any]]:
    """A compiled query filtered on ``SENTINEL`` as a statement that runs it once per
    id of an array parameter, its first, as a LATERAL subquery. ``per_row_limit``:
    the query is sliced ``[:PER_ROW]``, and each id's limit is the matching element
    of a second array parameter."""
    params = list(params)
    at = params.index(SENTINEL)
    parts = sql.split("%s")
    sql = "%s".join(parts[: at + 1]) + "frontier.id" + "%s".join(parts[at + 1 :])
    del params[at]
    frontier = "unnest(%s::bigint[]) AS frontier(id)"
    if per_row_limit:
        marker = f"LIMIT {PER_ROW}"
        if sql.count(marker) != 1:
            raise ValueError("a per-row limit needs the inner query sliced [:PER_ROW]")
        sql = sql.replace(marker, "LIMIT frontier.lim")
        frontier = "unnest(%s::bigint[], %s::int[]) AS frontier(id, lim)"
    return (
        f"SELECT frontier.id, x.* FROM {frontier} "  # noqa: S608 - ORM-built
        f"CROSS JOIN LATERAL ({sql}) AS x",
        params,
    )


def run_lateral(
    sql: str, params: list[Any], ids: list[Any], limits: list[int] | None = None
) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        arrays = [list(ids)] if limits is None else [list(ids), list(limits)]
        cursor.execute(sql, [*arrays, *params])
        return cursor.fetchall()


@dataclass(frozen=True, slots=True)
class Edge:
    """What traversal reads of a causal edge (no vectors)."""

    pk: int
    item_id: Any
    cause: str
    effect: str
    cue: str


@dataclass(frozen=True)
class Span:
    text: str
    terms: list[str]
    vector: Any


def span_of(text: str) -> Span:
    return Span(text, span_terms([text], [detect(text)])[0], embed_texts([text])[0])


def same_event(a: Span, b: Span) -> bool:
    return span_match(a.terms, a.vector, b.terms, b.vector) is not None


def linked_edges(view: View, span: Span, *, side: str, limit: int) -> list[Edge]:
    """Visible edges whose ``side`` ("cause" or "effect") names the same event as ``span``."""
    matches = matching_spans(view.edges(), side=side, terms=span.terms, vector=span.vector, limit=limit)
    rows = {e.pk: e for e in view.edge_rows(view.edges().filter(pk__any=[m.edge_id for m in matches]))}
    return [rows[m.edge_id] for m in matches if m.edge_id in rows]


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
        raise MemoryNotFound("Memory not found.")
    return item


# --- trace ------------------------------------------------------------------------


@dataclass
class Walk:
    """One bounded breadth-first walk over causal edges."""

    hops: list[dict[str, Any]] = field(default_factory=list)
    edges: dict[int, Edge] = field(default_factory=dict)
    parents: dict[int, int | None] = field(default_factory=dict)
    terminals: list[Edge] = field(default_factory=list)
    truncated: bool = False


def _origin_edges(view: View, direction: str, item_id: Any, content: str | None, limit: int) -> list[Any]:
    if item_id is not None:
        # The item's edges carry its visibility; an item with none must still be one
        # the caller may read (else 404, as for an item that does not exist).
        pk = as_uuid(item_id)
        edges = view.edges_of([pk]) if pk else []
        if not edges and not (pk and view.items().filter(pk=pk).exists()):
            raise MemoryNotFound("Memory not found.")
        return edges
    assert content is not None
    # effects of X: edges whose cause is X; causes of X: edges whose effect is X.
    side = "cause" if direction == EFFECTS else "effect"
    return linked_edges(view, span_of(content), side=side, limit=limit)


def walk(
    view: View,
    start: list[Edge],
    *,
    direction: str,
    max_depth: int,
    max_visited: int,
    pruned: frozenset[int] = frozenset(),
    goal: frozenset[int] = frozenset(),
) -> Walk:
    """Breadth-first, one links query per depth. Stops early when an edge of ``goal``
    is reached (then ``hops`` ends with it)."""
    result = Walk()
    level: list[Edge] = []
    for edge in start:
        if edge.pk not in pruned and edge.pk not in result.edges and len(result.edges) < max_visited:
            result.edges[edge.pk], result.parents[edge.pk] = edge, None
            level.append(edge)
    depth = 1
    while level:
        room = max_visited - len(result.edges)
        # One link per edge tells a terminal apart even when nothing more may be visited.
        per_edge = max(1, min(FANOUT, room + 1))
        nexts = _Following(view, direction, per_edge, pruned)
        # Read in full only the first edges, whose links can fill the room; one link
        # for each of the rest, which settles them unless the room is still open when
        # their turn comes (then they are read in full, as the walk would have).
        nexts.read(level, room=room)
        upcoming: list[Edge] = []
        for at, edge in enumerate(level):
            result.hops.append(_edge_json(edge, depth, result.parents[edge.pk]))
            if edge.pk in goal:
                return result
            following = nexts.of(edge.pk)
            left = max_visited - len(result.edges)
            # Read short, an edge is decided by its first link when the depth ends here
            # or the room is full and that link is new: the walk stops there
            # (truncated), as it would after a full read.
            decided = bool(following) and (
                depth >= max_depth or (left <= 0 and following[0].pk not in result.edges)
            )
            if not decided and not nexts.settled(edge.pk):
                nexts.read(level[at:], room=left)
                following = nexts.of(edge.pk)
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
                result.edges[nxt.pk], result.parents[nxt.pk] = nxt, edge.pk
                upcoming.append(nxt)
        level = upcoming
        depth += 1
    return result


class _Following:
    """The next edges of one walk level's edges, ``per_edge`` of them each, read in as
    few rows as the walk can use: an edge read short (its first link only) is
    *settled* when that link decides it, else read again in full."""

    def __init__(self, view: View, direction: str, per_edge: int, pruned: frozenset[int]) -> None:
        self.view, self.direction, self.per_edge, self.pruned = view, direction, per_edge, pruned
        self.nexts: dict[int, list[Edge]] = {}
        self.complete: set[int] = set()
        self.batch = 0

    def read(self, edges: list[Edge], *, room: int) -> None:
        """Read in full the first of ``edges`` not read in full yet, as many as could
        fill ``room`` (at least twice as many as the time before: links to edges
        visited already leave the room open longer than expected), the rest not read
        yet short."""
        self.batch = full = max(-(-(room + 1) // self.per_edge), 2 * self.batch)
        open_ = [e.pk for e in edges if e.pk not in self.complete]
        todo = [(pk, self.per_edge) for pk in open_[:full]]
        todo += [(pk, 1) for pk in open_[full:] if pk not in self.nexts]
        if not todo:
            return
        raw: dict[int, int] = defaultdict(int)
        read: dict[int, list[Edge]] = {pk: [] for pk, _limit in todo}
        for src, nxt, _score in self.view.links(
            [pk for pk, _ in todo], self.direction, [limit for _, limit in todo], self.pruned
        ):
            raw[src] += 1
            if nxt.pk != src and nxt.pk not in self.pruned:
                read[src].append(nxt)
        for pk, limit in todo:
            self.nexts[pk] = read[pk]
            # Fewer rows than asked: that was every link there is.
            if limit == self.per_edge or raw[pk] < limit:
                self.complete.add(pk)

    def of(self, pk: int) -> list[Edge]:
        return self.nexts.get(pk, [])

    def settled(self, pk: int) -> bool:
        """Read in full (or every link there is): what the walk would have seen."""
        return pk in self.complete


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
    goal = frozenset(e.pk for e in linked_edges(view, span_of(target), side="effect", limit=max_visited))
    if not goal:
        return None
    start = linked_edges(view, span_of(source), side="cause", limit=max_visited)
    result = walk(view, start, direction=EFFECTS, max_depth=max_depth, max_visited=max_visited, goal=goal)
    if not result.hops or result.hops[-1]["edge_id"] not in goal:
        return None
    path = []
    at: int | None = result.hops[-1]["edge_id"]
    while at is not None:
        path.append(result.edges[at])
        at = result.parents[at]
    path.reverse()
    return [_edge_json(e, i + 1, path[i - 1].pk if i else None) for i, e in enumerate(path)]


# --- what if ----------------------------------------------------------------------


def what_if(
    view: View, *, item_id: Any, origin: str, direction: str, max_depth: int, max_visited: int
) -> dict[str, Any]:
    """Hypothetically remove one fact: which reached spans lose every causal path from
    ``origin`` (collapsed) and which another path still supports (survived). Reads only."""
    item = visible_item(view, item_id)
    pruned_edges = view.edges_of([item.pk])
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
    side = "effect" if direction == EFFECTS else "cause"
    ids = {*affected_walk.edges, *without.edges}
    spans = {
        pk: Span(text, terms, vector)
        for pk, text, terms, vector in CausalEdge.objects.filter(pk__any=list(ids)).values_list(
            "pk", side, f"{side}_terms", f"{side}_embedding"
        )
    }
    collapsed, survived, seen = [], [], set()
    for edge in affected_walk.edges.values():
        span = spans[edge.pk]
        if span.text in seen:
            continue
        seen.add(span.text)
        supporters = [e for e in without.edges.values() if same_event(span, spans[e.pk])]
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


# Entity bridges read at most this many mentions per frontier entity: a hub entity
# ("the service") named by thousands of facts bridges to its first ones only.
BRIDGES_PER_ENTITY = 20


def _causal_step(found: dict[Any, Found], view: View, frontier: list[Any], room: int, hop: int) -> list[Any]:
    """Items whose edges continue (either way) an edge a frontier item asserts."""
    edges = view.edges_of(frontier)
    out_links: dict[int, list[Edge]] = defaultdict(list)
    in_links: dict[int, list[Edge]] = defaultdict(list)
    per_edge = min(FANOUT, room)
    # Edges in slices: once the slices read so far offer ``room`` new items, the
    # rest of a wide frontier is not read at all.
    offered: set[Any] = set()
    width = max(16, room)
    for start in range(0, len(edges), width):
        ids = [e.pk for e in edges[start : start + width]]
        for src, other, _score in view.links(ids, EFFECTS, per_edge):
            out_links[src].append(other)
            offered.add(other.item_id)
        for src, other, _score in view.links(ids, CAUSES, per_edge):
            in_links[src].append(other)
            offered.add(other.item_id)
        if len(offered - set(found)) >= room:
            break
    nxt: list[Any] = []
    for edge in edges:
        for span, others, side in ((edge.effect, out_links, "cause"), (edge.cause, in_links, "effect")):
            for other in others.get(edge.pk, []):
                if other.item_id in found or room <= 0:
                    continue
                step = {
                    "from_item": str(edge.item_id),
                    "to_item": str(other.item_id),
                    "bridge": "causal",
                    "link": {"from": span, "to": other.cause if side == "cause" else other.effect},
                }
                parent = found[edge.item_id]
                found[other.item_id] = Found(None, hop, parent.seed_id, [*parent.path, step], "causal")  # type: ignore[arg-type]
                nxt.append(other.item_id)
                room -= 1
    return nxt


def _entity_step(
    found: dict[Any, Found], view: View, access: MemoryAccess, frontier: list[Any], room: int, hop: int
) -> list[Any]:
    """Other visible items mentioning an entity a frontier item mentions."""
    sources: dict[int, Any] = {}
    for entity_id, item_id in (
        Mention.objects.filter(tenant_id=access.tenant_id, item_id__any=list(frontier))
        .order_by("item_id", "entity_id")
        .values_list("entity_id", "item_id")
    ):
        sources.setdefault(entity_id, item_id)
    if not sources:
        return []
    rows = view.mentions(sorted(sources), limit=BRIDGES_PER_ENTITY, exclude=frontier, names=True)
    nxt: list[Any] = []
    for entity_id, item_id, name in sorted(rows, key=lambda r: (r[0], str(r[1]))):
        if item_id in found or room <= 0:
            continue
        parent = found[sources[entity_id]]
        step = {
            "from_item": str(sources[entity_id]),
            "to_item": str(item_id),
            "bridge": "entity",
            "entity": name,
        }
        found[item_id] = Found(None, hop, parent.seed_id, [*parent.path, step], "entity")  # type: ignore[arg-type]
        nxt.append(item_id)
        room -= 1
    return nxt


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
        nxt = _causal_step(found, view, frontier, max_visited - len(found), hop)
        room = max_visited - len(found)
        if room > 0:
            nxt += _entity_step(found, view, access, frontier, room, hop)
        # Rows for the newly found ids, in one query (visibility already holds).
        rows = {i.pk: i for i in view.items_of(nxt, defer=("embedding", "search_vector"))}
        for pk in nxt:
            found[pk].item = rows[pk]
        frontier = nxt
    # Seeds, then chain continuations before bridge discoveries, nearer hops first.
    order = {"seed": 0, "causal": 1, "entity": 2}
    ranked = sorted(found.values(), key=lambda f: (order[f.kind], f.hop, -f.score))
    return ranked[:max_results]


def relations_of(item_ids: list[Any]) -> dict[Any, list[dict[str, Any]]]:
    out: dict[Any, list[dict[str, Any]]] = {pk: [] for pk in item_ids}
    for edge in CausalEdge.objects.filter(item_id__any=list(item_ids)).order_by("id").only(*LIGHT):
        out[edge.item_id].append({"cause": edge.cause, "effect": edge.effect, "cue": edge.cue})
    return out
