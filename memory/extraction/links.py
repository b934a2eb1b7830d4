"""Span links, stored when edges are extracted: edge A continues into edge B when A's
effect span and B's cause span name the same event.

Two spans name the same event when their normalized content lemmas overlap enough
(Jaccard >= ``TERM_OVERLAP``) or their embeddings reach
``FEDMEM_SPAN_LINK_THRESHOLD`` cosine similarity. Candidates come from the tenant's
edges only, through the GIN index over span terms and the HNSW index over span
embeddings; each new edge gets at most ``FANOUT`` links per direction (the most
similar), which bounds a hub span's degree.

Links are independent of visibility: traversal follows a link only to an edge whose
item the caller may read, so the same stored link serves every caller, ``as_of``
and supersession.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from pgvector.django import CosineDistance

from memory.models import CausalEdge, SpanLink

TERM_OVERLAP = 0.5
FANOUT = 16
# Rows the term-overlap query may verify per span (a very common term would
# otherwise make one write read a large share of the tenant's edges).
TERM_CANDIDATES = 200


@dataclass(frozen=True)
class Match:
    edge_id: int
    method: str
    score: float


def jaccard(a: Any, b: Any) -> float:
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a and b else 0.0


def _set_jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """:func:`jaccard` of two sets, without copying them (the same float: the same
    two counts divided)."""
    if not a or not b:
        return 0.0
    common = len(a & b)
    return common / (len(a) + len(b) - common)


def cosine(a: Any, b: Any) -> float:
    a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    denom = float(np.linalg.norm(a) * np.linalg.norm(b)) or 1.0
    return float(np.dot(a, b) / denom)


def span_match(terms_a: Any, vector_a: Any, terms_b: Any, vector_b: Any) -> Match | None:
    """The link two spans make, or None (edge id left 0 for the caller to fill)."""
    overlap = jaccard(terms_a, terms_b)
    if overlap >= TERM_OVERLAP:
        return Match(0, SpanLink.Method.TERMS, overlap)
    similarity = cosine(vector_a, vector_b)
    if similarity >= settings.FEDMEM_SPAN_LINK_THRESHOLD:
        return Match(0, SpanLink.Method.VECTOR, similarity)
    return None


def matching_spans(
    edges: Any, *, side: str, terms: list[str], vector: Any, exclude: int | None = None, limit: int = FANOUT
) -> list[Match]:
    """Edges of ``edges`` (a queryset) whose ``side`` span names the same event as
    (``terms``, ``vector``), best first: the nearest by HNSW plus those sharing terms.
    Similarity is computed by the database; no vector travels back."""
    terms_field, vector_field = f"{side}_terms", f"{side}_embedding"
    base = edges.exclude(pk=exclude) if exclude is not None else edges
    base = base.annotate(distance=CosineDistance(vector_field, vector))
    fields = ("pk", terms_field, "distance")
    with transaction.atomic(), connection.cursor() as cursor:
        # The HNSW scan yields at most ef_search rows before the tenant and
        # visibility filters apply: ask for enough.
        cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(min(1000, max(40, limit * 4)))])
        nearest = list(base.order_by("distance").values_list(*fields)[: limit * 2])
    sharing = []
    if terms:
        overlapping = base.filter(**{f"{terms_field}__overlap": terms}).order_by("-pk")
        sharing = list(overlapping.values_list(*fields)[:TERM_CANDIDATES])
    threshold = settings.FEDMEM_SPAN_LINK_THRESHOLD
    found: dict[int, Match] = {}
    for pk, other_terms, distance in [*nearest, *sharing]:
        if pk in found:
            continue
        overlap = jaccard(terms, other_terms)
        if overlap >= TERM_OVERLAP:
            found[pk] = Match(pk, SpanLink.Method.TERMS, overlap)
        elif distance is not None and 1 - distance >= threshold:
            found[pk] = Match(pk, SpanLink.Method.VECTOR, 1 - distance)
    return sorted(found.values(), key=lambda m: (-m.score, m.edge_id))[:limit]


# One statement finds the candidates of every new edge, both directions: per edge
# and side, the nearest spans by HNSW (LIMIT FANOUT * 2) and those sharing a term
# (LIMIT TERM_CANDIDATES), exactly the two queries matching_spans() runs, as LATERAL
# subqueries over the new edges. {mine}/{theirs} name the new edge's span and the
# candidate's span: effect -> cause ("out") and cause -> effect ("in"). The distance
# of a term-sharing candidate is computed after its LIMIT, not for every sharer.
# b.rank is the position of the new edge's item among the new edges' items: an edge
# does not see the new edges of a later item (%(later)s), as if the items had been
# linked one after the other; every other edge of the tenant it sees.
# A row carries ids and the distance only: the same few hundred candidates recur
# across a batch's edges (thousands of rows), so their terms come once each from a
# second statement instead of once per row.
_CANDIDATES = """
SELECT %(direction)s, e.id, n.id, n.distance
FROM unnest(%(edges)s::bigint[], %(ranks)s::int[]) AS b(id, rank)
JOIN memory_causal_edge e ON e.id = b.id CROSS JOIN LATERAL (
    SELECT o.id, o.{theirs}_embedding <=> e.{mine}_embedding AS distance
    FROM memory_causal_edge o WHERE o.tenant_id = %(tenant)s AND o.id <> e.id AND %(later)s
    ORDER BY o.{theirs}_embedding <=> e.{mine}_embedding LIMIT %(nearest)s
) n
UNION ALL
SELECT %(direction)s, e.id, s.id, o.{theirs}_embedding <=> e.{mine}_embedding
FROM unnest(%(edges)s::bigint[], %(ranks)s::int[]) AS b(id, rank)
JOIN memory_causal_edge e ON e.id = b.id CROSS JOIN LATERAL (
    SELECT o.id
    FROM memory_causal_edge o WHERE o.tenant_id = %(tenant)s AND o.id <> e.id
        AND o.{theirs}_terms && e.{mine}_terms AND %(later)s
    ORDER BY o.id DESC LIMIT %(sharing)s
) s JOIN memory_causal_edge o ON o.id = s.id
WHERE cardinality(e.{mine}_terms) > 0
"""
_LATER = (
    "NOT EXISTS (SELECT 1 FROM unnest(%(edges)s::bigint[], %(ranks)s::int[]) AS l(id, rank) "
    "WHERE l.id = o.id AND l.rank > b.rank)"
)
_LINK_SQL = " UNION ALL ".join(
    "("
    + _CANDIDATES.format(mine=mine, theirs=theirs)
    .replace("%(direction)s", repr(direction))
    .replace("%(later)s", _LATER)
    + ")"
    for direction, mine, theirs in (("out", "effect", "cause"), ("in", "cause", "effect"))
)
_TERMS_SQL = "SELECT id, cause_terms, effect_terms FROM memory_causal_edge WHERE id = ANY(%s::bigint[])"


def link_edges(tenant_id: Any, edges: list[CausalEdge]) -> int:
    """Store the links of freshly created ``edges`` in both directions (their effect
    into other edges' causes, other edges' effects into their cause): one statement
    for the candidates of all of them, the rule of :func:`matching_spans` applied
    to each edge and direction, one insert. ``edges`` may come from several items,
    in the order they were extracted: each item's edges are linked as if the items
    after it had no edges yet (what linking them one item at a time would store)."""
    if not edges:
        return 0
    by_id = {edge.pk: edge for edge in edges}
    ranks: dict[Any, int] = {}
    for edge in edges:
        ranks.setdefault(edge.item_id, len(ranks))
    threshold = settings.FEDMEM_SPAN_LINK_THRESHOLD
    found: dict[tuple[str, int], dict[int, Match]] = {}
    with transaction.atomic(), connection.cursor() as cursor:
        # As in matching_spans: the HNSW scan yields at most ef_search rows before
        # the tenant filter applies.
        cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(min(1000, max(40, FANOUT * 4)))])
        cursor.execute(
            _LINK_SQL,
            {
                "tenant": tenant_id,
                "edges": list(by_id),
                "ranks": [ranks[edge.item_id] for edge in by_id.values()],
                "nearest": FANOUT * 2,
                "sharing": TERM_CANDIDATES,
            },
        )
        rows = cursor.fetchall()
        # Both sides of every candidate, once each: "out" compares with the other
        # edge's cause, "in" with its effect.
        sides: dict[int, dict[str, frozenset[str]]] = {}
        if rows:
            cursor.execute(_TERMS_SQL, [sorted({row[2] for row in rows})])
            for pk, cause, effect in cursor.fetchall():
                sides[pk] = {"out": frozenset(cause), "in": frozenset(effect)}
    mine = {pk: {"out": frozenset(e.effect_terms), "in": frozenset(e.cause_terms)} for pk, e in by_id.items()}
    for direction, edge_id, other_id, distance in rows:
        matches = found.setdefault((direction, edge_id), {})
        if other_id in matches:
            continue
        overlap = _set_jaccard(mine[edge_id][direction], sides[other_id][direction])
        if overlap >= TERM_OVERLAP:
            matches[other_id] = Match(other_id, SpanLink.Method.TERMS, overlap)
        elif distance is not None and 1 - distance >= threshold:
            matches[other_id] = Match(other_id, SpanLink.Method.VECTOR, 1 - distance)
    links: dict[tuple[int, int], SpanLink] = {}
    for edge in edges:  # the order matching_spans() was called in, so the same link wins
        for direction in ("out", "in"):
            best = sorted(found.get((direction, edge.pk), {}).values(), key=lambda m: (-m.score, m.edge_id))
            for match in best[:FANOUT]:
                source, target = (edge.pk, match.edge_id) if direction == "out" else (match.edge_id, edge.pk)
                links[(source, target)] = SpanLink(
                    tenant_id=tenant_id, source_id=source, target_id=target, method=match.method,
                    score=match.score,
                )  # fmt: skip
    SpanLink.objects.bulk_create(links.values(), ignore_conflicts=True)
    return len(links)
