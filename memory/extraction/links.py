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
        cursor.execute("SET LOCAL hnsw.ef_search = %s", [min(1000, max(40, limit * 4))])
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


def link_edges(tenant_id: Any, edges: list[CausalEdge]) -> int:
    """Store the links of freshly created ``edges`` in both directions (their effect
    into other edges' causes, other edges' effects into their cause)."""
    if not edges:
        return 0
    pool = CausalEdge.objects.filter(tenant_id=tenant_id)
    links: dict[tuple[int, int], SpanLink] = {}
    for edge in edges:
        for match in matching_spans(
            pool, side="cause", terms=edge.effect_terms, vector=edge.effect_embedding, exclude=edge.pk
        ):
            links[(edge.pk, match.edge_id)] = SpanLink(
                tenant_id=tenant_id, source_id=edge.pk, target_id=match.edge_id, method=match.method,
                score=match.score,
            )  # fmt: skip
        for match in matching_spans(
            pool, side="effect", terms=edge.cause_terms, vector=edge.cause_embedding, exclude=edge.pk
        ):
            links[(match.edge_id, edge.pk)] = SpanLink(
                tenant_id=tenant_id, source_id=match.edge_id, target_id=edge.pk, method=match.method,
                score=match.score,
            )  # fmt: skip
    SpanLink.objects.bulk_create(links.values(), ignore_conflicts=True)
    return len(links)
