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
# Facts a chain may be walked through (the retrieved ones, on the question or not).
MAX_POOL = 30
# An implicit link must read at least this much better than its reverse, less the margin.
DIRECTION_MARGIN = 0.05


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


# Priors on an implicit link Y -> X (Y read as X's cause), added to the scorer's score:
# a cause is recorded no later than its effect, an episode is told in one session,
# and two facts joined by a specific entity (or a synonym span) are about one thing.
LATER_PENALTY = 0.1
SESSION_BONUS = 0.05
JOIN_BONUS = 0.05


SIDE_WEIGHT = 0.5
SUBJECT_PENALTY = 0.15
_SUBJECTS = {"nsubj", "nsubjpass", "csubj", "csubjpass", "expl"}


def _sides(doc: Any, text: str) -> tuple[str, str]:
    """(subject, the rest) of the fact's main clause; the whole text twice when the
    parse finds no subject (another language than the model's, a fragment)."""
    roots = [t for t in doc if t.dep_ == "ROOT"]
    if roots:
        subjects = [c for c in roots[0].children if c.dep_ in _SUBJECTS]
        if subjects:
            sub = list(subjects[0].subtree)
            start, end = sub[0].i, sub[-1].i + 1
            subject = doc[start:end].text
            rest = " ".join(t.text for t in doc if t.i < start or t.i >= end)
            if subject.strip() and rest.strip():
                return subject, rest
    return text, text


def assemble_chain(
    tenant_id: Any, facts: list[dict[str, Any]], pool: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The causal chain ending at the most relevant fact of ``facts``, root first (see
    module doc). The chain is walked backwards from that anchor, one cause at a time:
    at each step the fact of ``pool`` (default: ``facts``) that best reads as the
    current head's cause, along an asserted link where one exists, else an implicit
    one above ``IMPLICIT_FLOOR``. A cause need not be similar to the question (a root
    rarely is): it is on the question through the chain that ends at the anchor."""
    from memory.embeddings import embed_texts
    from memory.extraction.nlp import parse
    from memory.models import MemoryItem
    from memory.reasoning.implicit import Side, get_scorer, states_change
    from memory.retrieval.graphrank import entity_synonyms, entity_weights, item_mentions
    from memory.retrieval.lexical import tenant_stats

    kept_ids = [pk for pk in (as_uuid(f["id"]) for f in facts) if pk is not None]
    if not kept_ids:
        return []
    relevance_of = {as_uuid(f["id"]): _relevance(f) for f in [*(pool or []), *facts]}
    anchor = max(kept_ids, key=lambda pk: relevance_of.get(pk, 0.0))
    # The anchor's own asserted chain: a document chunk can state a whole chain itself.
    own = chain_among(tenant_id, [anchor])
    ids = list(dict.fromkeys([*kept_ids, *(pk for pk in (as_uuid(f["id"]) for f in pool or []) if pk)]))
    ids = ids[:MAX_POOL]
    if len(ids) < 2:
        return own if len(own) >= 2 else []
    rows = {
        pk: (content, vector, created, session)
        for pk, content, vector, created, session in MemoryItem.objects.filter(pk__in=ids).values_list(
            "pk", "content", "embedding", "created_at", "session_id"
        )
    }
    ids = [pk for pk in ids if pk in rows]
    if anchor not in rows or len(ids) < 2:
        return own if len(own) >= 2 else []
    edges = list(CausalEdge.objects.filter(tenant_id=tenant_id, item_id__in=ids).order_by("id"))
    by_item: dict[Any, list[CausalEdge]] = {}
    for edge in edges:
        by_item.setdefault(edge.item_id, []).append(edge)
    # Asserted: A -> B when an edge of A continues into an edge of B.
    asserted: dict[tuple[Any, Any], tuple[float, dict[str, Any]]] = {}
    edge_by_pk = {e.pk: e for e in edges}
    for source, target, score in SpanLink.objects.filter(
        tenant_id=tenant_id, source_id__in=edge_by_pk, target_id__in=edge_by_pk
    ).values_list("source_id", "target_id", "score"):
        a, b = edge_by_pk[source], edge_by_pk[target]
        if a.item_id != b.item_id:
            hop = {
                "cause": a.cause, "effect": a.effect, "cue": a.cue,
                "item_id": str(a.item_id), "edge_id": a.pk,
            }  # fmt: skip
            best = asserted.get((a.item_id, b.item_id))
            if best is None or best[0] < 1.0 + score:
                asserted[(a.item_id, b.item_id)] = (1.0 + score, hop)
    # Joined: facts sharing a specific entity (or a synonym span).
    mentions = item_mentions(tenant_id, ids)
    weights = entity_weights(
        tenant_id, sorted({e for _, e in mentions}), tenant_stats(tenant_id, []).documents
    )
    entity_items: dict[int, set[Any]] = {}
    for item_id, entity_id in mentions:
        if entity_id in weights:
            entity_items.setdefault(entity_id, set()).add(item_id)
    for a, b, _sim in entity_synonyms(sorted(entity_items)):
        joined_group = entity_items[a] | entity_items[b]
        entity_items[a] = entity_items[b] = joined_group
    joined = {(x, y) for group in entity_items.values() for x in group for y in group if x != y}
    docs = dict(zip(ids, parse([rows[pk][0] for pk in ids]), strict=True))
    sides = {
        pk: Side(
            rows[pk][0], rows[pk][1],
            by_item[pk][0].cause_embedding if by_item.get(pk) else None,
            states_change(docs[pk]),
        )
        for pk in ids
    }  # fmt: skip
    scorer = get_scorer()
    # What a fact is about (its subject: the cause side) and what it says happened (the
    # predicate: the effect side). Y explains X when what Y says happened is what X is
    # about ("... increased the power usage" -> "The higher power usage drained ..."); a
    # fact that merely shares X's subject ("The firmware update also added a menu") does not.
    spans = {pk: _sides(docs[pk], rows[pk][0]) for pk in ids}
    flat = [t for pk in ids for t in spans[pk]]
    vectors = embed_texts(flat)
    about = {pk: vectors[2 * n] for n, pk in enumerate(ids)}
    says = {pk: vectors[2 * n + 1] for n, pk in enumerate(ids)}

    def prior(cause: Any, effect: Any) -> float:
        (_c, _v, c_at, c_session), (_e, _w, e_at, e_session) = rows[cause], rows[effect]
        bonus = -LATER_PENALTY if c_at > e_at else 0.0
        if c_session and c_session == e_session:
            bonus += SESSION_BONUS
        if (cause, effect) in joined:
            bonus += JOIN_BONUS
        return bonus

    def implicit(cause: Any, effect: Any) -> float:
        explains = float(says[cause] @ about[effect])
        # Two facts about the same subject are parallel statements, not cause and effect.
        parallel = SUBJECT_PENALTY * max(0.0, float(about[cause] @ about[effect]))
        own = scorer.score(sides[cause], sides[effect])
        return SIDE_WEIGHT * explains + (1 - SIDE_WEIGHT) * own - parallel + prior(cause, effect)

    def best_cause(head: Any, taken: set[Any]) -> tuple[float, Any, dict[str, Any]] | None:
        found: tuple[float, Any, dict[str, Any]] | None = None
        for cand in ids:
            if cand in taken:
                continue
            if (cand, head) in asserted:
                score, hop = asserted[(cand, head)]
            else:
                score = implicit(cand, head)
                # The other direction reads better: cand is the effect, not the cause.
                if score < IMPLICIT_FLOOR or score < implicit(head, cand) - DIRECTION_MARGIN:
                    continue
                hop = {"cause": rows[cand][0], "effect": rows[head][0], "cue": f"implicit ({scorer.name})",
                       "item_id": str(cand), "edge_id": None}  # fmt: skip
            if found is None or score > found[0]:
                found = (score, cand, hop)
        return found

    path, hops = [anchor], []
    while len(path) < MAX_CHAIN_FACTS:
        step = best_cause(path[-1], set(path))
        if step is None:
            break
        path.append(step[1])
        hops.append({**step[2], "score": round(step[0], 3)})
    if not hops:
        return own if len(own) >= 2 else []
    # Root first; the anchor's own asserted edges (the last effect is what was asked) close it.
    return hops[::-1] + own


def answer_from(
    *, tenant_id: Any, question: str, facts: list[dict[str, Any]], synthesizer: Synthesizer
) -> tuple[Answer, list[dict[str, Any]], list[str]]:
    """``facts`` are {id, content[, score, why]} dicts, best first. Returns the answer,
    the chain and the entities it was given. Only facts on the question are used."""
    measured_facts = measured(tenant_id, question, facts)
    kept = on_question(measured_facts)
    # Facts from another engine (Cognee chunks) carry its ids: only builtin items have a graph here.
    ids = [pk for pk in (as_uuid(f["id"]) for f in kept) if pk is not None]
    chain = assemble_chain(tenant_id, kept, pool=measured_facts)
    # A cause the chain walked to is on the question through the chain: it is used and cited.
    in_chain = {h["item_id"] for h in chain}
    kept_ids = {str(f["id"]) for f in kept}
    kept += [f for f in measured_facts if str(f["id"]) in in_chain and str(f["id"]) not in kept_ids]
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
