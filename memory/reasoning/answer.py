"""From retrieved facts to a cited answer: the facts on the question, the causal
chain among them, then the synthesizer. Reads only.

* **Relevance floor**: a fact takes part only when its relevance to the question
  (dense + lexical, see :mod:`memory.retrieval.graphrank`) reaches
  ``RELEVANCE_FLOOR``, or the graph reached it strongly from facts that do
  (``GRAPH_FLOOR``): expanded facts about another matter are never stated.
* **Chain**: the *anchor* is the most relevant fact (for a why-question, the
  effect asked about). Its causes are walked backwards among the kept facts,
  along asserted links (stored span links between causal edges) and implicit
  ones (:mod:`memory.reasoning.implicit`: a fact sharing an entity with the
  anchor's side that reads as its cause), keeping the best-scored path; the chain
  is stated root first. A chain that does not end at a fact on the question is
  not a chain for this question and is not stated.
"""

from __future__ import annotations

import itertools
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


RELEVANCE_FLOOR = 0.3
GRAPH_FLOOR = 0.1
# An implicit link counts from this score (EmbeddingCausalScorer: cosine + change bonus).
IMPLICIT_FLOOR = 0.45
MAX_CHAIN_FACTS = 6
MAX_KEPT = 15


def on_question(facts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The facts that answer the question: relevance or graph support above the floors.
    A fact from another engine (no relevance on our scale) is kept: that engine's
    search is the only judgement of it there is."""
    kept = []
    for f in facts:
        why = f.get("why")
        if why is not None:
            relevance, graph_score = why["relevance"], why["graph"]
        elif f.get("relevance") is not None:
            relevance, graph_score = f["relevance"], 0.0
        else:
            kept.append(f)
            continue
        if relevance >= RELEVANCE_FLOOR or graph_score >= GRAPH_FLOOR:
            kept.append(f)
    return kept[:MAX_KEPT]


def measured(tenant_id: Any, question: str, facts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``facts`` with a ``relevance`` for each builtin fact that came without one (recall,
    knowledge search): the dense + lexical relevance discover ranks by, so one floor
    means the same on every read path (a recall or rerank score has another scale)."""
    from django.db.models import FloatField
    from django.db.models.expressions import RawSQL

    from memory.embeddings import embed_query
    from memory.models import MemoryItem
    from memory.retrieval.graphrank import relevance
    from memory.retrieval.lexical import bm25_rows

    todo = [pk for f in facts if f.get("why") is None and (pk := as_uuid(f["id"])) is not None]
    if not todo:
        return facts
    base = MemoryItem.objects.filter(tenant_id=tenant_id, pk__in=todo)
    vector = "[" + ",".join(f"{x:.9g}" for x in embed_query(question).tolist()) + "]"
    similarity = dict(
        base.annotate(
            similarity=RawSQL(
                '1 - ("memory_item"."embedding" <=> %s::vector)', [vector], output_field=FloatField()
            )
        ).values_list("pk", "similarity")
    )
    lexical = {pk: coverage for pk, _s, _c, coverage in bm25_rows(base, tenant_id, question, len(todo))}
    out = []
    for f in facts:
        pk = as_uuid(f["id"]) if f.get("why") is None else None
        if pk is not None and pk in similarity:
            f = {**f, "relevance": relevance(similarity[pk], min(lexical.get(pk, 0.0), 1.0))}
        out.append(f)
    return out


def _relevance(f: dict[str, Any]) -> float:
    if f.get("why"):
        return f["why"]["relevance"]
    return f.get("relevance") or 0.0


def assemble_chain(tenant_id: Any, facts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The causal chain ending at the most relevant fact, root first (see module doc):
    asserted links where they exist, implicit links where they do not."""
    from memory.extraction.nlp import parse
    from memory.models import MemoryItem
    from memory.reasoning.implicit import Side, get_scorer, states_change
    from memory.retrieval.graphrank import entity_synonyms, entity_weights, item_mentions
    from memory.retrieval.lexical import tenant_stats

    ids = [pk for pk in (as_uuid(f["id"]) for f in facts) if pk is not None]
    if not ids:
        return []
    anchor = max(ids, key=lambda pk: _relevance(next(f for f in facts if as_uuid(f["id"]) == pk)))
    # The anchor's own asserted chain: a document chunk can state a whole chain itself.
    own = chain_among(tenant_id, [anchor])
    if len(ids) < 2:
        return own if len(own) >= 2 else []
    texts = dict(MemoryItem.objects.filter(pk__in=ids).values_list("pk", "content"))
    vectors = dict(MemoryItem.objects.filter(pk__in=ids).values_list("pk", "embedding"))
    edges = list(CausalEdge.objects.filter(tenant_id=tenant_id, item_id__in=ids).order_by("id"))
    by_item: dict[Any, list[CausalEdge]] = {}
    for edge in edges:
        by_item.setdefault(edge.item_id, []).append(edge)
    # Asserted: A -> B when an edge of A continues into an edge of B.
    causes: dict[Any, dict[Any, tuple[float, dict[str, Any]]]] = {pk: {} for pk in ids}
    edge_item = {e.pk: e for e in edges}
    for source, target, score in SpanLink.objects.filter(
        tenant_id=tenant_id, source_id__in=edge_item, target_id__in=edge_item
    ).values_list("source_id", "target_id", "score"):
        a, b = edge_item[source], edge_item[target]
        if a.item_id != b.item_id:
            hop = {
                "cause": a.cause,
                "effect": a.effect,
                "cue": a.cue,
                "item_id": str(a.item_id),
                "edge_id": a.pk,
            }
            best = causes[b.item_id].get(a.item_id)
            if best is None or best[0] < 1.0 + score:
                causes[b.item_id][a.item_id] = (1.0 + score, hop)
    # Implicit: facts joined by a specific entity (or a synonym span) that read as cause -> effect.
    mentions = item_mentions(tenant_id, ids)
    weights = entity_weights(
        tenant_id, sorted({e for _, e in mentions}), tenant_stats(tenant_id, []).documents
    )
    entity_items: dict[int, set[Any]] = {}
    for item_id, entity_id in mentions:
        if entity_id in weights:
            entity_items.setdefault(entity_id, set()).add(item_id)
    for a, b, _sim in entity_synonyms(sorted(entity_items)):
        joined = entity_items[a] | entity_items[b]
        entity_items[a] = entity_items[b] = joined
    joined_pairs = {(x, y) for group in entity_items.values() for x in group for y in group if x != y}
    docs = dict(zip(ids, parse([texts[pk] for pk in ids]), strict=True))
    sides = {
        pk: Side(
            texts[pk], vectors[pk],
            by_item[pk][0].cause_embedding if by_item.get(pk) else None,
            states_change(docs[pk]),
        )
        for pk in ids
    }  # fmt: skip
    scorer = get_scorer()
    for a, b in joined_pairs:
        if a in causes[b]:
            continue
        score = scorer.score(sides[a], sides[b])
        if score >= IMPLICIT_FLOOR and score > scorer.score(sides[b], sides[a]) - 0.05:
            hop = {"cause": texts[a], "effect": texts[b], "cue": f"implicit ({scorer.name})",
                   "item_id": str(a), "edge_id": None}  # fmt: skip
            causes[b][a] = (score, hop)

    # The best-scored backward path from the anchor (small: at most MAX_KEPT facts).
    best: tuple[float, list[Any]] = (0.0, [anchor])

    def walk(at: Any, path: list[Any], total: float) -> None:
        nonlocal best
        if total > best[0]:
            best = (total, list(path))
        if len(path) >= MAX_CHAIN_FACTS:
            return
        for cause, (score, _hop) in causes[at].items():
            if cause not in path:
                walk(cause, [*path, cause], total + score)

    walk(anchor, [anchor], 0.0)
    path = best[1][::-1]  # root first
    if len(path) < 2:
        return own if len(own) >= 2 else []
    chain = []
    for cause, effect in itertools.pairwise(path):
        chain.append(causes[effect][cause][1])
    # The anchor's own asserted edges (the last effect is what was asked about) close the chain.
    return chain + own


def answer_from(
    *, tenant_id: Any, question: str, facts: list[dict[str, Any]], synthesizer: Synthesizer
) -> tuple[Answer, list[dict[str, Any]], list[str]]:
    """``facts`` are {id, content[, score, why]} dicts, best first. Returns the answer,
    the chain and the entities it was given. Only facts on the question are used."""
    kept = on_question(measured(tenant_id, question, facts))
    # Facts from another engine (Cognee chunks) carry its ids: only builtin items have a graph here.
    ids = [pk for pk in (as_uuid(f["id"]) for f in kept) if pk is not None]
    chain = assemble_chain(tenant_id, kept)
    entities = entities_among(tenant_id, ids)
    context = Context(
        question=question,
        facts=[Fact(str(f["id"]), f["content"]) for f in kept],
        chain=[Link(h["cause"], h["effect"], h["item_id"]) for h in chain],
        entities=entities,
    )
    result = synthesizer.synthesize(context)
    # An answer cites only facts it was given; a synthesizer citing nothing rests on all of them.
    allowed = context.fact_ids
    result.citations = [c for c in result.citations if c in allowed] or allowed
    if chain:
        result.detail["root_item_id"] = chain[0]["item_id"]
    result.detail["facts_on_question"] = len(kept)
    result.detail["fact_ids"] = allowed
    result.detail["facts_considered"] = len(facts)
    return result, chain, entities
