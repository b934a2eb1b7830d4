"""A trace walk reads only the links it can use and visits exactly what it visited when
it read ``per_edge`` links of every edge of a level: the same hops in the same order,
the same parents, terminals and truncation, on a graph with hub edges, links shared by
many edges, self-links and pruned edges, for every bound that cuts the walk
differently."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pytest

from memory.enforcement import read_scopes, visible_q
from memory.extraction.links import FANOUT
from memory.models import CausalEdge, SpanLink
from memory.reasoning import graph
from memory.tests.conftest import remember

ITEMS = 60
EDGES_PER_ITEM = 5


@pytest.fixture
def wide(access):
    """300 edges over 60 facts; each edge links to 0-24 others (more than FANOUT for
    some), scores drawn at random, a few self-links."""
    rng = random.Random(7)
    edges = []
    for n in range(ITEMS):
        item = remember(access, f"Fact {n} about the pipeline outage.").item
        for k in range(EDGES_PER_ITEM):
            edges.append(
                CausalEdge.objects.create(
                    tenant_id=access.tenant_id,
                    item=item,
                    cause=f"cause {n}.{k}",
                    effect=f"effect {n}.{k}",
                    cue="led to",
                    cause_embedding=item.embedding,
                    effect_embedding=item.embedding,
                )
            )
    links = []
    for edge in edges:
        width = rng.choice([0, 1, 2, 5, 24, 24])
        targets = rng.sample(edges, width)
        if rng.random() < 0.1:
            targets.append(edge)
        for target in dict.fromkeys(targets):
            links.append(
                SpanLink(
                    tenant_id=access.tenant_id, source=edge, target=target, method="terms", score=rng.random()
                )
            )
    SpanLink.objects.bulk_create(links)
    return edges


def reference_walk(view: graph.View, start: list[Any], *, direction: str, max_depth: int,
                   max_visited: int, pruned: frozenset[int] = frozenset()) -> graph.Walk:  # fmt: skip
    """The walk as it was: every edge of a level read ``per_edge`` links deep."""
    result = graph.Walk()
    level = []
    for edge in start:
        if edge.pk not in pruned and edge.pk not in result.edges and len(result.edges) < max_visited:
            result.edges[edge.pk], result.parents[edge.pk] = edge, None
            level.append(edge)
    depth = 1
    while level:
        following: dict[int, list[Any]] = defaultdict(list)
        room = max_visited - len(result.edges)
        per_edge = max(1, min(FANOUT, room + 1))
        for src, nxt, _score in view.links([e.pk for e in level], direction, per_edge, pruned):
            if nxt.pk != src and nxt.pk not in pruned:
                following[src].append(nxt)
        upcoming = []
        for edge in level:
            result.hops.append(graph._edge_json(edge, depth, result.parents[edge.pk]))
            nexts = following.get(edge.pk, [])
            if not nexts:
                result.terminals.append(edge)
                continue
            if depth >= max_depth:
                result.truncated = True
                continue
            for nxt in nexts:
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


def _view(access) -> graph.View:
    return graph.View(access, visible_q(access, read_scopes(access, None)))


def _rows_read(monkeypatch) -> list[int]:
    read: list[int] = []
    run = graph.run_lateral

    def counted(*args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        rows = run(*args, **kwargs)
        read.append(len(rows))
        return rows

    monkeypatch.setattr(graph, "run_lateral", counted)
    return read


def test_the_walk_visits_what_a_full_read_visits_and_reads_fewer_rows(access, wide, monkeypatch):
    view = _view(access)
    rows = _rows_read(monkeypatch)
    rng = random.Random(11)
    starts = [wide[:1], wide[:3], wide[10:14], wide[::7]]
    read = total = 0
    for direction in (graph.EFFECTS, graph.CAUSES):
        for start in starts:
            light = view.edge_rows(CausalEdge.objects.filter(pk__in=[e.pk for e in start]).order_by("id"))
            for max_visited in (1, 2, 5, 17, 30, 60, 100):
                for max_depth in (1, 2, 3, 6):
                    pruned = frozenset(e.pk for e in rng.sample(wide, 4)) if max_visited % 2 else frozenset()
                    bounds = {"direction": direction, "max_depth": max_depth, "max_visited": max_visited}
                    rows.clear()
                    expected = reference_walk(view, light, pruned=pruned, **bounds)
                    full = sum(rows)
                    rows.clear()
                    walked = graph.walk(view, light, pruned=pruned, **bounds)
                    assert walked.hops == expected.hops, bounds
                    assert walked.parents == expected.parents, bounds
                    assert [e.pk for e in walked.terminals] == [e.pk for e in expected.terminals], bounds
                    assert walked.truncated == expected.truncated, bounds
                    # An edge read short, then in full, reads its first link twice.
                    assert sum(rows) <= full + len(walked.hops), bounds
                    read += sum(rows)
                    total += full
    # Where the room or the depth ends a walk inside a wide level, most of that level's
    # links stay unread (over this grid: 0.84 of the rows; 1.0 or more reading in full).
    assert read < 0.9 * total, (read, total)


def test_a_per_row_limit_needs_the_marked_slice(access):
    inner = SpanLink.objects.filter(source_id=graph.SENTINEL).values_list("target_id")[:5]
    with pytest.raises(ValueError, match="PER_ROW"):
        graph.lateral_statement(*inner.query.sql_with_params(), per_row_limit=True)
