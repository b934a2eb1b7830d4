"""From retrieved facts to a cited answer: the facts on the question, the causal
chain among them, then the synthesizer. Reads only.

* **Relevance floor**: a fact takes part only when its relevance to the question
  (dense + lexical, see :mod:`memory.retrieval.graphrank`) reaches
  ``RELEVANCE_FLOOR``, or the graph reached it strongly from facts that do
  (``GRAPH_FLOOR``): expanded facts about another matter are never stated.
* **Chain**: the *anchor* is the fact the question asks about (for a why-question,
  the effect): among the ``ANCHORS`` most relevant facts on the question, the one
  whose walked chain says most of the question's word stems, the more relevant on
  a tie ("Why does high sodium intake reduce kidney filtration?" names the root and
  the effect; the fact most like it may be another effect of the root). Its causes
  are walked back one best cause at a time
  (:mod:`memory.reasoning.chain`: asserted span links and implicit links scored by
  predicate / subject linkage), through every retrieved fact, those below the
  floor too, as long as each step links, under the walk's strict rules (thematic
  progression, siblings, direction); the chain is stated root first. It ends at
  the anchor, a fact on the question, by construction. With no supported chain a
  why-question is answered so, citing the facts used.
"""

from __future__ import annotations

import itertools
from typing import Any

from django.db.models import F

from governance.selectors import as_uuid
from memory.models import CausalEdge, MemoryItem, Mention, SpanLink
from memory.reasoning.synthesis import Answer, Context, Fact, Link, Synthesizer

MAX_EDGES = 60


def chain_among(tenant_id: Any, item_ids: list[Any]) -> list[dict[str, Any]]:
    """The longest chain of asserted causal links among the given facts, in causal
    order (root cause first). Ties go to the chain whose facts ranked best."""
    if not item_ids:
        return []
    rank = {str(pk): position for position, pk in enumerate(item_ids)}
    edges = list(
        CausalEdge.objects.filter(tenant_id=tenant_id, item_id__any=list(item_ids)).order_by("id")[:MAX_EDGES]
    )
    if not edges:
        return []
    # Continuations are the span links stored at extraction (A's effect names the
    # same event as B's cause), read once for the whole set.
    by_pk = {edge.pk: edge for edge in edges}
    following: dict[int, list[CausalEdge]] = {edge.pk: [] for edge in edges}
    for source, target in (
        SpanLink.objects.filter(tenant_id=tenant_id, source_id__any=list(by_pk), target_id__any=list(by_pk))
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
        {
            "cause": e.cause,
            "effect": e.effect,
            "cue": e.cue,
            "item_id": str(e.item_id),
            "effect_item_id": str(e.item_id),
            "edge_id": e.pk,
        }
        for e in chosen
    ]


def _cost(chain: list[CausalEdge], rank: dict[str, int]) -> int:
    return sum(rank.get(str(edge.item_id), len(rank)) for edge in chain)


def entities_among(tenant_id: Any, item_ids: list[Any], limit: int = 20) -> list[str]:
    """Entities the facts mention, the most shared first."""
    counts: dict[str, int] = {}
    for name in (
        Mention.objects.filter(tenant_id=tenant_id, item_id__any=list(item_ids))
        .select_related("entity")
        .values_list("entity__name", flat=True)
    ):
        counts[name] = counts.get(name, 0) + 1
    return [name for name, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))][:limit]


RELEVANCE_FLOOR = 0.3
GRAPH_FLOOR = 0.1
MAX_KEPT = 15
ANCHORS = 3


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
    from django.db.models import FloatField, Q
    from django.db.models.expressions import RawSQL

    from memory.embeddings import embed_query
    from memory.models import MemoryItem
    from memory.retrieval.graphrank import relevance
    from memory.retrieval.lexical import bm25_rows
    from memory.retrieval.vectors import CHOSEN_ROWS

    todo = [pk for f in facts if f.get("why") is None and (pk := as_uuid(f["id"])) is not None]
    if not todo:
        return facts
    condition = Q(tenant_id=tenant_id, pk__any=todo)
    base = MemoryItem.objects.filter(condition)
    vector = "[" + ",".join(f"{x:.9g}" for x in embed_query(question).tolist()) + "]"
    similarity = dict(
        base.annotate(
            similarity=RawSQL(  # noqa: S611 - fixed fragments, the vector is a parameter
                f'1 - ("memory_item"."embedding" <=> %s::vector) {CHOSEN_ROWS}',
                [vector],
                output_field=FloatField(),
            )
        ).values_list("pk", "similarity")
    )
    lexical = {pk: coverage for pk, _s, _c, coverage in bm25_rows(condition, tenant_id, question, len(todo))}
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


def joined_by_entities(tenant_id: Any, ids: list[Any]) -> set[tuple[Any, Any]]:
    """Pairs of the facts that share a specific entity or a synonym span (both ways)."""
    from memory.retrieval.graphrank import Names, entity_synonyms, entity_weights, item_mentions_named
    from memory.retrieval.lexical import tenant_stats

    names: Names = {}
    mentions = item_mentions_named(tenant_id, ids, names)
    weights = entity_weights(
        tenant_id, sorted({e for _, e in mentions}), tenant_stats(tenant_id, []).documents, names
    )
    entity_items: dict[int, set[Any]] = {}
    for item_id, entity_id in mentions:
        if entity_id in weights:
            entity_items.setdefault(entity_id, set()).add(item_id)
    for a, b, _sim in entity_synonyms(sorted(entity_items), names):
        joined = entity_items[a] | entity_items[b]
        entity_items[a] = entity_items[b] = joined
    return {(x, y) for group in entity_items.values() for x in group for y in group if x != y}


def assemble_chain(
    tenant_id: Any, facts: list[dict[str, Any]], pool: list[dict[str, Any]] | None = None, question: str = ""
) -> list[dict[str, Any]]:
    """The causal chain ending at the anchor among ``facts`` (the most relevant ones,
    weighed against ``question``), root first (see the module doc). The walk back may
    step through ``pool`` (every fact retrieved, the ones below the relevance floor
    too) as long as each step links."""
    from memory.extraction.clauses import WORD as _WORD
    from memory.extraction.clauses import stems
    from memory.reasoning.chain import Pool, asserted_links, walk_back
    from memory.reasoning.implicit import get_scorer

    ids = [pk for pk in (as_uuid(f["id"]) for f in facts) if pk is not None]
    if not ids:
        return []
    relevance = {as_uuid(f["id"]): _relevance(f) for f in facts}
    by_relevance = sorted(ids, key=lambda pk: -relevance[pk])
    anchor = by_relevance[0]
    walk_ids = list(dict.fromkeys([*ids, *(pk for pk in (as_uuid(f["id"]) for f in pool or []) if pk)]))
    if len(walk_ids) < 2:
        own = chain_among(tenant_id, [anchor])
        return own if len(own) >= 2 else []
    pool_ = Pool(tenant_id, walk_ids, per_language=True)
    asserted = asserted_links(tenant_id, walk_ids, edges=pool_.all_edges)
    joined = joined_by_entities(tenant_id, walk_ids)
    asked = stems(_WORD.findall(question))
    best: tuple[tuple[int, int], Any, list[Any]] = ((-1, 0), anchor, [])
    for rank, candidate in enumerate(by_relevance[:ANCHORS]):
        # A fact below the floor came in on graph support alone: it is no anchor.
        if rank and relevance[candidate] < RELEVANCE_FLOOR:
            break
        path = [pk for pk, _score in walk_back(candidate, pool_, asserted, joined, strict=True)]
        said = frozenset().union(*(pool_.words[pk] for pk in path if pk in pool_.words))
        key = (len(asked & said), -rank)
        if key > best[0]:
            best = (key, candidate, path)
    _key, anchor, path = best
    # The anchor's own asserted chain: a document chunk can state a whole chain itself.
    own = chain_among(tenant_id, [anchor])
    if len(path) < 2:
        return own if len(own) >= 2 else []
    texts = dict(MemoryItem.objects.filter(pk__any=list(path)).values_list("pk", "content"))
    scorer = get_scorer().name
    chain = []
    for cause, effect in itertools.pairwise(path):
        # Each hop names the fact stating its cause (cited) and the one stating its effect.
        items = {"item_id": str(cause), "effect_item_id": str(effect)}
        if (cause, effect) in asserted:
            edge = asserted[(cause, effect)][1]
            chain.append(
                {"cause": edge.cause, "effect": edge.effect, "cue": edge.cue, **items, "edge_id": edge.pk}
            )
        else:
            implicit = {"cause": texts[cause], "effect": texts[effect], "cue": f"implicit ({scorer})"}
            chain.append({**implicit, **items, "edge_id": None})
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
    chain = assemble_chain(tenant_id, kept, facts, question)
    entities = entities_among(tenant_id, ids)
    # The facts the stated chain rests on, root first, ending at the fact asked about:
    # the walk may step through retrieved facts below the relevance floor, which the
    # answer then states and cites too.
    on_chain = list(dict.fromkeys(pk for hop in chain for pk in (hop["item_id"], hop["effect_item_id"])))
    content = {str(f["id"]): f["content"] for f in facts}
    steps = [Fact(pk, content[pk]) for pk in on_chain if pk in content]
    used = [Fact(str(f["id"]), f["content"]) for f in kept]
    stated = {f.id for f in used}
    context = Context(
        question=question,
        facts=used + [f for f in steps if f.id not in stated],
        chain=[Link(h["cause"], h["effect"], h["item_id"]) for h in chain],
        entities=entities,
        steps=steps,
    )
    result = synthesizer.synthesize(context)
    # An answer cites only facts it was given; a synthesizer citing nothing rests on all of them.
    allowed = context.fact_ids
    result.citations = [c for c in result.citations if c in allowed] or allowed
    if chain:
        result.detail["root_item_id"] = chain[0]["item_id"]
        result.detail["chain_item_ids"] = on_chain
    result.detail["facts_on_question"] = len(kept)
    result.detail["fact_ids"] = allowed
    result.detail["facts_considered"] = len(facts)
    return result, chain, entities
