"""The graph-aware rank as it was before it was made faster (main at d9ac26e): every
step spelled out, one BM25 statement per term source, the entity pair set built whole,
the graph filled cell by cell; since then one change of what it returns, spelled out
the same way: the sources' cause spans are term sources too, and their best matches
join as causal neighbours (named causes). ``test_graphrank_speed`` compares the rank
with it: the faster code must return the same facts, in the same order, with the same
scores."""

# ruff: noqa
# mypy: ignore-errors
from __future__ import annotations

from dataclasses import replace
from itertools import pairwise
from typing import Any

import numpy as np
from django.db.models import FloatField
from django.db.models.expressions import RawSQL

from memory.embeddings import embed_query
from memory.models import CausalEdge, SpanLink
from memory.reasoning.chain import Pool, asserted_links, walk_back
from memory.retrieval.graphrank import (
    CAUSAL_WEIGHT,
    CHAIN_BONUS,
    CHAIN_POOL,
    GRAPH_WEIGHT,
    NAMED_CAUSES,
    NAMED_FLOOR,
    SEED_POOL,
    SESSION_SEEDS,
    SESSION_WEIGHT,
    SESSION_WINDOW,
    TERM_BRIDGES,
    TERM_FLOOR,
    TERM_SOURCES,
    TERM_WEIGHT,
    Ranked,
    _entity_neighbours,
    _order,
    _Reach,
    _restart,
    _session_neighbours,
    entity_synonyms,
    entity_weights,
    item_mentions,
    link_basis,
    relevance,
    session_sizes,
    support,
)
from memory.retrieval.hybrid import retrieve
from django.db import connection
from memory.retrieval.lexical import (
    B,
    K1,
    matches,
    query_languages,
    query_lexemes,
    selective,
    tenant_stats,
)
from memory.retrieval.specificity import session_weight


def links_among(tenant_id: Any, edge_ids: list[int]) -> list[tuple[int, int, float]]:
    """The links among the edges as the ORM read them (both ids as arrays on the table)."""
    return list(
        SpanLink.objects.filter(tenant_id=tenant_id, source_id__any=edge_ids, target_id__any=edge_ids)
        .order_by("source_id", "target_id")
        .values_list("source_id", "target_id", "score")
    )


def _causal_neighbours(
    tenant_id: Any, item_ids: list[Any], limit: int = 200
) -> list[tuple[Any, Any, str, str, float]]:
    """The links of the items' edges as the ORM read them: both edges joined to every
    link before the best ``limit`` of each direction were kept."""
    from memory.models import CausalEdge, SpanLink

    out = []
    edges = CausalEdge.objects.filter(tenant_id=tenant_id, item_id__in=list(item_ids))
    links = SpanLink.objects.filter(tenant_id=tenant_id)
    for source_item, target_item, effect, cause, score in (
        links.filter(source__in=edges)
        .values_list("source__item_id", "target__item_id", "source__effect", "target__cause", "score")
        .order_by("-score", "source_id", "target_id")[:limit]
    ):
        out.append((source_item, target_item, effect, cause, score))
    for source_item, target_item, effect, cause, score in (
        links.filter(target__in=edges)
        .values_list("source__item_id", "target__item_id", "source__effect", "target__cause", "score")
        .order_by("-score", "target_id", "source_id")[:limit]
    ):
        out.append((target_item, source_item, cause, effect, score))
    return [row for row in out if row[0] != row[1]]


# The BM25 statement as it was (every lexeme unnested, then filtered; candidates sorted).
def bm25_rows(
    base: Any, tenant_id: Any, text: str, limit: int, *, require_all: bool = False
) -> list[tuple[Any, float, Any, float]]:
    """(id, BM25 score, created_at, coverage) of the best ``limit`` items of ``base``
    (a MemoryItem queryset already holding visibility and filters), best first.

    Coverage is the score over the summed IDF of the query's terms in the item's
    language: about the share of the query's information the item holds (1 for
    every word once, in an item of average length), comparable across queries and
    languages, unlike the raw score."""
    terms = query_lexemes(text, query_languages(tenant_id, text))
    if not terms:
        return []
    stats = tenant_stats(tenant_id, terms)
    if require_all:
        # Every word, in the item's own language: a language some word is missing
        # from cannot match.
        incomplete = {lang for lang, lx in terms if stats.df.get((lang, lx), 0) == 0}
        matching, joiner = [t for t in terms if t[0] not in incomplete], " & "
    else:
        matching, joiner = selective(terms, stats), " | "
    if not matching:
        return []
    candidates = base.filter(matches(matching, joiner)).annotate(
        dl=RawSQL('length("memory_item"."search_vector")', [], output_field=FloatField())
    )
    msql, mparams = candidates.values_list(
        "id", "created_at", "text_language", "search_vector", "dl"
    ).query.sql_with_params()
    idf = [stats.idf(t) for t in terms]
    total: dict[str, float] = {}
    for (lang, _lx), weight in zip(terms, idf, strict=True):
        total[lang] = total.get(lang, 0.0) + weight
    # Each candidate's vector is unnested once, keeping only the query's lexemes, and
    # materialized before the join with the terms: the planner, which guesses a few
    # dozen candidates, otherwise joined candidates to terms first and unnested every
    # vector once per query term (at 10k items, 160 of a term bridge's 200 ms). Each
    # sum is taken in lexeme order: items of one wording score alike to the last bit,
    # so their tie is broken by recency, not by the order rows were grouped in.
    sql = (
        f"WITH m AS MATERIALIZED ({msql}), "  # noqa: S608 - compiled by Django, values are parameters
        "q AS (SELECT * FROM unnest(%s::text[], %s::text[], %s::float8[]) AS q(l, lexeme, idf)), "
        "u AS MATERIALIZED (SELECT m.id, m.created_at, m.text_language, m.dl, u.lexeme, "
        "coalesce(array_length(u.positions, 1), 1)::float8 AS tf "
        "FROM m CROSS JOIN LATERAL unnest(m.search_vector) AS u WHERE u.lexeme = ANY(%s::text[])) "
        "SELECT u.id, u.created_at, u.text_language, "
        "sum(q.idf * u.tf * %s / (u.tf + %s * (1 - %s + %s * u.dl / %s)) ORDER BY q.l, q.lexeme) AS score "
        "FROM u JOIN q ON q.l = u.text_language AND q.lexeme = u.lexeme "
        "GROUP BY u.id, u.created_at, u.text_language ORDER BY score DESC, u.created_at DESC, u.id LIMIT %s"
    )
    params = [
        *mparams, [t[0] for t in terms], [t[1] for t in terms], idf, sorted({t[1] for t in terms}),
        K1 + 1, K1, B, B, stats.avg_length, limit,
    ]  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [
            (pk, float(score), created, float(score) / (total.get(lang) or 1.0))
            for pk, created, lang, score in cursor.fetchall()
        ]


def _term_neighbours(view: Any, tenant_id: Any, items: list[Any]) -> list[tuple[Any, Any, float]]:
    out = []
    for item in items:
        for pk, _score, _created, coverage in bm25_rows(
            view.items(), tenant_id, item.content, TERM_BRIDGES + 1
        ):
            if pk != item.pk and coverage >= TERM_FLOOR:
                out.append((item.pk, pk, min(coverage, 1.0)))
    return out


def _named_causes(view: Any, tenant_id: Any, items: list[Any]) -> tuple[list, list]:
    """Term bridges from each item's cause spans (its edges' causes, in edge order, each
    once), and the named causes among them."""
    bridges, named = [], []
    for item in items:
        causes = []
        for edge in CausalEdge.objects.filter(tenant_id=tenant_id, item_id=item.pk).order_by("id"):
            if edge.cause not in causes:
                causes.append(edge.cause)
        for cause in causes:
            rows = [r for r in bm25_rows(view.items(), tenant_id, cause, TERM_BRIDGES + 1) if r[0] != item.pk]
            for pk, _score, _created, coverage in rows[:TERM_BRIDGES]:
                if coverage >= TERM_FLOOR:
                    bridges.append((item.pk, pk, min(coverage, 1.0)))
            for pk, _score, _created, coverage in rows[:NAMED_CAUSES]:
                if coverage >= NAMED_FLOOR:
                    named.append((item.pk, pk, min(coverage, 1.0)))
    return bridges, named


def reference_rank(
    access: Any, rq: RecallQuery, view: Any, *, hops: int, limit: int, max_visited: int = 400
) -> list[Ranked]:
    """The ``limit`` best facts for ``rq`` by relevance fused with graph score."""
    hits = retrieve(access, replace(rq, top_k=max(SEED_POOL, rq.top_k), mode="hybrid"))
    if not hits:
        return []
    tenant_id = access.tenant_id
    seeds = {h.item.pk: h for h in hits}
    reach: dict[Any, _Reach] = {pk: _Reach("seed", 0, pk, []) for pk in seeds}
    documents = tenant_stats(tenant_id, []).documents

    # Edges of the subgraph, filled while expanding.
    causal: list[tuple[Any, Any, float]] = []

    def reached(pk: Any, parent: Any, kind: str, hop: int, step: dict[str, Any]) -> None:
        if pk not in reach and len(reach) < max_visited:
            origin = reach[parent]
            reach[pk] = _Reach(kind, hop, origin.seed, [*origin.path, step])

    # The session around the best matches: the turns of one conversation (one
    # incident's notes) tell one matter, whose cause is often told turns earlier.
    widths = [SESSION_WINDOW if n < SESSION_SEEDS else 1 for n in range(len(hits))]
    for a, b, _turns in _session_neighbours([h.item for h in hits], widths):
        reached(b, a, "session", 1, {"from_item": str(a), "to_item": str(b), "bridge": "session"})
    frontier = list(seeds)
    weights: dict[int, tuple[str, float]] = {}
    terms: list[tuple[Any, Any, float]] = []
    sources = [h.item for h in hits[:TERM_SOURCES]]
    for hop in range(1, hops + 1):
        if not frontier or len(reach) >= max_visited:
            break
        before = set(reach)
        found_terms = _term_neighbours(view, tenant_id, sources)
        span_bridges, named = _named_causes(view, tenant_id, sources)
        found_terms += span_bridges
        terms += found_terms
        causal += named
        for a, b, coverage in sorted(found_terms, key=lambda t: -t[2]):
            step = {"from_item": str(a), "to_item": str(b), "bridge": "terms", "weight": round(coverage, 3)}
            reached(b, a, "terms", hop, step)
        for a, b, span_a, span_b, score in _causal_neighbours(tenant_id, frontier):
            causal.append((a, b, score))
            step = {
                "from_item": str(a),
                "to_item": str(b),
                "bridge": "causal",
                "link": {"from": span_a, "to": span_b},
            }
            reached(b, a, "causal", hop, step)
        mentions = item_mentions(tenant_id, frontier)
        new_entities = sorted({e for _, e in mentions} - set(weights))
        weights.update(entity_weights(tenant_id, new_entities, documents))
        source: dict[int, Any] = {}
        for item_id, entity_id in mentions:
            if entity_id in weights:
                source.setdefault(entity_id, item_id)
        # The most specific entities first: when room runs out, hubs-to-be lose.
        bridging = sorted(source, key=lambda e: -weights[e][1])
        for entity_id, item_id in _entity_neighbours(view, bridging, set()):
            step = {
                "from_item": str(source[entity_id]), "to_item": str(item_id), "bridge": "entity",
                "entity": weights[entity_id][0], "weight": round(weights[entity_id][1], 3),
            }  # fmt: skip
            reached(item_id, source[entity_id], "entity", hop, step)
        frontier = [pk for pk in reach if pk not in before]
        # The next round's term sources: the strongest term bridges just found.
        fresh = [b for a, b, _c in sorted(found_terms, key=lambda t: -t[2]) if b in frontier]
        rows_next = {i.pk: i for i in view.items().filter(pk__in=fresh).only("id", "content")}
        sources = [rows_next[pk] for pk in dict.fromkeys(fresh) if pk in rows_next][:TERM_SOURCES]

    # Rows (visibility holds for every one) with their similarity to the query.
    vector = "[" + ",".join(f"{x:.9g}" for x in embed_query(rq.query).tolist()) + "]"
    rows = {
        item.pk: item
        for item in view.items()
        .filter(pk__in=list(reach))
        .annotate(
            similarity=RawSQL(
                '1 - ("memory_item"."embedding" <=> %s::vector)', [vector], output_field=FloatField()
            )
        )
        .defer("embedding", "search_vector")
    }
    ids = [pk for pk in reach if pk in rows]
    index = {pk: i for i, pk in enumerate(ids)}
    all_mentions = item_mentions(tenant_id, ids)
    weights.update(entity_weights(tenant_id, sorted({e for _, e in all_mentions} - set(weights)), documents))
    entity_ids = sorted({e for _, e in all_mentions if e in weights})
    for e in entity_ids:
        index[e] = len(index)  # entity ids are ints, item ids UUIDs: one key space
    # Sessions as nodes: the facts one conversation (or one incident's notes) holds
    # together, joined through one node so a long session does not make a clique.
    sessions: dict[tuple[str, Any, str], list[Any]] = {}
    for pk in ids:
        if rows[pk].session_id:
            sessions.setdefault(("session", rows[pk].agent_id, rows[pk].session_id), []).append(pk)
    sessions = {key: members for key, members in sessions.items() if len(members) > 1}
    for key in sessions:
        index[key] = len(index)
    n = len(index)

    rel = np.zeros(n)
    sim = np.zeros(n)
    lex = np.zeros(n)
    for pk in ids:
        hit = seeds.get(pk)
        sim[index[pk]] = float(rows[pk].similarity or 0.0)
        lex[index[pk]] = float(hit.signals.get("lexical", 0.0)) if hit else 0.0
        rel[index[pk]] = relevance(sim[index[pk]], lex[index[pk]])

    adjacency = np.zeros((n, n))
    for item_id, entity_id in all_mentions:
        if entity_id in weights and item_id in index:
            w = weights[entity_id][1]
            adjacency[index[item_id], index[entity_id]] += w
            adjacency[index[entity_id], index[item_id]] += w
    mentioned_by: dict[int, set[Any]] = {}
    for item_id, entity_id in all_mentions:
        if entity_id in weights:
            mentioned_by.setdefault(entity_id, set()).add(item_id)
    synonym_pairs: set[tuple[Any, Any]] = set()
    for a, b, sim_ab in entity_synonyms(entity_ids):
        adjacency[index[a], index[b]] += sim_ab
        adjacency[index[b], index[a]] += sim_ab
        for x in mentioned_by.get(a, ()):
            for y in mentioned_by.get(b, ()):
                synonym_pairs |= {(x, y), (y, x)} if x != y else set()
    for a, b, score in causal:
        if a in index and b in index:
            adjacency[index[a], index[b]] += CAUSAL_WEIGHT * score
            adjacency[index[b], index[a]] += CAUSAL_WEIGHT * score
    for a, b, coverage in terms:
        if a in index and b in index:
            adjacency[index[a], index[b]] += TERM_WEIGHT * coverage
            adjacency[index[b], index[a]] += TERM_WEIGHT * coverage
    # A session node weighs like an entity: by its specificity across the tenant (a
    # handful of notes of one incident join more than a long conversation does).
    sizes = session_sizes([(agent, session) for _kind, agent, session in sessions])
    for key, members in sessions.items():
        w = SESSION_WEIGHT * session_weight(sizes.get(key[1:], len(members)), documents)
        for pk in members:
            adjacency[index[pk], index[key]] += w
            adjacency[index[key], index[pk]] += w
    restart = _restart(rel, [index[pk] for pk in seeds if pk in index])
    # What the other seeds say of a fact: the walk's mass at it minus the share that
    # started at the fact itself and came back (through its own entities, its session).
    graph_score = support(adjacency, restart)
    top = max(float(graph_score[: len(ids)].max()), 1e-12)

    ranked = []
    for pk in ids:
        i = index[pk]
        g = float(graph_score[i]) / top
        hit = seeds.get(pk)
        r = reach[pk]
        ranked.append(
            Ranked(
                item=rows[pk], score=float(rel[i]) + GRAPH_WEIGHT * g, relevance=float(rel[i]),
                similarity=float(sim[i]), lexical=float(lex[i]), graph=g, kind=r.kind, hop=r.hop,
                seed_id=r.seed,
                path=r.path, vector_rank=hit.vector_rank if hit else None,
                keyword_rank=hit.keyword_rank if hit else None,
            )
        )  # fmt: skip
    ranked.sort(key=_order)
    # The graph orders what follows the best direct match, never demotes it.
    if not ranked:
        return []
    # The first of the most relevant, by position (not list.index: quadratic).
    at = max(range(len(ranked)), key=lambda i: (ranked[i].relevance, -i))
    best = ranked.pop(at)
    # Then the causes behind it, walked back one best cause at a time (the chain a
    # why-question asks for), through the best-ranked facts of the neighbourhood.
    pool = [best.item.pk, *(r.item.pk for r in ranked[:CHAIN_POOL])]
    joined = {
        (x, y) for e in entity_ids for x in mentioned_by.get(e, ()) for y in mentioned_by.get(e, ()) if x != y
    }
    asserted = asserted_links(tenant_id, pool)
    steps = walk_back(best.item.pk, Pool(tenant_id, pool), asserted, joined | synonym_pairs)
    by_pk = {r.item.pk: r for r in ranked}
    sessions = {pk: (r.item.agent_id, r.item.session_id) for pk, r in by_pk.items() if r.item.session_id}
    if best.item.session_id:
        sessions[best.item.pk] = (best.item.agent_id, best.item.session_id)
    # Each cause gains in proportion to the strength of its link. Unless a stored span
    # link asserts it, a cause may not overtake the best direct match left: a walk
    # through shared subjects and hub phrases can step into a similar story told
    # elsewhere, and a fixed bonus then lifted its facts above good direct matches.
    ceiling = ranked[0].score if ranked else 0.0
    for position, ((pk, link), (effect, _next)) in enumerate(reversed(list(pairwise(steps))), start=1):
        found = by_pk[pk]
        basis = link_basis(pk, effect, asserted, joined, synonym_pairs, sessions)
        found.chain = {"position": position, "link": round(link, 4), "basis": basis}
        bonus = CHAIN_BONUS * min(link, 1.0)
        if basis != "asserted":
            bonus = max(0.0, min(bonus, ceiling - found.score - 1e-6))
        found.score += bonus
    ranked.sort(key=_order)
    return [best, *ranked][:limit]
