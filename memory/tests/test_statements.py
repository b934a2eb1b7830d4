"""Traversal statements compiled once per shape of the visibility condition
(core.statements): for every shape the read paths make, the statement bound with a
request's values is exactly what compiling that request's condition gives, one
tenant's values never reach another's statement, and a builder that would carry a
request's value into the cache is refused."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial

import pytest
from django.db.models import F, Q
from django.db.models.expressions import RawSQL

from conftest import assert_error
from core import statements
from core.errors import InvalidInput
from core.vocabulary import Scope
from memory.enforcement import Keys, read_scopes, system_access, visible_q
from memory.models import MemoryItem
from memory.reasoning import graph
from memory.retrieval import hybrid, lexical
from memory.tests.conftest import recall_url, remember
from memory.tests.graph_helpers import INCIDENT, fact

KEYS = [
    Keys(),
    Keys(user_id="cust-1", session_id="s-1", team="t-a", project="p-a"),
    Keys(user_id="cust-1", narrow=True),
    Keys(session_id="s-1", user_id="cust-2", narrow=True),
]
GRANTS = [{}, {"teams": ("t-a",), "projects": ("p-a", "p-b"), "global_access": True}]
WINDOWS = [
    {},
    {"at": datetime(2026, 3, 1, tzinfo=UTC)},
    {"include_superseded": True},
    {"include_expired": True},
]
SCOPE_SETS = [(scope,) for scope in Scope.values] + [tuple(Scope.values)]


def conditions(access):
    """Every visibility condition of the matrix (a combination the enforcement layer
    refuses, a narrowed read with no key for any scope, is left out)."""
    for scopes, keys, grants, window in itertools.product(SCOPE_SETS, KEYS, GRANTS, WINDOWS):
        granted = replace(access, policy=replace(access.policy, **grants))
        try:
            yield granted, visible_q(granted, scopes, keys, **window)
        except InvalidInput:
            continue


@pytest.fixture(autouse=True)
def _empty_cache():
    statements.clear()
    yield
    statements.clear()


def test_every_statement_bound_equals_a_fresh_compilation_for_every_shape(access):
    seen_shapes = set()
    for granted, q in conditions(access):
        view = graph.View(granted, q)
        for purpose, (condition, build) in graph.STATEMENTS.items():
            cond = condition(view)
            fresh_sql, fresh_params = build(cond).query.sql_with_params()
            for _ in range(2):  # compiled, then served from the cache
                sql, params = view.statement(purpose)
                assert sql == fresh_sql
                assert params == list(fresh_params)
            assert statements.state(purpose, cond) == "compiled", (purpose, q)
            seen_shapes.add((purpose, statements.template(cond)[0].shape))
    # The matrix makes many shapes: the scopes, keys and grants change the text.
    assert len(seen_shapes) > 10 * len(graph.STATEMENTS)


# The recall's statements over its condition: (purpose, statement, markers).
RECALL_STATEMENTS = [
    (("vector", 40), partial(hybrid._vector_rows, 40), (hybrid.QUERY_VECTOR,)),
    (("session neighbours",), hybrid._neighbour_rows, ()),
    (("lexical candidates",), lexical.Candidates._rows, ()),
    (
        ("items", ("id", "content"), (), False),
        partial(graph._items_statement, ("id", "content"), (), False),
        (),
    ),
    (
        ("items", (), ("embedding",), True),
        partial(graph._items_statement, (), ("embedding",), True),
        (hybrid.QUERY_VECTOR,),
    ),
]
FILTERS = [
    Q(),
    Q(kind__in=["semantic", "episodic"]) & Q(created_at__gte=datetime(2026, 1, 1, tzinfo=UTC)),
    Q(dataset_id__in=[3, 5]) & Q(record_kind__in=["fact"]),
]


def test_every_recall_statement_bound_equals_a_fresh_compilation_for_every_shape(access):
    for _granted, visible in conditions(access):
        for extra in FILTERS:
            cond = visible & extra & Q(pk__any=[uuid.uuid4(), uuid.uuid4()])
            for purpose, build, markers in RECALL_STATEMENTS:
                fresh_sql, fresh_params = build(cond).query.sql_with_params()
                for _ in range(2):
                    sql, params = statements.compiled(purpose, cond, build, markers=markers)
                    assert (sql, params) == (fresh_sql, list(fresh_params))
                assert statements.state(purpose, cond) == "compiled", (purpose, cond)


def test_recalls_of_two_tenants_in_turn_each_read_their_own(world, as_agent):
    mine = system_access(world.agent)
    theirs = system_access(world.foreign_agent)
    ours = {str(remember(mine, "The boiler in block C failed after the frost.", scope="agent").item.pk)}
    other = {str(remember(theirs, "The boiler in block C failed after the frost.", scope="agent").item.pk)}
    for agent, expected in ((world.agent, ours), (world.foreign_agent, other), (world.agent, ours)):
        for mode in ("hybrid", "graph"):
            response = as_agent(agent).post(
                recall_url(agent), {"query": "why did the boiler fail", "mode": mode}, format="json"
            )
            assert response.status_code == 200, response.content
            assert {r["id"] for r in response.json()["results"]} == expected, mode


def test_two_tenants_share_a_statement_never_its_values(world):
    mine, theirs = system_access(world.agent), system_access(world.foreign_agent)
    views = [graph.View(a, visible_q(a, a.policy.read_scopes)) for a in (mine, theirs)]
    purpose = ("links", graph.EFFECTS)
    first = views[0].statement(purpose)
    assert statements.state(purpose, graph.STATEMENTS[purpose][0](views[1])) == "compiled"
    second = views[1].statement(purpose)
    assert first[0] == second[0]
    assert world.tenant.pk in first[1] and world.tenant.pk not in second[1]
    assert world.other_tenant.pk in second[1] and world.other_tenant.pk not in first[1]
    assert world.agent.pk in first[1] and world.foreign_agent.pk in second[1]


def test_a_trace_after_another_tenants_reads_its_own_graph(world, as_agent):
    ours = [fact(system_access(world.agent), text, session_id=session) for session, text in INCIDENT]
    theirs = [
        fact(system_access(world.foreign_agent), text, session_id=session, user_id="x")
        for session, text in INCIDENT
    ]
    body = {"content": "verbose debug logging", "direction": "effects"}
    for agent, items in ((world.agent, ours), (world.foreign_agent, theirs), (world.agent, ours)):
        data = as_agent(agent).post(f"/v1/memory/agents/{agent.pk}/trace", body, format="json").json()
        assert [h["item_id"] for h in data["chain"]] == [str(i.pk) for i in items]
        assert [t["span"] for t in data["terminals"]] == ["lost revenue for the quarter"]
    # Both tenants' walks ran on one compiled statement (their conditions differ in
    # values only).
    for agent in (world.agent, world.foreign_agent):
        access = system_access(agent)
        view = graph.View(access, visible_q(access, read_scopes(access, None)))
        purpose = ("links", graph.EFFECTS)
        assert statements.state(purpose, graph.STATEMENTS[purpose][0](view)) == "compiled"


def test_a_builder_that_keeps_a_request_value_is_refused(access):
    q = visible_q(access, access.policy.read_scopes)
    with pytest.raises(ValueError, match="not the condition's"):
        statements.compiled(
            ("leaky",), q, lambda cond: MemoryItem.objects.filter(cond, content="from a request")
        )
    # Declared markers are the only values a builder may add.
    mark = object()
    _sql, params = statements.compiled(
        ("marked",),
        q,
        lambda cond: MemoryItem.objects.filter(cond).annotate(x=RawSQL("%s", [mark])).values_list("id", "x"),
        markers=(mark,),
    )
    assert params.count(mark) == 1


def test_a_condition_with_an_expression_compiles_afresh_each_time(access):
    q = visible_q(access, access.policy.read_scopes) & Q(valid_from__lte=F("created_at"))
    build = lambda cond: MemoryItem.objects.filter(cond).values_list("id")  # noqa: E731
    assert statements.compiled(("expr",), q, build) == (
        build(q).query.sql_with_params()[0],
        list(build(q).query.sql_with_params()[1]),
    )
    assert statements.state(("expr",), q) == "uncached"


def test_a_naive_datetime_is_never_stood_in_for(access):
    q = Q(tenant_id=access.tenant_id, valid_from__lte=datetime(2026, 1, 1))
    assert statements.template(q) is None


def test_trace_of_a_foreign_item_is_still_404(world, as_agent):
    foreign = fact(system_access(world.foreign_agent), "Heavy fog caused the delay.", user_id="x")
    fact(system_access(world.agent), "Heavy rain caused the delay.")
    client = as_agent(world.agent)
    for _ in range(2):  # the second from the cached statement
        response = client.post(
            f"/v1/memory/agents/{world.agent.pk}/trace",
            {"item_id": str(foreign.pk), "direction": "causes"},
            format="json",
        )
        assert_error(response, 404)


def test_a_condition_with_more_values_than_stand_ins_compiles_afresh(access):
    q = Q(tenant_id=access.tenant_id, classification__in=list(range(2_500)))
    assert statements.template(q) is None
    build = lambda cond: MemoryItem.objects.filter(cond).values_list("id")  # noqa: E731
    _sql, params = statements.compiled(("many",), q, build)
    assert len(params) == 2_501


def test_any_lookup_reads_what_in_reads(access):
    items = [remember(access, f"Fact number {n} about the boiler.", scope="agent").item for n in range(4)]
    ids = [items[0].pk, str(items[2].pk), items[3].pk]
    by_in = set(MemoryItem.objects.filter(pk__in=ids).values_list("pk", flat=True))
    assert set(MemoryItem.objects.filter(pk__any=ids).values_list("pk", flat=True)) == by_in
    assert len(by_in) == 3
    assert not MemoryItem.objects.filter(pk__any=[]).exists()
    with pytest.raises(TypeError, match="list of values"):
        MemoryItem.objects.filter(pk__any=str(items[0].pk))


def test_an_array_condition_is_one_shape_whatever_its_length(access):
    build = lambda cond: MemoryItem.objects.filter(cond).values_list("id")  # noqa: E731
    shapes = set()
    for n in (1, 3, 40):
        ids = [uuid.uuid4() for _ in range(n)]
        q = Q(tenant_id=access.tenant_id, pk__any=ids)
        sql, params = statements.compiled(("array",), q, build)
        assert (sql, params) == (
            build(q).query.sql_with_params()[0],
            list(build(q).query.sql_with_params()[1]),
        )
        shapes.add(statements.template(q)[0].shape)
    assert len(shapes) == 1
    # An empty array holds no one's value: compiled afresh or bound, it reads nothing.
    q = Q(tenant_id=access.tenant_id, pk__any=[])
    assert statements.compiled(("array",), q, build)[1] == list(build(q).query.sql_with_params()[1])


def test_array_elements_are_bound_as_the_orm_sends_them(access):
    from core.vocabulary import Classification

    build = lambda cond: MemoryItem.objects.filter(cond).values_list("id")  # noqa: E731
    levels = list(Classification)
    cases = [
        ("enum members", Q(tenant_id=access.tenant_id, classification__any=levels)),
        ("members and ints", Q(tenant_id=access.tenant_id, classification__any=[levels[0], 3])),
        ("ids as text", Q(tenant_id=access.tenant_id, session_id__any=["s-1", "s-2"])),
    ]
    for purpose, q in cases:
        bound = statements.compiled((purpose,), q, build)
        assert bound == (build(q).query.sql_with_params()[0], list(build(q).query.sql_with_params()[1]))
        assert statements.state((purpose,), q) == "compiled"
        # An enumeration member is bound as the plain value the ORM would send.
        (array,) = [p for p in bound[1] if isinstance(p, list)]
        assert array and all(type(value) in (int, str) for value in array)
    # Elements of two kinds, or one no stand-in exists for, make no template.
    assert statements.template(Q(pk__any=[uuid.uuid4(), "text"])) is None
    assert statements.template(Q(session_id__any=["s-1", None])) is None
    assert statements.template(Q(classification__any=[1, True])) is None


def test_a_marker_equal_to_a_stand_in_leaves_the_shape_uncached(access):
    # The first stand-in of a condition whose first value is a UUID.
    clash = uuid.UUID(int=(statements._StandIns._base << 64) | 0)
    q = Q(tenant_id=access.tenant_id)
    build = lambda cond: MemoryItem.objects.filter(cond).values_list("id")  # noqa: E731
    assert statements.compiled(("clash",), q, build, markers=(clash,)) == (
        build(q).query.sql_with_params()[0],
        list(build(q).query.sql_with_params()[1]),
    )
    assert statements.state(("clash",), q) == "uncached"


def test_fetched_rows_are_the_querysets_rows(access):
    from memory.models import Mention
    from memory.retrieval import graphrank

    items = [fact(access, text, session_id=session) for session, text in INCIDENT]
    ids = [i.pk for i in items]
    entities = sorted(set(Mention.objects.filter(item_id__in=ids).values_list("entity_id", flat=True)))
    assert entities
    cases = [
        (("entity names",), Q(pk__any=entities), graphrank._entity_rows),
        (("item mentions",), Q(tenant_id=access.tenant_id, item_id__any=ids), graphrank._mention_rows),
        (
            ("item mentions named",),
            Q(tenant_id=access.tenant_id, item_id__any=ids),
            graphrank._named_mention_rows,
        ),
        (("cause spans",), Q(tenant_id=access.tenant_id, item_id__any=ids), graphrank._cause_span_rows),
    ]
    for purpose, cond, build in cases:
        expected = list(build(cond))
        assert expected, purpose
        for _ in range(2):  # compiled, then bound
            assert statements.fetch(purpose, cond, build) == expected, purpose
        assert statements.state(purpose, cond) == "compiled"
