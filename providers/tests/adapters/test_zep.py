"""zep: episodes, entity nodes and relationship edges through the official zep-cloud
client, against a local server written from Zep's published v4 graph API."""

from __future__ import annotations

import itertools
from urllib.parse import unquote

import pytest

from providers import federation
from providers.adapters.base import AdapterError, CapabilityUnsupported, NewRecord
from providers.adapters.zep import ZepAdapter
from providers.tests.adapters.helpers import assert_contract, ctx, engine, key
from providers.tests.servers import LocalServer, Resp

API_KEY = "z-test-key"


def zep_server() -> tuple[LocalServer, dict]:
    server = LocalServer().start()
    state: dict = {"users": {}, "episodes": {}, "edges": {}, "nodes": {}}
    ids = itertools.count(1)

    def uuid(prefix: str) -> str:
        return f"{prefix}-0000-4000-8000-{next(ids):012d}"

    def authed(handler):
        def wrapped(req):
            if req.headers.get("authorization") != f"Api-Key {API_KEY}":
                return Resp(401, {"message": "unauthorized"})
            req.params = {k: unquote(v) for k, v in req.params.items()}
            return handler(req)

        return wrapped

    def add_user(req):
        body = req.json
        state["users"][body["user_id"]] = True
        return Resp(
            201,
            {
                "uuid": uuid("u"),
                "user_id": body["user_id"],
                "graph_uuid": body["user_id"],
                "created_at": "2026-03-01T10:00:00Z",
                "metadata": body.get("metadata"),
            },
        )

    def add_episode(req):
        graph = req.params["graph"]
        if graph not in state["users"]:
            return Resp(404, {"message": "not found"})
        body = req.json
        episode = {
            "uuid": uuid("e"),
            "content": body["data"],
            "created_at": "2026-03-01T10:00:00Z",
            "processed": False,
            "source": body.get("type", "text"),
            "graph_uuid": graph,
            "metadata": body.get("metadata"),
        }
        state["episodes"].setdefault(graph, []).append(episode)
        return Resp(
            202,
            {
                "episode": episode,
                "task": {"uuid": uuid("t"), "status": "pending", "type": "add_episode"},
            },
        )

    def delete_episode(req):
        episodes = state["episodes"].get(req.params["graph"], [])
        state["episodes"][req.params["graph"]] = [e for e in episodes if e["uuid"] != req.params["episode"]]
        return Resp(202, {"message": "deleted", "task_uuid": uuid("t")})

    def search(kind):
        def handler(req):
            graph = req.params["graph"]
            words = set(req.json["query"].lower().split())
            items = state[kind].get(graph, [])
            field = {"edges": "fact", "nodes": "summary", "episodes": "content"}[kind]
            scored = []
            for item in items:
                overlap = len(words & set((item.get(field) or "").lower().split()))
                if overlap:
                    scored.append({**item, "score": overlap / len(words)})
            scored.sort(key=lambda i: -i["score"])
            return Resp(200, {"items": scored[: int(req.arg("page_size", "10"))], "next_cursor": None})

        return handler

    def context(req):
        graph = req.params["graph"]
        facts = [e["fact"] for e in state["edges"].get(graph, [])]
        return Resp(200, {"context": "FACTS:\n" + "\n".join(facts), "truncated": False})

    base = "/api/v4"
    server.route("POST", f"{base}/users", authed(add_user))
    server.route(
        "POST",
        f"{base}/graphs/list",
        authed(lambda req: Resp(200, {"items": [], "next_cursor": None})),
    )
    server.route("POST", f"{base}/graphs/(?P<graph>[^/]+)/episodes", authed(add_episode))
    server.route(
        "DELETE",
        f"{base}/graphs/(?P<graph>[^/]+)/episodes/(?P<episode>[^/]+)",
        authed(delete_episode),
    )
    for kind in ("edges", "nodes", "episodes"):
        server.route("POST", f"{base}/graphs/(?P<graph>[^/]+)/search/{kind}", authed(search(kind)))
    server.route("POST", f"{base}/graphs/(?P<graph>[^/]+)/context", authed(context))
    return server, state


@pytest.fixture
def zep():
    server, state = zep_server()
    # What Zep derives from episodes: a relationship edge and entity nodes.
    state["edges"]["acme:alice"] = [
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
        },
    ]
    state["nodes"]["acme:alice"] = [
        {
            "uuid": "n2",
            "name": "Acme Robotics",
            "summary": "Acme Robotics builds warehouse robots where Alice works",
            "labels": ["Organization"],
            "episode_uuids": ["ep-1"],
            "episode_uuids_truncated": False,
        },
    ]
    yield server, state
    server.stop()


def _adapter(server, **options):
    return ZepAdapter(engine("zep", f"{server.url}/api/v4", **options), credential=key(API_KEY))


def test_remember_is_queued_with_zeps_task_and_creates_the_user(zep):
    server, state = zep
    result = _adapter(server).perform("remember", ctx("remember"), record=NewRecord("Alice moved to Porto"))
    assert result.status == "queued" and result.event_id.startswith("t-")
    assert result.external_ids[0].startswith("episode:e-")
    assert "acme:alice" in state["users"]
    assert server.requests[0].headers["authorization"] == f"Api-Key {API_KEY}"


def test_recall_returns_edges_and_episodes_in_zeps_model(zep):
    server, _ = zep
    adapter = _adapter(server)
    adapter.perform("remember", ctx("remember"), record=NewRecord("Alice says she works at Acme on robots"))
    hits = adapter.perform("recall", ctx(), query="where does alice work", top_k=5)
    kinds = [h.kind for h in hits]
    assert kinds == ["edge", "episode"]  # scopes take turns, each in Zep's own order
    edge = hits[0]
    assert edge.text == "Alice works at Acme Robotics"
    assert edge.metadata["subject"] == "Alice" and edge.metadata["predicate"] == "WORKS_AT"
    assert edge.metadata["valid_at"] == "2025-01-01T00:00:00Z" and edge.metadata["invalid_at"] is None
    assert edge.provenance["episodes"] == "ep-1"
    assert_contract(adapter, hits)


def test_search_includes_entities_and_the_context_block(zep):
    server, _ = zep
    adapter = _adapter(server, include_context=True)
    hits = adapter.perform("search", ctx("search"), query="alice acme robots", top_k=5)
    assert [h.kind for h in hits][:3] == ["summary", "edge", "entity"]
    assert hits[2].text.startswith("Acme Robotics:")
    assert_contract(adapter, hits)


def test_no_exact_key_semantics(zep):
    server, _ = zep
    adapter = _adapter(server)
    for operation in ("get", "update", "list"):
        with pytest.raises(CapabilityUnsupported):
            adapter.perform(operation, ctx(operation), external_id="edge:edge-1")
    with pytest.raises(AdapterError):
        adapter.perform("forget", ctx("forget"), external_id="edge:edge-1")


def test_forget_deletes_an_episode(zep):
    server, state = zep
    adapter = _adapter(server)
    result = adapter.perform("remember", ctx("remember"), record=NewRecord("Temporary note"))
    adapter.perform("forget", ctx("forget"), external_id=result.external_ids[0])
    assert state["episodes"]["acme:alice"] == []


def test_tenants_map_to_different_zep_users(zep):
    server, _ = zep
    assert _adapter(server).perform("recall", ctx(tenant_slug="globex"), query="alice acme", top_k=5) == []


def test_health_and_bad_key(zep):
    server, _ = zep
    assert _adapter(server).perform("get_health", ctx("get_health")).status == "ok"
    adapter = ZepAdapter(engine("zep", f"{server.url}/api/v4"), credential=key("nope"))
    with pytest.raises(AdapterError) as info:
        adapter.perform("recall", ctx(), query="x", top_k=3)
    assert info.value.reason == "auth_refused"


def test_zep_edges_that_disagree_are_flagged_in_federation(zep):
    server, state = zep
    state["edges"]["acme:alice"].append(
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
    source = federation.AdapterSource(_adapter(server, recall_scopes=["edges"]), ctx())
    result = federation.federated_recall([source], query="where does alice work", top_k=5, timeout_ms=5000)
    assert result["status"] == "ok"
    assert all(group["conflict"] for group in result["results"])
