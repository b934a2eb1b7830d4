"""The graph-aware rank made faster returns what it returned before: the same facts, in
the same order, with the same scores, signals, paths and chain places, on a small graph
written and extracted through the real pipeline (``graphrank_reference`` is the rank as
it was, step by step)."""

from __future__ import annotations

import uuid

import pytest

from memory.enforcement import Keys, read_scopes, visible_q
from memory.reasoning import graph
from memory.retrieval import graphrank
from memory.retrieval.hybrid import RecallQuery
from memory.retrieval.lexical import bm25_rows, bm25_rows_many
from memory.tests.graph_helpers import DISTRACTOR, INCIDENT, fact
from memory.tests.graphrank_reference import _causal_neighbours as reference_causal_neighbours
from memory.tests.graphrank_reference import bm25_rows as reference_bm25_rows
from memory.tests.graphrank_reference import links_among as reference_links_among
from memory.tests.graphrank_reference import reference_rank

# Two told matters with near-identical wordings across sessions, facts sharing specific
# entities and rare words, a long session and a fact in another language: every
# bridge kind (terms in two rounds, entities, synonyms, causal links, sessions) occurs.
FACTS = [
    ("d1", "A forklift damaged the Leeds depot loading dock on Monday."),
    ("d2", "With the Leeds depot loading dock closed, trailers queued at the gate for a day."),
    ("d3", "The trailers queued at the gate delayed the retailer's northern orders."),
    ("d4", "The retailer's southern orders are packed in Bristol."),
    ("d5", "The retailer counts its orders every Monday."),
    ("d6", "Northern weather rarely delays retailers."),
    *INCIDENT,
    DISTRACTOR,
    ("t1", "The nightly backup job filled the shared volume on db-2."),
    ("t1", "Because the shared volume was full, the reporting service stopped writing exports."),
    ("t1", "The missing exports left the finance team without the monthly revenue report."),
    ("t1", "The finance team escalated the missing revenue report to the CFO."),
    ("t2", "The remaining bay at the Leeds depot handled every inbound trailer that week."),
    ("t3", "Der volle Datenträger auf db-1 führte zum Absturz der Datenbank."),
]

QUERIES = [
    "Why were the retailer's northern orders delayed?",
    "What happened at the Leeds depot?",
    "Why did checkout fail?",
    "why did the finance team escalate to the CFO",
    "full disk on db-1",
    "monthly revenue report",
]


@pytest.fixture
def written(access):
    return [fact(access, text, session_id=session) for session, text in FACTS]


def _signature(ranked):
    return [
        (
            r.item.pk, r.kind, r.hop, r.seed_id, r.path, r.vector_rank, r.keyword_rank, r.chain,
            r.score, r.relevance, r.similarity, r.lexical, r.graph,
        )
        for r in ranked
    ]  # fmt: skip


def _same(got, expected):
    assert [g[:8] for g in got] == [e[:8] for e in expected]
    for g, e in zip(got, expected, strict=True):
        assert g[8:] == pytest.approx(e[8:], abs=1e-6), g[0]


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_the_faster_rank_returns_what_the_rank_before_returned(access, written, hops):
    scopes = read_scopes(access, None)
    view = graph.View(access, visible_q(access, scopes))
    for n, query in enumerate(QUERIES):
        rq = RecallQuery(query=query, scopes=scopes, keys=Keys(narrow=True), top_k=5)
        # Either first: the second call reads the term statistics the first one cached.
        if n % 2:
            expected = _signature(reference_rank(access, rq, view, hops=hops, limit=40))
            got = _signature(graphrank.rank(access, rq, view, hops=hops, limit=40))
        else:
            got = _signature(graphrank.rank(access, rq, view, hops=hops, limit=40))
            expected = _signature(reference_rank(access, rq, view, hops=hops, limit=40))
        assert len(expected) > 5
        _same(got, expected)


def test_a_small_visit_budget_cuts_the_neighbourhood_as_before(access, written):
    scopes = read_scopes(access, None)
    view = graph.View(access, visible_q(access, scopes))
    rq = RecallQuery(query=QUERIES[0], scopes=scopes, keys=Keys(narrow=True), top_k=3)
    expected = _signature(reference_rank(access, rq, view, hops=2, limit=3, max_visited=8))
    _same(_signature(graphrank.rank(access, rq, view, hops=2, limit=3, max_visited=8)), expected)


@pytest.mark.parametrize("limit", [200, 3, 1])
def test_the_causal_links_statement_reads_what_the_orm_read(access, written, monkeypatch, limit):
    # Every fact alone and all together, with room for every link and with the best few
    # of each direction only: the same links, spans and scores, in the same order.
    from memory.models import MemoryItem, SpanLink

    monkeypatch.setattr(graphrank, "CAUSAL_LINKS", limit)
    ids = list(MemoryItem.objects.filter(agent=access.agent).values_list("pk", flat=True))
    links = SpanLink.objects.filter(tenant_id=access.tenant_id).count()
    assert links >= 3
    found = 0
    for chosen in [*([pk] for pk in ids), ids]:
        got = graphrank._causal_neighbours(access.tenant_id, chosen)
        assert got == reference_causal_neighbours(access.tenant_id, chosen, limit)
        found += len(got)
    assert found
    # Together, the items hold each link in both directions: the cap keeps the best.
    assert len(graphrank._causal_neighbours(access.tenant_id, ids)) == 2 * min(links, limit)
    assert graphrank._causal_neighbours(access.tenant_id, []) == []


def test_the_links_among_a_pools_edges_are_the_links_read_on_their_own(access, written):
    # The walk asserts its links among the edges its Pool read, not a second read of them.
    from memory.models import CausalEdge, MemoryItem
    from memory.reasoning.chain import Pool, asserted_links, links_among

    ids = list(MemoryItem.objects.filter(agent=access.agent).order_by("pk").values_list("pk", flat=True))
    whole = asserted_links(access.tenant_id, ids)
    assert whole
    # One probe of the (source, target) index per edge reads what both arrays on the
    # link table read, for every subset (and nothing for none, or for another tenant).
    edge_ids = sorted(CausalEdge.objects.filter(item__agent=access.agent).values_list("pk", flat=True))
    for chosen in (edge_ids, edge_ids[::2], edge_ids[1::2], edge_ids[:1], []):
        assert links_among(access.tenant_id, chosen) == reference_links_among(access.tenant_id, chosen)
    assert links_among(access.tenant_id, edge_ids)
    assert links_among(uuid.uuid4(), edge_ids) == []
    for chosen in (ids, ids[::2], ids[1::2]):
        pool = Pool(access.tenant_id, chosen)
        assert asserted_links(access.tenant_id, chosen, edges=pool.all_edges) == asserted_links(
            access.tenant_id, chosen
        )


def test_the_bm25_statement_scores_as_before(access, written):
    # Every fact as the query (as a term bridge reads it) and the questions (as the
    # hybrid seeds do): the same rows, in the same order, with the same floats.
    view = graph.View(access, visible_q(access, read_scopes(access, None)))
    texts = [text for _session, text in FACTS] + QUERIES
    for text in texts:
        expected = reference_bm25_rows(view.items(), access.tenant_id, text, 7)
        assert bm25_rows(view.q, access.tenant_id, text, 7) == expected, text
    assert bm25_rows_many(view.q, access.tenant_id, texts, 7) == [
        reference_bm25_rows(view.items(), access.tenant_id, text, 7) for text in texts
    ]
