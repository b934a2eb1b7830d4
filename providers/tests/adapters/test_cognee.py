"""cognee: datasets, cognify, search types, relations, delete — raw HTTP (there is no
separate official client) against a local server written from Cognee's REST API."""

from __future__ import annotations

import time

import pytest

from providers.adapters.base import AdapterError, CapabilityUnsupported
from providers.adapters.cognee import CogneeAdapter
from providers.tests.adapters.helpers import assert_contract, ctx, engine, key
from providers.tests.fakes.cognee import EMAIL, PASSWORD, STATIC_TOKEN, CogneeFake, jwt


@pytest.fixture
def cognee():
    fake = CogneeFake().start()
    yield fake, fake
    fake.stop()


def _adapter(server, **options):
    return CogneeAdapter(engine("cognee", server.url, **options), credential=key(STATIC_TOKEN))


def test_ingest_cognify_search_relations_delete(cognee):
    server, state = cognee
    adapter = _adapter(server)
    result = adapter.perform(
        "ingest_knowledge",
        ctx("ingest_knowledge"),
        dataset="handbook",
        documents=["Alice leads the robotics team", "The robotics team is based in Porto"],
    )
    assert result.status == "settled"
    assert [d["name"] for d in state.datasets.values()] == ["acme-handbook"]
    built = adapter.perform("build_graph", ctx("build_graph"), dataset="handbook")
    assert built.status == "queued" and built.event_id

    chunks = adapter.perform("recall", ctx(), query="who leads robotics", top_k=5)
    assert [h.text for h in chunks] == [
        "Alice leads the robotics team",
        "The robotics team is based in Porto",
    ]
    assert chunks[0].kind == "document" and chunks[0].provenance["dataset"] == "handbook"
    assert_contract(adapter, chunks)

    answer = adapter.perform(
        "search_graph",
        ctx("search_graph"),
        query="who leads robotics",
        top_k=3,
        dataset="handbook",
        search_type="GRAPH_COMPLETION",
    )
    assert answer[0].kind == "summary" and answer[0].text == "Alice leads the robotics team."

    relations = adapter.perform("get_relations", ctx("get_relations"), external_id="node:handbook:n1")
    assert sorted(h.text for h in relations) == [
        "Alice leads Robotics team",
        "Alice lives_in Porto",
    ]
    assert relations[0].metadata["subject"] == "Alice"
    assert_contract(adapter, relations)

    adapter.perform("delete_dataset", ctx("delete_dataset"), dataset="handbook")
    assert state.datasets == {}


def test_a_tenant_only_reaches_its_own_datasets(cognee):
    server, _ = cognee
    adapter = _adapter(server)
    adapter.perform(
        "ingest_knowledge",
        ctx("ingest_knowledge"),
        dataset="handbook",
        documents=["Alice leads robotics"],
    )
    globex = ctx(tenant_slug="globex")
    assert adapter.perform("recall", globex, query="alice robotics", top_k=5) == []
    with pytest.raises(AdapterError) as info:
        adapter.perform("delete_dataset", ctx("delete_dataset", tenant_slug="globex"), dataset="handbook")
    assert info.value.reason == "not_found"
    searches = [r for r in server.requests if r.path == "/api/v1/search"]
    assert searches == []  # no unscoped search was ever sent


def test_cognee_is_knowledge_not_a_memory_store(cognee):
    server, _ = cognee
    adapter = _adapter(server)
    announcement = adapter.announcement()
    assert set(announcement["capabilities"]["knowledge"]) == {
        "ingest_knowledge",
        "build_graph",
        "search_graph",
        "get_relations",
        "delete_dataset",
    }
    for operation in ("remember", "update", "forget"):
        with pytest.raises(CapabilityUnsupported):
            adapter.perform(operation, ctx(operation))
    assert adapter.perform("get_health", ctx("get_health")).status == "ok"


def test_search_types_are_cognees_current_ones(cognee):
    server, _ = cognee
    adapter = _adapter(server)
    for gone in ("INSIGHTS", "CYPHER"):
        with pytest.raises(AdapterError):
            adapter.perform("search_graph", ctx("search_graph"), query="x", top_k=3, search_type=gone)
    with pytest.raises(ValueError):
        CogneeAdapter.validate_options({"recall_search_type": "INSIGHTS"})
    CogneeAdapter.validate_options({"recall_search_type": "GRAPH_COMPLETION_COT"})


def test_every_dataset_name_the_slug_rules_allow_is_accepted(cognee):
    server, state = cognee
    adapter = _adapter(server)
    adapter.perform("ingest_knowledge", ctx("ingest_knowledge"), dataset="a__b", documents=["x"])
    assert [d["name"] for d in state.datasets.values()] == ["acme-a_5f_5fb"]


def test_a_tenant_slug_that_extends_another_reaches_none_of_its_datasets(cognee):
    """acme__evil may not read acme's datasets (nor acme those of acme__evil)."""
    server, _ = cognee
    adapter = _adapter(server)
    adapter.perform(
        "ingest_knowledge", ctx("ingest_knowledge"), dataset="handbook", documents=["acme secret plan"]
    )
    evil = ctx(tenant_slug="acme__evil")
    adapter.perform(
        "ingest_knowledge", evil.for_operation("ingest_knowledge"), dataset="x", documents=["evil plan"]
    )
    assert [h.text for h in adapter.perform("recall", evil, query="secret plan", top_k=5)] == ["evil plan"]
    assert [h.text for h in adapter.perform("recall", ctx(), query="evil plan", top_k=5)] == [
        "acme secret plan"
    ]
    with pytest.raises(AdapterError) as info:
        adapter.perform("delete_dataset", evil.for_operation("delete_dataset"), dataset="handbook")
    assert info.value.reason == "not_found"


def test_cognify_is_followed_until_cognee_says_completed_or_errored(cognee):
    server, state = cognee
    adapter = _adapter(server)
    adapter.perform("ingest_knowledge", ctx("ingest_knowledge"), dataset="handbook", documents=["Alice"])
    built = adapter.perform("build_graph", ctx("build_graph"), dataset="handbook")
    assert adapter.check_write(ctx(), built.handle).status == "queued"
    state.process()
    assert adapter.check_write(ctx(), built.handle).status == "settled"
    again = adapter.perform("build_graph", ctx("build_graph"), dataset="handbook")
    state.fail_next = True
    state.process()
    failed = adapter.check_write(ctx(), again.handle)
    assert failed.status == "failed" and "errored" in failed.reason
    with pytest.raises(AdapterError) as info:
        adapter.check_write(ctx(tenant_slug="globex"), built.handle)
    assert info.value.reason == "not_found"


def test_login_tokens_are_renewed_when_cognee_refuses_them(cognee):
    server, state = cognee
    adapter = CogneeAdapter(engine("cognee", server.url, auth="login"), credential=key(f"{EMAIL}:{PASSWORD}"))
    adapter.perform("ingest_knowledge", ctx("ingest_knowledge"), dataset="handbook", documents=["Alice"])
    adapter.perform("recall", ctx(), query="alice", top_k=3)
    assert state.logins == 1  # one sign-in, reused
    state.expire_tokens()  # an hour later
    assert [h.text for h in adapter.perform("recall", ctx(), query="alice", top_k=3)] == ["Alice"]
    assert state.logins == 2


def test_an_expired_bearer_jwt_is_reported_not_sent(cognee):
    server, _ = cognee
    adapter = CogneeAdapter(engine("cognee", server.url), credential=key(jwt(time.time() - 10)))
    with pytest.raises(AdapterError) as info:
        adapter.perform("recall", ctx(), query="alice", top_k=3)
    assert info.value.reason == "credential_expired" and info.value.retryable is False
    assert server.requests == []
