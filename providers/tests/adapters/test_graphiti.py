"""graphiti: temporal facts, episodes and lineage through the default HTTP transport
against a local server written from the Graphiti REST service, and through a
caller-owned transport."""

from __future__ import annotations

import pytest

from providers.adapters.base import AdapterError, NewRecord
from providers.adapters.graphiti import GraphitiAdapter
from providers.tests.adapters.helpers import assert_contract, ctx, engine
from providers.tests.servers import LocalServer, Resp

FACTS = [
    {
        "uuid": "f-1",
        "name": "LIVES_IN",
        "fact": "Alice lives in Porto",
        "valid_at": "2026-02-01T00:00:00Z",
        "invalid_at": None,
        "created_at": "2026-02-01T00:00:00Z",
        "expired_at": None,
        "group_id": "acme__alice",
    },
    {
        "uuid": "f-0",
        "name": "LIVES_IN",
        "fact": "Alice lives in Lisbon",
        "valid_at": "2024-01-01T00:00:00Z",
        "invalid_at": "2026-02-01T00:00:00Z",
        "created_at": "2024-01-01T00:00:00Z",
        "expired_at": "2026-02-02T00:00:00Z",
        "group_id": "acme__alice",
    },
]


def graphiti_server() -> tuple[LocalServer, dict]:
    server = LocalServer().start()
    state: dict = {
        "messages": [],
        "episodes": [
            {
                "uuid": "ep-1",
                "name": "chat-1",
                "group_id": "acme__alice",
                "content": "user: I moved to Porto",
                "source": "message",
                "source_description": "chat",
                "created_at": "2026-02-01T00:00:00Z",
                "valid_at": "2026-02-01T00:00:00Z",
                "entity_edges": ["f-1"],
                "labels": [],
            }
        ],
        "facts": {f["uuid"]: dict(f) for f in FACTS},
        "deleted": [],
    }

    def search(req):
        body = req.json
        assert set(body) == {"group_ids", "query", "max_facts"}
        facts = [f for f in state["facts"].values() if f["group_id"] in body["group_ids"]]
        facts = [{k: v for k, v in f.items() if k != "group_id"} for f in facts]
        return Resp(200, {"facts": facts[: body["max_facts"]]})

    def add(req):
        state["messages"].append(req.json)
        return Resp(202, {"message": "Messages added to processing queue", "success": True})

    def episodes(req):
        found = [e for e in state["episodes"] if e["group_id"] == req.params["group"]]
        return Resp(200, found[: int(req.arg("last_n", "10"))])

    def edge(req):
        fact = state["facts"].get(req.params["uuid"])
        return Resp(200, fact) if fact else Resp(404, {"detail": "Entity edge not found"})

    def deleted(kind):
        def handler(req):
            state["deleted"].append((kind, next(iter(req.params.values()))))
            return Resp(200, {"message": f"{kind} deleted", "success": True})

        return handler

    server.route("GET", "/healthcheck", lambda req: Resp(200, {"status": "healthy"}))
    server.route("POST", "/messages", add)
    server.route("POST", "/search", search)
    server.route("GET", "/episodes/(?P<group>[^/]+)", episodes)
    server.route("GET", "/entity-edge/(?P<uuid>[^/]+)", edge)
    server.route("DELETE", "/entity-edge/(?P<uuid>[^/]+)", deleted("edge"))
    server.route("DELETE", "/episode/(?P<uuid>[^/]+)", deleted("episode"))
    server.route("DELETE", "/group/(?P<group>[^/]+)", deleted("group"))
    return server, state


@pytest.fixture
def graphiti():
    server, state = graphiti_server()
    yield server, state
    server.stop()


def test_facts_keep_their_validity_windows(graphiti):
    server, _ = graphiti
    adapter = GraphitiAdapter(engine("graphiti", server.url))
    hits = adapter.perform("recall", ctx(), query="where does alice live", top_k=5)
    assert [h.text for h in hits] == ["Alice lives in Porto", "Alice lives in Lisbon"]
    current, retired = hits
    assert current.kind == "fact" and current.metadata["invalid_at"] is None
    assert retired.metadata["invalid_at"] == "2026-02-01T00:00:00Z"
    assert retired.metadata["expired_at"] == "2026-02-02T00:00:00Z"
    assert_contract(adapter, hits)
    assert server.requests[-1].json["group_ids"] == ["acme__alice"]


def test_writes_are_queued_episodes(graphiti):
    server, state = graphiti
    adapter = GraphitiAdapter(engine("graphiti", server.url))
    result = adapter.perform("remember", ctx("remember"), record=NewRecord("I moved to Porto"))
    assert result.status == "queued"
    message = state["messages"][0]
    assert message["group_id"] == "acme__alice" and message["messages"][0]["role_type"] == "user"


def test_episodes_carry_their_lineage(graphiti):
    server, _ = graphiti
    adapter = GraphitiAdapter(engine("graphiti", server.url))
    episodes = adapter.perform("list", ctx("list"), limit=5)
    assert episodes[0].kind == "episode" and episodes[0].provenance["entity_edges"] == "f-1"
    assert_contract(adapter, episodes)


def test_get_forget_purge(graphiti):
    server, state = graphiti
    adapter = GraphitiAdapter(engine("graphiti", server.url))
    assert adapter.perform("get", ctx("get"), external_id="fact:f-1").text == "Alice lives in Porto"
    with pytest.raises(AdapterError):
        adapter.perform("get", ctx("get", user_id="bob"), external_id="fact:f-1")
    adapter.perform("forget", ctx("forget"), external_id="episode:ep-1")
    adapter.perform("forget", ctx("forget"), external_id="fact:f-0")
    adapter.perform("purge", ctx("purge"))
    assert state["deleted"] == [("episode", "ep-1"), ("edge", "f-0"), ("group", "acme__alice")]
    assert adapter.perform("get_health", ctx("get_health")).status == "ok"


class InProcessGraphiti:
    """A caller-owned transport, as an application embedding graphiti_core would write one."""

    def __init__(self):
        self.facts = [dict(FACTS[0], episodes=["ep-1", "ep-2"])]

    def health(self):
        return {"status": "healthy"}

    def search(self, group_id, query, max_facts):
        return [f for f in self.facts if f["group_id"] == group_id][:max_facts]


def test_a_caller_owned_transport_supplies_episode_lineage():
    adapter = GraphitiAdapter(engine("graphiti"), transport=InProcessGraphiti())
    hits = adapter.perform("recall", ctx(), query="alice", top_k=3)
    assert hits[0].provenance["episodes"] == "ep-1,ep-2"
    assert adapter.perform("recall", ctx(tenant_slug="globex"), query="alice", top_k=3) == []
