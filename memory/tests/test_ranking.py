"""The ranking pieces on small data: BM25 over the stored tsvector, entity
specificity, personalized PageRank, the implicit causal scorer, the graph-aware
core (a fact two bridges away overtakes a merely similar one) and the answer's
relevance floor."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from django.db.models import Q

from memory.enforcement import Keys, read_scopes, visible_q
from memory.models import MemoryItem
from memory.reasoning import graph
from memory.reasoning.implicit import EmbeddingCausalScorer, Side, states_change
from memory.retrieval import graphrank, lexical
from memory.retrieval.hybrid import RecallQuery, retrieve
from memory.retrieval.specificity import bridge_weight, never_bridges, session_weight
from memory.tests.graph_helpers import fact


def _keyword(access, query, top_k=5):
    keys = Keys(narrow=True)
    rq = RecallQuery(query=query, scopes=("agent",), keys=keys, top_k=top_k, mode="keyword")
    return [hit.item.content for hit in retrieve(access, rq)]


# --- BM25 -------------------------------------------------------------------------------


def test_bm25_matches_any_word_and_weighs_rare_words_more(access):
    from memory.tests.conftest import remember

    for n in range(6):
        remember(access, f"The shipment number {n} left the warehouse on time.", scope="agent")
    remember(access, "The forklift damaged a loading bay at the warehouse.", scope="agent")
    remember(access, "A new forklift was ordered for the depot.", scope="agent")
    # Every word required would match nothing: no item says all of them.
    ranked = _keyword(access, "why was the forklift at the warehouse broken")
    assert ranked[0] == "The forklift damaged a loading bay at the warehouse."
    # The rare word decides: both forklift facts before any plain warehouse fact.
    assert set(ranked[:2]) == {
        "The forklift damaged a loading bay at the warehouse.",
        "A new forklift was ordered for the depot.",
    }


def test_bm25_statistics_follow_new_words(access):
    from memory.tests.conftest import remember

    remember(access, "The payroll run was delayed.", scope="agent")
    assert _keyword(access, "zanzibar") == []
    remember(access, "The Zanzibar office opened.", scope="agent")
    # A word no item held a moment ago is found as soon as an item holds it.
    assert _keyword(access, "zanzibar") == ["The Zanzibar office opened."]


def test_selective_lexemes_keep_the_rarest_within_the_budget():
    # Terms are (language, lexeme) pairs since full text is stored per item language.
    common, rare, mid, none = (("english", w) for w in ("common", "rare", "mid", "none"))
    stats = lexical.Stats(documents=1000, avg_length=8.0, df={common: 900, rare: 3, mid: 50, none: 0})
    assert lexical.selective([common, rare, mid, none], stats, budget=100) == [rare, mid]
    # At least one lexeme, however common.
    assert lexical.selective([common], stats, budget=10) == [common]
    assert stats.idf(rare) > stats.idf(mid) > stats.idf(common) > 0


def test_a_coverage_floor_leaves_out_the_terms_that_cannot_reach_it():
    common, mid, rare = (("english", w) for w in ("common", "mid", "rare"))
    stats = lexical.Stats(documents=1000, avg_length=8.0, df={common: 900, mid: 50, rare: 3})
    terms = [common, mid, rare]
    total = sum(stats.idf(t) for t in terms)
    bound = (lexical.K1 + 1) * stats.idf(common)
    # The common word alone cannot carry an item to a floor above its bound: it selects
    # no candidates; below the bound it must stay (an item holding only it may pass).
    assert lexical.selective(terms, stats, floor=1.01 * bound / total) == [rare, mid]
    assert lexical.selective(terms, stats, floor=0.99 * bound / total) == [rare, mid, common]
    # Nothing to choose when even every present word together falls short (coverage
    # stays below K1 + 1 however often a word recurs).
    assert lexical.selective([common], stats, floor=lexical.K1 + 1.01) == []
    assert lexical.selective([common], stats, floor=lexical.K1 + 0.99) == [common]
    # Without a floor, the budget rule alone, as before.
    assert lexical.selective(terms, stats) == [rare, mid, common]


def test_bm25_rows_under_a_floor_are_the_rows_above_it(access):
    from memory.retrieval.lexical import bm25_rows, bm25_rows_many
    from memory.tests.conftest import remember

    texts = [f"The {w} report was filed by the team." for w in ("audit", "budget", "safety", "hiring")]
    texts += ["The audit of the safety budget was filed late.", "The team met on Monday."]
    for text in texts:
        remember(access, text, scope="agent")
    base = Q(tenant_id=access.tenant_id)
    floor = 0.3
    for text in texts:
        full = bm25_rows(base, access.tenant_id, text, 50)
        [pruned] = bm25_rows_many(base, access.tenant_id, [text], 50, floor=floor)
        assert [r for r in pruned if r[3] >= floor] == [r for r in full if r[3] >= floor], text
        # The common words ("team", "filed", "report") selected no one: fewer rows read.
        assert len(pruned) < len(full), text
    # Scored together, each text keeps its own candidates: not the items another text's
    # rarer words brought in, which hold only this text's common words.
    together = bm25_rows_many(base, access.tenant_id, texts, 50, floor=floor)
    assert together == [bm25_rows_many(base, access.tenant_id, [text], 50, floor=floor)[0] for text in texts]


def test_a_postings_cap_reads_a_few_visible_items_per_word(access, world):
    from memory.enforcement import system_access
    from memory.retrieval.lexical import bm25_rows_many
    from memory.tests.conftest import remember

    # Another agent's private notes come first in storage order: were visibility applied
    # after the cap, they would take its places and nothing visible would be read.
    sibling = system_access(world.sibling)
    for n in range(5):
        remember(sibling, f"The compressor on rack {n} was replaced.", scope="agent")
    mine = [
        remember(access, f"The compressor in hall {n} hums loudly.", scope="agent").item.pk for n in range(6)
    ]
    view = graph.View(access, visible_q(access, read_scopes(access, None)))
    query = "compressor"
    [full] = bm25_rows_many(view.q, access.tenant_id, [query], 50)
    assert sorted(r[0] for r in full) == sorted(mine)
    # A cap at or above every word's frequency reads what no cap reads.
    assert bm25_rows_many(view.q, access.tenant_id, [query], 50, postings=6) == [full]
    [capped] = bm25_rows_many(view.q, access.tenant_id, [query], 50, postings=2)
    assert len(capped) == 2 and {r[0] for r in capped} <= set(mine)
    # Each capped row is scored as without the cap.
    scores = {r[0]: r[1:] for r in full}
    assert all(scores[r[0]] == r[1:] for r in capped)


def test_recall_reads_at_most_recall_postings_items_per_word(access, monkeypatch):
    from memory.retrieval import hybrid
    from memory.retrieval.lexical import bm25_rows
    from memory.tests.conftest import remember

    for n in range(6):
        remember(access, f"The compressor in hall {n} hums loudly.", scope="agent")
    base = Q(tenant_id=access.tenant_id)
    full = bm25_rows(base, access.tenant_id, "compressor", 50)
    assert len(full) == 6
    # At or above the word's frequency the cap changes nothing, scores and order included.
    assert bm25_rows(base, access.tenant_id, "compressor", 50, postings=6) == full
    capped = bm25_rows(base, access.tenant_id, "compressor", 50, postings=2)
    scores = {r[0]: r[1:] for r in full}
    assert len(capped) == 2 and all(scores[r[0]] == r[1:] for r in capped)
    # recall's lexical list is read with the cap.
    assert len(_keyword(access, "compressor", top_k=10)) == 6
    monkeypatch.setattr(hybrid, "RECALL_POSTINGS", 2)
    assert len(_keyword(access, "compressor", top_k=10)) == 2


def test_entity_mention_counts_are_read_once_per_ttl(access, monkeypatch):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory.models import Entity

    for text in ("The Leeds depot closed early.", "The Leeds depot reopened on Monday."):
        fact(access, text)
    ids = list(Entity.objects.filter(tenant_id=access.tenant_id).values_list("pk", flat=True))
    graphrank.entity_counts.clear()

    def counted(captured):
        return sum("memory_mention" in q["sql"] for q in captured.captured_queries)

    with CaptureQueriesContext(connection) as captured:
        first = graphrank.entity_weights(access.tenant_id, ids, 100)
    assert first and counted(captured) == 1
    cached = {
        key[1]: count
        for key, (_at, count, _epoch) in graphrank.entity_counts.counts.items()
        if key[0] == access.tenant_id
    }
    assert max(cached.values()) == 2  # "Leeds depot", in both facts
    with CaptureQueriesContext(connection) as captured:
        assert graphrank.entity_weights(access.tenant_id, ids, 100) == first
    assert counted(captured) == 0
    # Past the TTL (or in another process) the counts are read again.
    monkeypatch.setattr(lexical, "STATS_TTL", -1.0)
    with CaptureQueriesContext(connection) as captured:
        assert graphrank.entity_weights(access.tenant_id, ids, 100) == first
    assert counted(captured) == 1


def test_entity_names_read_with_the_mentions_weigh_as_names_read_apart(access):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    items = [
        fact(access, text)
        for text in ("The Leeds depot closed early.", "Alice moved the Leeds depot's orders to York.")
    ]
    ids = [i.pk for i in items]
    names: dict = {}
    mentions = graphrank.item_mentions_named(access.tenant_id, ids, names)
    assert mentions and mentions == graphrank.item_mentions(access.tenant_id, ids)
    entities = sorted({e for _i, e in mentions})
    assert set(names) == set(entities)
    apart: dict = {}
    expected = graphrank.entity_weights(access.tenant_id, entities, 100, apart)
    assert expected and apart == names  # read apart, the same names
    with CaptureQueriesContext(connection) as captured:
        assert graphrank.entity_weights(access.tenant_id, entities, 100, dict(names)) == expected
        assert graphrank.entity_synonyms(entities, names) == graphrank.entity_synonyms(entities)
    # The first two calls read no entity names; the last one (no names given) does.
    assert sum('"memory_entity"."name"' in q["sql"] for q in captured.captured_queries) == 1
    # An entity the mentions did not name is read and added.
    partial = {e: names[e] for e in entities[1:]}
    assert graphrank.entity_weights(access.tenant_id, entities, 100, partial) == expected
    assert partial == names


def test_hybrid_score_fuses_cosine_and_bm25_coverage(access):
    from memory.tests.conftest import remember

    remember(access, "Checkout fails with error ERR-4471 when the coupon field is left empty.", scope="agent")
    rq = RecallQuery(query="ERR-4471 checkout", scopes=("agent",), keys=Keys(narrow=True), top_k=1)
    [hit] = retrieve(access, rq)
    assert hit.vector_rank == 1 and hit.keyword_rank == 1
    assert 0 < hit.signals["lexical"] <= 1
    assert hit.score == pytest.approx(0.6 * hit.similarity + 0.4 * hit.signals["lexical"], rel=1e-4)


# --- specificity ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["march", "may", "last week", "it", "they", "2024", "85 c", "the system", "people", "monday"]
)
def test_dates_numbers_pronouns_and_generic_nouns_never_bridge(name):
    assert never_bridges(name)


def test_specific_entities_bridge_and_hubs_do_not():
    assert not never_bridges("leeds depot") and not never_bridges("cpu temperature")
    assert bridge_weight("leeds depot", "NOUN_CHUNK", df=2, documents=1000) > bridge_weight(
        "leeds depot", "NOUN_CHUNK", df=20, documents=1000
    )
    assert bridge_weight("service", "NOUN_CHUNK", df=300, documents=1000) == 0
    assert bridge_weight("acme", "DATE", df=1, documents=1000) == 0


# --- personalized PageRank --------------------------------------------------------------


def test_pagerank_reaches_two_bridges_away_and_prefers_the_stronger_bridge():
    # items 0 (seed), 1, 2, 3; entities 4 (0-1), 5 (1-2, weight 2), 6 (1-3, weight 0.5)
    a = np.zeros((7, 7))
    for item, entity, w in [(0, 4, 1), (1, 4, 1), (1, 5, 2), (2, 5, 2), (1, 6, 0.5), (3, 6, 0.5)]:
        a[item, entity] = a[entity, item] = w
    restart = np.zeros(7)
    restart[0] = 1
    scores = graphrank.personalized_pagerank(a, restart)
    assert scores.sum() == pytest.approx(1.0)
    assert scores[0] > scores[1] > scores[2] > scores[3] > 0


def test_support_counts_what_the_other_seeds_send_not_a_fact_echoing_itself():
    # seeds 0 (strong) and 1 (weak) share entity 3; seed 2 only has its own entity 4.
    a = np.zeros((5, 5))
    for item, entity in [(0, 3), (1, 3), (2, 4)]:
        a[item, entity] = a[entity, item] = 1
    restart = np.array([0.6, 0.1, 0.3, 0.0, 0.0])
    support = graphrank.support(a, restart)
    plain = graphrank.personalized_pagerank(a, restart) - (1 - graphrank.DAMPING) * restart
    assert plain[2] > 0  # the walk's mass at 2 is its own restart flowing back
    assert support[2] == pytest.approx(0.0, abs=1e-9)  # nobody else vouches for it
    assert support[1] > support[0] > 0  # 1 hears from the strong seed, 0 only from the weak one


# --- implicit causal scorer -------------------------------------------------------------


def test_embedding_scorer_reads_the_effects_cause_side_and_favours_a_change():
    scorer = EmbeddingCausalScorer()
    cause_side = np.array([1.0, 0.0, 0.0])
    effect = Side(
        "When the temperature rises, the system throttles.", np.array([0.0, 1.0, 0.0]), cause_side, False
    )
    rising = Side("The temperature exceeded 85 C.", np.array([0.9, 0.1, 0.0]), None, True)
    watched = Side("The temperature was watched by a sensor.", np.array([0.9, 0.1, 0.0]), None, False)
    assert scorer.score(rising, effect) > scorer.score(watched, effect) > 0.5


def test_states_change_reads_the_parse():
    from memory.extraction.nlp import parse

    changed, described = parse(
        ["A forklift damaged two of the bays.", "The package was insured by the carrier."]
    )
    assert states_change(changed) and not states_change(described)


# --- the graph-aware core ---------------------------------------------------------------

CHAIN = [
    ("s1", "A forklift damaged the Leeds depot loading dock on Monday."),
    ("s2", "With the Leeds depot loading dock closed, trailers queued at the gate for a day."),
    ("s3", "The trailers queued at the gate delayed the retailer's northern orders."),
]
SIMILAR = [
    ("s4", "The retailer's southern orders are packed in Bristol."),
    ("s5", "The retailer counts its orders every Monday."),
    ("s6", "Northern weather rarely delays retailers."),
]


@pytest.fixture
def depot(access):
    chain = [fact(access, text, session_id=session) for session, text in CHAIN]
    for session, text in SIMILAR:
        fact(access, text, session_id=session)
    return chain


def _rank(access, query, top_k=3, hops=2):
    scopes = read_scopes(access, None)
    rq = RecallQuery(query=query, scopes=scopes, keys=Keys(narrow=True), top_k=top_k)
    view = graph.View(access, visible_q(access, scopes))
    return graphrank.rank(access, rq, view, hops=hops, limit=top_k)


def test_graph_moves_a_bridged_fact_into_the_top_and_says_why(access, depot):
    query = "Why were the retailer's northern orders delayed?"
    plain = [
        h.item.pk
        for h in retrieve(
            access, RecallQuery(query=query, scopes=("agent",), keys=Keys(narrow=True), top_k=3)
        )
    ]
    ranked = _rank(access, query, top_k=3)
    ids = [r.item.pk for r in ranked]
    middle = depot[1]  # shares no word with the question but "trailers queued at the gate" with its answer
    assert middle.pk not in plain  # vector + BM25 alone rank similar distractors above it
    assert middle.pk in ids  # the graph brings it into the top 3, pushing a similar fact out
    found = next(r for r in ranked if r.item.pk == middle.pk)
    assert found.graph > 0.3 and found.relevance < ranked[0].relevance
    # The chain walked back from the best match: the middle is its nearest cause, the
    # root (sharing no word with the question either) the next one back.
    assert found.why()["chain"]["position"] == 1
    root = next(r for r in _rank(access, query, top_k=10) if r.item.pk == depot[0].pk)
    assert root.why()["chain"]["position"] == 2 and root.relevance < found.relevance
    assert set(found.why()) >= {"score", "relevance", "similarity", "lexical", "graph", "bridges", "links"}


@pytest.mark.django_db(transaction=True)
def test_reads_beside_the_rank_give_the_rank_it_gives_alone(access, depot, settings):
    """Outside a transaction the rank's independent reads run on side connections
    (core.beside); the ranked facts, scores and reasons are those of the rank that
    reads one statement after another, and fewer statements wait on its own."""
    from django.db import connection

    def ranked_with(side_reads: int) -> tuple[list[tuple[object, float, dict]], int]:
        settings.FEDMEM_DB_SIDE_READS = side_reads
        statements = []

        def record(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
            statements.append(sql)
            return execute(sql, params, many, context)

        with connection.execute_wrapper(record):
            ranked = _rank(access, "Why were the retailer's northern orders delayed?", top_k=6)
        return [(r.item.pk, r.score, r.why()) for r in ranked], len(statements)

    alone, own_alone = ranked_with(0)
    together, own_together = ranked_with(3)
    assert together == alone
    assert any(why["chain"] for _pk, _score, why in alone)  # the walk ran, links and all
    assert own_together < own_alone


def test_the_core_reads_only_what_the_caller_may_see(access, depot, world):
    from django.utils import timezone

    MemoryItem.objects.filter(pk=depot[0].pk).update(invalid_at=timezone.now())  # retired
    ranked = _rank(access, "Why were the retailer's northern orders delayed?", top_k=6)
    assert depot[0].pk not in {r.item.pk for r in ranked}


# --- answers stay on the question ---------------------------------------------------------


def test_answer_states_the_chain_of_the_question_not_another(access, depot, world, as_agent):
    for session, text in [
        ("p1", "The payroll server ran out of disk space."),
        ("p2", "The full disk on the payroll server stopped the salary batch."),
        ("p3", "The stopped salary batch delayed the staff payments."),
    ]:
        fact(access, text, session_id=session)
    body = (
        as_agent(world.agent)
        .post(
            f"/v1/memory/agents/{world.agent.pk}/answer",
            {"query": "Why were the retailer's northern orders delayed?"},
            format="json",
        )
        .json()
    )
    answer = body["answer"]
    assert answer["detail"]["form"] == "why"
    assert answer["detail"]["root_item_id"] in {str(f.pk) for f in depot}
    assert "payroll" not in answer["text"].lower()
    assert {h["item_id"] for h in body["chain"]} <= {str(f.pk) for f in depot}


def test_why_without_a_supported_chain_says_so_and_cites_what_it_used(access, world, as_agent):
    only = fact(access, "The retailer's northern orders were late in March.", session_id="x")
    body = (
        as_agent(world.agent)
        .post(
            f"/v1/memory/agents/{world.agent.pk}/answer",
            {"query": "Why were the retailer's northern orders late?"},
            format="json",
        )
        .json()
    )
    assert body["chain"] == []
    assert body["answer"]["text"].startswith("No causal chain in memory explains this.")
    assert body["answer"]["citations"] == [str(only.pk)]


def test_a_cause_not_asserted_by_a_span_link_stays_below_the_best_direct_match_left(access, depot):
    ranked = _rank(access, "Why were the retailer's northern orders delayed?", top_k=10)
    on_chain = [r for r in ranked[1:] if r.chain]
    direct = [r for r in ranked[1:] if not r.chain]
    assert on_chain and direct
    assert all(r.chain["basis"] in {"asserted", "entity", "session", "words"} for r in on_chain)
    # Without a stored span link a cause gains at most up to the best score of the rest
    # before any bonus (the rank score is relevance + GRAPH_WEIGHT x graph until then).
    ceiling = max(r.relevance + graphrank.GRAPH_WEIGHT * r.graph for r in ranked[1:])
    weak = [r for r in on_chain if r.chain["basis"] != "asserted"]
    assert weak, [r.chain for r in on_chain]
    assert all(r.score <= ceiling + 1e-9 for r in weak)
    assert any(r.score > r.relevance + graphrank.GRAPH_WEIGHT * r.graph for r in weak)  # some bonus was given
    # The bonus is the link's strength times CHAIN_BONUS, never more.
    assert all(
        r.score
        <= r.relevance
        + graphrank.GRAPH_WEIGHT * r.graph
        + graphrank.CHAIN_BONUS * min(r.chain["link"], 1.0)
        + 1e-9
        for r in on_chain
    )


# --- sessions -------------------------------------------------------------------------------

BAKERY = [
    "The night shift at the bakery started an hour late.",
    "Fewer loaves were ready when the vans left.",
    "The cafe on Elm Street got half its usual order.",
    "Customers at the cafe found the shelves empty by nine.",
]


def test_session_neighbours_reach_the_window_nearest_first(access):
    from memory.tests.conftest import remember

    turns = [
        remember(access, f"Turn {n} of the bakery notes.", scope="agent", session_id="bake").item
        for n in range(6)
    ]
    other = remember(access, "Turn 9 of another session.", scope="agent", session_id="else").item
    rows = graphrank._session_neighbours([turns[3], turns[0]], [2, 1])
    from_three = [(b, d) for a, b, d in rows if a == turns[3].pk]
    assert {b for b, _d in from_three} == {turns[1].pk, turns[2].pk, turns[4].pk, turns[5].pk}
    assert [d for _b, d in from_three] == sorted(d for _b, d in from_three)
    assert {b for a, b, _d in rows if a == turns[0].pk} == {turns[1].pk}
    assert other.pk not in {b for _a, b, _d in rows}
    assert graphrank.session_sizes([(turns[0].agent_id, "bake"), (other.agent_id, "else")]) == {
        (turns[0].agent_id, "bake"): 6,
        (other.agent_id, "else"): 1,
    }


def test_a_small_session_bridges_more_than_a_long_one():
    assert session_weight(4, 1000) > session_weight(40, 1000) > session_weight(400, 1000) > 0
    # As specific as an entity named by as many facts.
    assert session_weight(5, 1000) == pytest.approx(bridge_weight("loading bays", "", 5, 1000))


def test_the_best_matchs_session_brings_the_turns_told_before_it(access, monkeypatch):
    for text in BAKERY:
        fact(access, text, session_id="bakery")
    for n, (_session, text) in enumerate(SIMILAR):
        fact(access, text, session_id=f"other-{n}")
    # Two seeds, so the root (no word shared with the question, three turns before the
    # best match) is not one of them: only the best match's session window reaches it.
    monkeypatch.setattr(graphrank, "SEED_POOL", 2)
    scopes = read_scopes(access, None)
    rq = RecallQuery(
        query="Why were the shelves at the cafe empty?", scopes=scopes, keys=Keys(narrow=True), top_k=1
    )
    ranked = graphrank.rank(access, rq, graph.View(access, visible_q(access, scopes)), hops=1, limit=20)
    assert ranked[0].item.content == BAKERY[3]
    found = {r.item.content: r for r in ranked}
    assert found[BAKERY[0]].kind == "session"


def _exact_support(a: np.ndarray, restart: np.ndarray) -> np.ndarray:
    out_weight = a.sum(axis=1)
    transition = np.divide(a, out_weight[:, None], out=np.zeros_like(a), where=out_weight[:, None] > 0)
    m = (1 - graphrank.DAMPING) * np.linalg.inv(np.eye(len(a)) - graphrank.DAMPING * transition)
    return np.maximum(restart @ m - restart * np.diag(m), 0.0)


def test_support_equals_the_exact_inverse_on_a_random_graph():
    # The solve reads only the rows it needs; it must give the full inverse's figures.
    rng = np.random.default_rng(5)
    n = 60
    a = np.zeros((n, n))
    for _ in range(150):
        i, j = rng.integers(0, n, 2)
        a[i, j] = a[j, i] = a[i, j] + rng.random()
    a[7, :] = a[:, 7] = 0  # a node without edges keeps its mass and gets no support
    restart = np.zeros(n)
    restart[[0, 3, 7, 11, 40]] = [0.4, 0.2, 0.1, 0.2, 0.1]
    assert np.allclose(graphrank.support(a, restart), _exact_support(a, restart), rtol=1e-9, atol=1e-12)
    assert graphrank.support(a, restart)[7] == pytest.approx(0.0, abs=1e-12)


def test_support_with_pendant_nodes_equals_the_exact_inverse():
    # A rank's subgraph: facts around shared entities, with many nodes of one neighbour
    # (an entity one fact names, a fact reached by one bridge). The solve leaves those
    # out and puts them back; every kind of them is here, beside what must stay in.
    rng = np.random.default_rng(11)
    n = 48
    a = np.zeros((n, n))
    for _ in range(40):  # the core: facts 0-19 and entities 20-29
        i, j = rng.integers(0, 20), rng.integers(20, 30)
        a[i, j] = a[j, i] = a[i, j] + rng.random()
    for leaf in range(30, 40):  # pendant entities and facts on the core
        j = int(rng.integers(0, 30))
        a[leaf, j] = a[j, leaf] = 0.2 + rng.random()
    a[40, 41] = a[41, 40] = 0.7  # two pendants joined only to each other
    a[42, 3] = a[3, 42] = 0.9  # a pendant seed: it stays in the solve
    a[43, 43] = 0.5  # a self-loop and one neighbour: not pendant
    a[43, 5] = a[5, 43] = 0.4
    a[44, 45] = a[45, 44] = 1.0  # a chain hanging off the core: 44 is pendant on 45
    a[45, 6] = a[6, 45] = 0.3
    a[46, 7] = 0.6  # one-way edges (not what rank builds): nothing is eliminated there
    a[8, 47] = 0.6
    restart = np.zeros(n)
    restart[[0, 1, 2, 40, 42, 47]] = [0.3, 0.2, 0.1, 0.1, 0.2, 0.1]
    assert np.allclose(graphrank.support(a, restart), _exact_support(a, restart), rtol=1e-9, atol=1e-12)
    # No node at all left to solve: isolated seeds only.
    lone = np.zeros((3, 3))
    assert np.allclose(graphrank.support(lone, np.array([0.5, 0.5, 0.0])), 0.0)
    assert graphrank.support(np.zeros((0, 0)), np.zeros(0)).shape == (0,)


# The depot's ranking as the full-inverse support and list scans gave it: made faster,
# the rank must order and score the same facts the same way.
PINNED = {
    "What happened at the Leeds depot?": [
        ("With the Leeds depot loading dock closed, trailers queued at the gate for a day.", 1.2542, None),
        ("A forklift damaged the Leeds depot loading dock on Monday.", 2.444, None),
        ("The trailers queued at the gate delayed the retailer's northern orders.", 2.444, 1),
        ("Northern weather rarely delays retailers.", 0.5742, 2),
        ("The retailer's southern orders are packed in Bristol.", 0.4073, None),
        ("The retailer counts its orders every Monday.", 0.2548, None),
    ],
    "Why were the retailer's northern orders delayed?": [
        ("The trailers queued at the gate delayed the retailer's northern orders.", 0.9571, None),
        ("Northern weather rarely delays retailers.", 2.1901, None),
        ("With the Leeds depot loading dock closed, trailers queued at the gate for a day.", 2.1901, 1),
        ("The retailer's southern orders are packed in Bristol.", 1.6646, None),
        ("The retailer counts its orders every Monday.", 1.4985, None),
        ("A forklift damaged the Leeds depot loading dock on Monday.", 0.7821, 2),
    ],
}


@pytest.mark.parametrize("query", sorted(PINNED))
def test_the_depot_ranking_is_pinned(access, depot, query):
    got = [
        (r.item.content, round(r.score, 4), (r.chain or {}).get("position"))
        for r in _rank(access, query, top_k=10)
    ]
    assert got == PINNED[query]


def test_scores_equal_to_the_solvers_precision_are_a_tie_broken_by_relevance():
    import uuid

    def ranked(score, rel):
        item = MemoryItem(id=uuid.uuid4(), content="x")
        return graphrank.Ranked(item, score, rel, rel, 0.0, 0.0, "seed", 0, item.pk)

    noisy, relevant = ranked(1.0 + 1e-12, 0.2), ranked(1.0, 0.5)
    assert sorted([noisy, relevant], key=graphrank._order) == [relevant, noisy]
    assert sorted([ranked(1.1, 0.2), relevant], key=graphrank._order)[0].score == 1.1


def test_entity_vectors_read_in_binary_are_the_stored_vectors(access):
    from memory.models import Entity
    from memory.models.items import EMBEDDING_DIMENSIONS

    # Random float32s: most have no short decimal form, so the text form must round-trip.
    rng = np.random.default_rng(11)
    made = [
        Entity.objects.create(
            tenant_id=access.tenant_id, name=f"e{n}", normalized=f"e{n}",
            embedding=rng.standard_normal(EMBEDDING_DIMENSIONS).astype(np.float32),
        )
        for n in range(5)
    ]  # fmt: skip
    wanted = [made[3].pk, made[0].pk, made[4].pk]
    ids, matrix = graphrank.entity_vectors(wanted)
    text = dict(Entity.objects.filter(pk__in=wanted).values_list("pk", "embedding"))
    assert ids == sorted(wanted)
    assert matrix.dtype == np.float32 and matrix.shape == (3, EMBEDDING_DIMENSIONS)
    # Bit for bit what the text form parses to, as the float32s the column stores.
    assert np.array_equal(matrix, np.asarray([text[pk] for pk in ids], dtype=np.float32))
    assert graphrank.entity_vectors([])[0] == []


def test_entity_synonyms_pair_the_near_names_only(access, settings):
    from memory.models import Entity
    from memory.models.items import EMBEDDING_DIMENSIONS

    settings.FEDMEM_ENTITY_SYNONYM_THRESHOLD = 0.9
    base = np.zeros(EMBEDDING_DIMENSIONS, dtype=np.float32)
    base[0] = 1.0
    near = base.copy()
    near[1] = 0.2  # cosine ~0.98
    far = np.zeros(EMBEDDING_DIMENSIONS, dtype=np.float32)
    far[2] = 1.0
    a, b, c = (
        Entity.objects.create(tenant_id=access.tenant_id, name=n, normalized=n, embedding=v)
        for n, v in [("loading bays", base), ("the remaining bay", near), ("payroll", far)]
    )
    [(x, y, sim)] = graphrank.entity_synonyms([c.pk, b.pk, a.pk])
    assert {x, y} == {a.pk, b.pk}
    assert sim == pytest.approx(1 / np.sqrt(1.04), rel=1e-6)


def test_entity_synonyms_never_pair_names_whose_identifiers_differ(access, settings):
    from memory.embeddings import embed_texts
    from memory.models import Entity

    settings.FEDMEM_ENTITY_SYNONYM_THRESHOLD = 0.8
    names = ["order 1234", "order 1235", "Q3 2024", "Q4 2024", "the Leeds depot", "the Leeds site"]
    names += ["the east wing", "the west wing", "the old server", "the new server"]
    vectors = embed_texts(names)
    made = {
        n: Entity.objects.create(tenant_id=access.tenant_id, name=n, normalized=n.lower(), embedding=v)
        for n, v in zip(names, vectors, strict=True)
    }
    by_pk = {e.pk: n for n, e in made.items()}
    pairs = {frozenset((by_pk[a], by_pk[b])) for a, b, _s in graphrank.entity_synonyms(list(by_pk))}
    # The numbered pairs embed above 0.9, the wings and the servers at 0.86-0.89; the
    # depot and the site at about 0.7.
    assert pairs == set()
    settings.FEDMEM_ENTITY_SYNONYM_THRESHOLD = 0.65
    pairs = {frozenset((by_pk[a], by_pk[b])) for a, b, _s in graphrank.entity_synonyms(list(by_pk))}
    assert pairs == {frozenset(("the Leeds depot", "the Leeds site"))}


@pytest.mark.parametrize(
    ("a", "b", "one"),
    [
        ("order 1234", "order 1235", False),
        ("flight ba117", "ba117", True),
        ("q3 2024", "q4 2024", False),
        ("covid-19 ward", "covid-19 unit", True),
        ("gpt-4o", "gpt-4", False),
        ("the leeds depot", "the leeds site", True),
        ("the 2024 budget", "the budget", False),
        ("the north warehouse", "the south warehouse", False),
        ("northern rail", "southern rail", False),
        ("the old server", "the new server", False),
        ("the primary database", "the replica database", False),
        ("mr. brown", "mrs. brown", False),
        ("acme corp", "acme inc", True),
        ("the north depot", "the north site", True),
    ],
)
def test_names_may_be_one_thing_only_when_their_identifiers_and_distinguishing_words_agree(a, b, one):
    from memory.retrieval.specificity import may_be_one

    assert may_be_one(a, b) is one


def test_bm25_scores_items_of_one_wording_alike_and_breaks_their_tie_by_recency(access):
    from memory.tests.conftest import remember

    # One wording (the same lexemes), three items (a write differing only in case is
    # the same memory).
    same = [
        remember(access, text, scope="agent").item
        for text in [
            "The boiler in block C failed after the frost.", "The boiler in block C failed after the frost!",
            "The boiler in block C failed, after the frost.",
        ]
    ]  # fmt: skip
    remember(access, "The frost closed the roads to block C.", scope="agent")
    remember(access, "Block D kept its heating through the frost.", scope="agent")
    base = Q(tenant_id=access.tenant_id)
    rows = lexical.bm25_rows(base, access.tenant_id, "boiler failed in block C frost", 10)
    head = rows[:3]
    assert {pk for pk, *_ in head} == {i.pk for i in same}
    assert len({score for _pk, score, _c, _cov in head}) == 1  # equal to the last bit
    assert [created for _pk, _s, created, _cov in head] == sorted((i.created_at for i in same), reverse=True)
    assert all(score < head[0][1] for _pk, score, _c, _cov in rows[3:])


def test_item_and_span_vectors_read_in_binary_are_the_stored_vectors(access):
    from memory.models import CausalEdge
    from memory.models.items import EMBEDDING_DIMENSIONS
    from memory.retrieval.vectors import stored_vectors
    from memory.tests.conftest import remember

    # Random float32s: most have no short decimal form, so the text form must round-trip.
    rng = np.random.default_rng(12)
    items = [remember(access, f"The pump in hall {n} stopped.", scope="agent").item for n in range(4)]
    for item in items:
        MemoryItem.objects.filter(pk=item.pk).update(
            embedding=rng.standard_normal(EMBEDDING_DIMENSIONS).astype(np.float32)
        )
    edges = [
        CausalEdge.objects.create(
            tenant_id=access.tenant_id, item=item, cause="the pump", effect="stopped", cue="because",
            cause_embedding=rng.standard_normal(EMBEDDING_DIMENSIONS).astype(np.float32),
            effect_embedding=rng.standard_normal(EMBEDDING_DIMENSIONS).astype(np.float32),
        )
        for item in items[:3]
    ]  # fmt: skip
    wanted = [items[2].pk, items[0].pk, items[3].pk, uuid.uuid4()]
    ids, matrix = stored_vectors(MemoryItem, wanted)
    text = dict(MemoryItem.objects.filter(pk__in=wanted).values_list("pk", "embedding"))
    assert ids == sorted(text) and matrix.dtype == np.float32
    # Bit for bit what the ORM parses from text, as the float32s the column stores.
    assert np.array_equal(matrix, np.asarray([text[pk] for pk in ids], dtype=np.float32))
    for column in ("cause_embedding", "effect_embedding"):
        ids, matrix = stored_vectors(CausalEdge, [e.pk for e in edges], column)
        text = dict(CausalEdge.objects.filter(pk__in=ids).values_list("pk", column))
        assert ids == sorted(e.pk for e in edges)
        assert np.array_equal(matrix, np.asarray([text[pk] for pk in ids], dtype=np.float32))
    assert stored_vectors(MemoryItem, [])[0] == []


def test_the_chain_pool_reads_the_vectors_the_orm_parses(access):
    from memory.models import CausalEdge
    from memory.models.items import EMBEDDING_DIMENSIONS
    from memory.reasoning.chain import Pool, asserted_links
    from memory.tests.conftest import remember

    rng = np.random.default_rng(13)
    items = [remember(access, f"The valve in line {n} jammed.", scope="agent").item for n in range(3)]
    for item in items:
        MemoryItem.objects.filter(pk=item.pk).update(
            embedding=rng.standard_normal(EMBEDDING_DIMENSIONS).astype(np.float32)
        )
    for item in items[:2]:
        CausalEdge.objects.create(
            tenant_id=access.tenant_id, item=item, cause="the valve", effect="jammed", cue="because",
            cause_embedding=rng.standard_normal(EMBEDDING_DIMENSIONS).astype(np.float32),
            effect_embedding=rng.standard_normal(EMBEDDING_DIMENSIONS).astype(np.float32),
        )  # fmt: skip
    ids = [i.pk for i in items]
    pool = Pool(access.tenant_id, ids)
    profiles = pool.profiles(ids)
    text = dict(MemoryItem.objects.filter(pk__in=ids).values_list("pk", "embedding"))
    first = {}
    for edge in CausalEdge.objects.filter(item_id__in=ids).order_by("id"):
        first.setdefault(edge.item_id, edge.cause_embedding)
    for pk in ids:
        parsed = np.asarray(text[pk], dtype=np.float32)
        assert np.array_equal(np.asarray(profiles[pk].vector, dtype=np.float32), parsed)
        if pk in first:
            assert np.array_equal(profiles[pk].cause_vector, np.asarray(first[pk], dtype=np.float32))
        else:
            assert profiles[pk].cause_vector is None
    assert asserted_links(access.tenant_id, ids) == {}


def test_bm25_scores_are_okapi_bm25_of_each_items_term_frequencies(access):
    from django.db import connection

    from memory.tests.conftest import remember

    texts = [
        "The pump failed, and the spare pump failed too, in hall 3.",
        "The pump in hall 4 was replaced.",
        "Hall 3 flooded after the storm.",
        "Nothing about the question here at all.",
        "Der Pumpenraum in Halle 3 ist überflutet.",
    ]
    items = [remember(access, text, scope="agent").item for text in texts]
    base = Q(tenant_id=access.tenant_id)
    query = "why did the pump in hall 3 fail"
    rows = lexical.bm25_rows(base, access.tenant_id, query, 10)
    # The reference: every lexeme of each item's stored vector with its position
    # count, and the tenant's statistics, in the textbook formula.
    terms = lexical.query_lexemes(query, lexical.query_languages(access.tenant_id, query))
    stats = lexical.tenant_stats(access.tenant_id, terms)
    expected = {}
    for item in items:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT text_language, length(search_vector), u.lexeme, array_length(u.positions, 1) "
                "FROM memory_item CROSS JOIN LATERAL unnest(search_vector) AS u WHERE id = %s",
                [item.pk],
            )
            found = cursor.fetchall()
        score = 0.0
        for lang, dl, lexeme, tf in found:
            if (lang, lexeme) in terms:
                norm = lexical.K1 * (1 - lexical.B + lexical.B * dl / stats.avg_length)
                score += stats.idf((lang, lexeme)) * tf * (lexical.K1 + 1) / (tf + norm)
        if score:
            expected[item.pk] = score
    assert {pk: pytest.approx(score, rel=1e-9) for pk, score, _c, _cov in rows} == expected
    # A repeated word counts: the item naming the pump twice leads.
    assert rows[0][0] == items[0].pk


def test_a_cause_span_finds_the_fact_that_states_the_cause(access, world):
    from memory.enforcement import system_access

    # The effect names its cause ("Da die SSD ... erreicht hat"); the root says so in its
    # own words and shares no entity with the effect's main clause.
    root = fact(
        access, "Das SSD-Laufwerk hat seine maximale Schreibgeschwindigkeit erreicht.", session_id="a"
    )
    effect = fact(
        access, "Da die SSD die maximale Schreibgeschwindigkeit erreicht hat, steigt der Datendurchsatz.",
        session_id="b",
    )  # fmt: skip
    fact(access, "Der Datendurchsatz des Netzwerks wird stündlich gemessen.", session_id="c")
    # The same words in another tenant's memory are never read.
    other = fact(
        system_access(world.foreign_agent),
        "Das SSD-Laufwerk hat seine maximale Schreibgeschwindigkeit erreicht.",
    )
    view = graph.View(access, visible_q(access, read_scopes(access, None)))
    spans = graphrank._cause_spans(access.tenant_id, [effect.pk, root.pk])
    assert spans == [(effect.pk, "die SSD die maximale Schreibgeschwindigkeit erreicht hat")]
    bridges, named = graphrank._term_neighbours(
        view, access.tenant_id, graphrank.term_sources([effect], spans)
    )
    assert [(a, b) for a, b, _c in named] == [(effect.pk, root.pk)]
    assert named[0][2] >= graphrank.NAMED_FLOOR
    assert (effect.pk, root.pk) in {(a, b) for a, b, _c in bridges}
    assert other.pk not in {b for _a, b, _c in bridges}
    # A retired root is stated by nothing the caller may read now.
    from django.utils import timezone

    MemoryItem.objects.filter(pk=root.pk).update(invalid_at=timezone.now())
    view = graph.View(access, visible_q(access, read_scopes(access, None)))
    assert (
        graphrank._term_neighbours(view, access.tenant_id, graphrank.term_sources([effect], spans))[1] == []
    )
