"""From retrieved facts to a cited answer: the causal chain among the facts, then
the synthesizer. Reads only."""

from __future__ import annotations

from typing import Any

from django.db.models import F

from governance.selectors import as_uuid
from memory.models import CausalEdge, Mention, SpanLink
from memory.reasoning.synthesis import Answer, Context, Fact, Link, Synthesizer

MAX_EDGES = 60


def chain_among(tenant_id: Any, item_ids: list[Any]) -> list[dict[str, Any]]:
    """The longest chain of asserted causal links among the given facts, in causal
    order (root cause first). Ties go to the chain whose facts ranked best."""
    if not item_ids:
        return []
    rank = {str(pk): position for position, pk in enumerate(item_ids)}
    edges = list(
        CausalEdge.objects.filter(tenant_id=tenant_id, item_id__in=item_ids).order_by("id")[:MAX_EDGES]
    )
    if not edges:
        return []
    # Continuations are the span links stored at extraction (A's effect names the
    # same event as B's cause), read once for the whole set.
    by_pk = {edge.pk: edge for edge in edges}
    following: dict[int, list[CausalEdge]] = {edge.pk: [] for edge in edges}
    for source, target in (
        SpanLink.objects.filter(tenant_id=tenant_id, source_id__in=by_pk, target_id__in=by_pk)
        .exclude(source_id=F("target_id"))
        .order_by("source_id", "-score", "target_id")
        .values_list("source_id", "target_id")
    ):
        following[source].append(by_pk[target])
    best: dict[int, list[CausalEdge]] = {}

    def longest(edge: CausalEdge, path: frozenset[int]) -> list[CausalEdge]:
        # Memoised on the edge; the path guard cuts cycles (A causes B causes A).
        if edge.pk in best:
            return best[edge.pk]
        tails = [longest(nxt, path | {nxt.pk}) for nxt in following[edge.pk] if nxt.pk not in path]
        tail = max(tails, key=lambda chain: (len(chain), -_cost(chain, rank)), default=[])
        best[edge.pk] = [edge, *tail]
        return best[edge.pk]

    chains = [longest(edge, frozenset({edge.pk})) for edge in edges]
    chosen = max(chains, key=lambda chain: (len(chain), -_cost(chain, rank)))
    return [
        {"cause": e.cause, "effect": e.effect, "cue": e.cue, "item_id": str(e.item_id), "edge_id": e.pk}
        for e in chosen
    ]


def _cost(chain: list[CausalEdge], rank: dict[str, int]) -> int:
    return sum(rank.get(str(edge.item_id), len(rank)) for edge in chain)


def entities_among(tenant_id: Any, item_ids: list[Any], limit: int = 20) -> list[str]:
    """Entities the facts mention, the most shared first."""
    counts: dict[str, int] = {}
    for name in (
        Mention.objects.filter(tenant_id=tenant_id, item_id__in=item_ids)
        .select_related("entity")
        .values_list("entity__name", flat=True)
    ):
        counts[name] = counts.get(name, 0) + 1
    return [name for name, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))][:limit]


def answer_from(
    *, tenant_id: Any, question: str, facts: list[dict[str, Any]], synthesizer: Synthesizer
) -> tuple[Answer, list[dict[str, Any]], list[str]]:
    """``facts`` are {id, content} dicts, best first. Returns the answer, the chain
    and the entities it was given."""
    # Facts from another engine (Cognee chunks) carry its ids: only builtin items have a graph here.
    ids = [pk for pk in (as_uuid(f["id"]) for f in facts) if pk is not None]
    chain = chain_among(tenant_id, ids)
    entities = entities_among(tenant_id, ids)
    context = Context(
        question=question,
        facts=[Fact(str(f["id"]), f["content"]) for f in facts],
        chain=[Link(h["cause"], h["effect"], h["item_id"]) for h in chain],
        entities=entities,
    )
    result = synthesizer.synthesize(context)
    # An answer cites only facts it was given; a synthesizer citing nothing rests on all of them.
    allowed = context.fact_ids
    result.citations = [c for c in result.citations if c in allowed] or allowed
    return result, chain, entities
