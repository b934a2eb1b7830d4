"""zep: episodes, entity nodes and relationship edges through the official zep-cloud
client, against a local Zep v4 whose every answer conforms to the SDK's own models."""

from __future__ import annotations

import pytest

from providers import federation
from providers.adapters.base import AdapterError, CapabilityUnsupported, NewRecord
from providers.adapters.zep import ZepAdapter
from providers.tests.adapters.helpers import assert_contract, ctx, engine, key
from providers.tests.fakes.zep import API_KEY, ZepFake

ALICE = ZepAdapter.user_key(ctx())


@pytest.fixture
def zep():
    fake = ZepFake().start()
    # What Zep derives from episodes: a relationship edge and entity nodes.
    graph = fake.graphs[fake.add_user(ALICE)["graph_uuid"]]
    graph["edges"].append(
        {
            "uuid": "edge-1",
            "fact": "Alice works at Acme Robotics",
            "name": "WORKS_AT",
            "source_node_name": "Alice",
            "target_node_name": "Acme Robotics",
            "source_node_uuid": "n1",
            "target_node_uuid": "n2",
            "valid_at": "2025-01-01T00:00:00Z",
            "invalid_at": None,
            "created_at": "2026-01-01T00:00:00Z",
            "episode_uuids": ["ep-1"],
        }
    )
    graph["nodes"].append(
        {
            "uuid": "n2",
            "name": "Acme Robotics",
            "summary": "Acme Robotics builds warehouse robots where Alice works",
            "labels": ["Organization"],
            "episode_uuids": ["ep-1"],
            "episode_uuids_truncated": False,
        }
    )
    yield fake
    fake.stop()


def _adapter(fake, **options):
    return ZepAdapter(engine("zep", fake.url, **options), credential=key(API_KEY))


def test_writes_address_the_graph_by_its_uuid_never_the_developer_id():
    fake = ZepFake().start()
    try:
        result = _adapter(fake).perform("remember", ctx("remember"), record=NewRecord("Alice moved to Porto"))
        graph_uuid = fake.users[ALICE]["graph_uuid"]
        add = next(r for r in fake.server.requests if r.path.endswith("/episodes") and r.method == "POST")
        assert add.path == f"/api/v4/graphs/{graph_uuid}/episodes"
        assert [r.path for r in fake.server.requests][:2] == ["/api/v4/users/lookup", "/api/v4/users"]
        assert result.status == "queued" and result.handle == {"task_uuid": result.event_id}
        assert result.external_ids[0].startswith("episode:")
        assert fake.server.requests[0].headers["authorization"] == f"Api-Key {API_KEY}"
    finally:
        fake.stop()


def test_a_queued_add_settles_when_zeps_task_succeeds(zep):
    adapter = _adapter(zep)
    result = adapter.perform("remember", ctx("remember"), record=NewRecord("Alice moved to Porto"))
    assert adapter.check_write(ctx(), result.handle).status == "queued"
    zep.process()
    settled = adapter.check_write(ctx(), result.handle)
    assert settled.status == "settled" and settled.detail["task_status"] == "succeeded"


def test_a_failed_task_is_failed_with_zeps_reason(zep):
    adapter = _adapter(zep)
    result = adapter.perform("remember", ctx("remember"), record=NewRecord("Alice moved to Porto"))
    zep.fail_next = "episode exceeds the graph's size limit"
    zep.process()
    outcome = adapter.check_write(ctx(), result.handle)
    assert outcome.status == "failed" and outcome.reason == "episode exceeds the graph's size limit"


def test_recall_returns_edges_and_episodes_in_zeps_model(zep):
    adapter = _adapter(zep)
    adapter.perform("remember", ctx("remember"), record=NewRecord("Alice says she works at Acme on robots"))
    hits = adapter.perform("recall", ctx(), query="where does alice work", top_k=5)
    assert [h.kind for h in hits] == ["edge", "episode"]  # scopes take turns, each in Zep's order
    edge = hits[0]
    assert edge.text == "Alice works at Acme Robotics"
    assert edge.metadata["subject"] == "Alice" and edge.metadata["predicate"] == "WORKS_AT"
    assert edge.metadata["valid_at"] == "2025-01-01T00:00:00Z" and edge.metadata["invalid_at"] is None
    assert edge.provenance["episodes"] == "ep-1"
    assert_contract(adapter, hits)


def test_search_includes_entities_and_the_context_block(zep):
    adapter = _adapter(zep, include_context=True)
    hits = adapter.perform("search", ctx("search"), query="alice acme robots", top_k=5)
    assert [h.kind for h in hits][:3] == ["summary", "edge", "entity"]
    assert hits[2].text.startswith("Acme Robotics:")
    assert_contract(adapter, hits)


def test_a_user_zep_does_not_know_has_no_memory_and_no_404(zep):
    hits = _adapter(zep).perform("recall", ctx(user_id="nobody"), query="alice acme", top_k=5)
    assert hits == []
    searched = [r for r in zep.server.requests if "/search/" in r.path]
    assert searched == []  # never asks for a graph Zep would answer 404 for


def test_no_exact_key_semantics(zep):
    adapter = _adapter(zep)
    for operation in ("get", "update", "list"):
        with pytest.raises(CapabilityUnsupported):
            adapter.perform(operation, ctx(operation), external_id="edge:edge-1")
    with pytest.raises(AdapterError):
        adapter.perform("forget", ctx("forget"), external_id="edge:edge-1")


def test_forget_is_queued_until_zeps_delete_task_settles(zep):
    adapter = _adapter(zep)
    result = adapter.perform("remember", ctx("remember"), record=NewRecord("Temporary note"))
    zep.process()
    forgotten = adapter.perform("forget", ctx("forget"), external_id=result.external_ids[0])
    assert forgotten.status == "queued" and forgotten.handle["task_uuid"]
    assert len(zep.graph_of(ALICE)["episodes"]) == 1  # not gone until Zep's worker ran
    zep.process()
    assert adapter.check_write(ctx(), forgotten.handle).status == "settled"
    assert zep.graph_of(ALICE)["episodes"] == []


def test_forget_of_another_tenants_episode_is_not_found(zep):
    adapter = _adapter(zep)
    mine = adapter.perform("remember", ctx("remember"), record=NewRecord("Alice's private note"))
    other = ctx("forget", tenant_slug="globex")
    adapter.perform("remember", ctx("remember", tenant_slug="globex"), record=NewRecord("globex note"))
    with pytest.raises(AdapterError) as info:
        adapter.perform("forget", other, external_id=mine.external_ids[0])
    assert info.value.reason == "not_found"
    assert len(zep.graph_of(ALICE)["episodes"]) == 1


def test_tenants_and_scopes_map_to_different_zep_users(zep):
    assert _adapter(zep).perform("recall", ctx(tenant_slug="globex"), query="alice acme", top_k=5) == []
    keys = {
        ZepAdapter.user_key(ctx(tenant_slug=tenant, user_id=user))
        for tenant, user in [
            ("acme_corp", "a"),
            ("acme-corp", "a"),
            ("acme", "a.b@x.io"),
            ("acme", "a-b-x-io"),
        ]
    }
    assert len(keys) == 4
    # A user id that spells an agent's key is not that agent.
    assert ZepAdapter.user_key(ctx(user_id="a-bob")) != ZepAdapter.user_key(ctx(user_id=None, agent_id="bob"))


def test_health_and_bad_key(zep):
    assert _adapter(zep).perform("get_health", ctx("get_health")).status == "ok"
    adapter = ZepAdapter(engine("zep", zep.url), credential=key("nope"))
    with pytest.raises(AdapterError) as info:
        adapter.perform("recall", ctx(), query="x", top_k=3)
    assert info.value.reason == "auth_refused"


def test_zep_edges_that_disagree_are_flagged_in_federation(zep):
    zep.graph_of(ALICE)["edges"].append(
        {
            "uuid": "edge-2",
            "fact": "Alice works at Globex",
            "name": "WORKS_AT",
            "source_node_name": "Alice",
            "target_node_name": "Globex",
            "valid_at": "2026-02-01T00:00:00Z",
            "invalid_at": None,
        }
    )
    source = federation.AdapterSource(_adapter(zep, recall_scopes=["edges"]), ctx())
    result = federation.federated_recall([source], query="where does alice work", top_k=5, timeout_ms=5000)
    assert result["status"] == "ok"
    assert all(group["conflict"] for group in result["results"])


def test_the_fake_refuses_a_field_zep_never_sends(zep):
    from zep_cloud.types import Episode

    from providers.tests.servers import SchemaViolation, conform

    with pytest.raises(SchemaViolation):
        conform(Episode, {"uuid": "e1", "content": "x", "group_id": "acme"})
