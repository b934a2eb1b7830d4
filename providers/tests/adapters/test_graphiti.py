"""graphiti: temporal facts, episodes and lineage through the default HTTP transport
against a local Graphiti service speaking its own DTOs, and through a caller-owned
transport."""

from __future__ import annotations

import pytest

from providers import federation
from providers.adapters.base import AdapterError, NewRecord
from providers.adapters.graphiti import GraphitiAdapter
from providers.tests.adapters.helpers import assert_contract, ctx, engine
from providers.tests.fakes.graphiti import GraphitiFake

ALICE = GraphitiAdapter.group_id(ctx())
FACTS = [
    {
        "uuid": "f-1",
        "name": "LIVES_IN",
        "fact": "Alice lives in Porto",
        "valid_at": "2026-02-01T00:00:00Z",
        "invalid_at": None,
        "created_at": "2026-02-01T00:00:00Z",
        "expired_at": None,
    },
    {
        "uuid": "f-0",
        "name": "LIVES_IN",
        "fact": "Alice lives in Lisbon",
        "valid_at": "2024-01-01T00:00:00Z",
        "invalid_at": "2026-02-01T00:00:00Z",
        "created_at": "2024-01-01T00:00:00Z",
        "expired_at": "2026-02-02T00:00:00Z",
    },
]


@pytest.fixture
def graphiti():
    fake = GraphitiFake().start()
    fake.seed_episode(ALICE, "user: I moved to Porto", FACTS, uuid="ep-1")
    yield fake
    fake.stop()


def _adapter(fake):
    return GraphitiAdapter(engine("graphiti", fake.url))


def test_facts_keep_their_validity_windows(graphiti):
    adapter = _adapter(graphiti)
    hits = adapter.perform("recall", ctx(), query="where does alice live", top_k=5)
    assert [h.text for h in hits] == ["Alice lives in Porto", "Alice lives in Lisbon"]
    current, retired = hits
    assert current.kind == "fact" and current.metadata["invalid_at"] is None
    assert retired.metadata["invalid_at"] == "2026-02-01T00:00:00Z"
    assert retired.metadata["expired_at"] == "2026-02-02T00:00:00Z"
    assert_contract(adapter, hits)
    assert graphiti.requests[-1].json["group_ids"] == [ALICE]


def test_a_retired_fact_is_history_not_a_contradiction(graphiti):
    source = federation.AdapterSource(_adapter(graphiti), ctx())
    result = federation.federated_recall([source], query="where does alice live", top_k=5, timeout_ms=5000)
    assert [g["conflict"] for g in result["results"]] == [None, None]


def test_writes_send_a_uuid_and_settle_when_the_episode_appears(graphiti):
    adapter = _adapter(graphiti)
    result = adapter.perform("remember", ctx("remember"), record=NewRecord("I moved to Porto"))
    assert result.status == "queued" and result.external_ids == [f"episode:{result.event_id}"]
    sent = next(r for r in graphiti.requests if r.path == "/messages").json
    assert sent["group_id"] == ALICE and sent["messages"][0]["uuid"] == result.event_id
    assert adapter.check_write(ctx(), result.handle).status == "queued"
    graphiti.process()
    assert adapter.check_write(ctx(), result.handle).status == "settled"
    assert adapter.check_write(ctx(tenant_slug="globex"), result.handle).status == "failed"


def test_episodes_carry_their_lineage(graphiti):
    adapter = _adapter(graphiti)
    episodes = adapter.perform("list", ctx("list"), limit=5)
    assert episodes[0].kind == "episode" and episodes[0].provenance["entity_edges"] == "f-1,f-0"
    assert_contract(adapter, episodes)


def test_get_forget_purge(graphiti):
    adapter = _adapter(graphiti)
    assert adapter.perform("get", ctx("get"), external_id="fact:f-1").text == "Alice lives in Porto"
    adapter.perform("forget", ctx("forget"), external_id="fact:f-0")
    adapter.perform("forget", ctx("forget"), external_id="episode:ep-1")
    adapter.perform("purge", ctx("purge"))
    assert graphiti.deleted == [("edge", "f-0"), ("episode", "ep-1"), ("group", ALICE)]
    assert adapter.perform("get_health", ctx("get_health")).status == "ok"


def test_another_groups_fact_or_episode_is_not_found(graphiti):
    adapter = _adapter(graphiti)
    for other in (ctx(user_id="bob"), ctx(tenant_slug="globex")):
        for operation, external_id in (
            ("get", "fact:f-1"),
            ("forget", "fact:f-1"),
            ("forget", "episode:ep-1"),
        ):
            with pytest.raises(AdapterError) as info:
                adapter.perform(operation, other.for_operation(operation), external_id=external_id)
            assert info.value.reason == "not_found"
    assert graphiti.deleted == []


def test_group_ids_never_collide():
    pairs = [
        (ctx(tenant_slug="acme_corp"), ctx(tenant_slug="acme-corp")),
        (ctx(user_id="a.b@x.io"), ctx(user_id="a-b-x-io")),
        (ctx(tenant_slug="acme", user_id="evil"), ctx(tenant_slug="acme__evil")),
        (ctx(user_id="a-bob"), ctx(user_id=None, agent_id="bob")),
    ]
    for one, two in pairs:
        assert GraphitiAdapter.group_id(one) != GraphitiAdapter.group_id(two)
    import re

    assert re.fullmatch(r"[A-Za-z0-9_-]+", GraphitiAdapter.group_id(ctx(user_id="a.b@x.io")))


class InProcessGraphiti:
    """A caller-owned transport, as an application embedding graphiti_core would write one."""

    def __init__(self):
        self.facts = {ALICE: [dict(FACTS[0], episodes=["ep-1", "ep-2"])]}

    def health(self):
        return {"status": "healthy"}

    def search(self, group_id, query, max_facts):
        return self.facts.get(group_id, [])[:max_facts]


def test_a_caller_owned_transport_supplies_episode_lineage():
    adapter = GraphitiAdapter(engine("graphiti"), transport=InProcessGraphiti())
    hits = adapter.perform("recall", ctx(), query="alice", top_k=3)
    assert hits[0].provenance["episodes"] == "ep-1,ep-2"
    assert adapter.perform("recall", ctx(tenant_slug="globex"), query="alice", top_k=3) == []
