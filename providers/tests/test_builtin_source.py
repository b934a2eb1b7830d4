"""fedmem's own memory as a federated recall source, next to provider engines."""

from __future__ import annotations

import pytest

from providers.tests.engines import custom_engine, declare

pytestmark = pytest.mark.django_db(transaction=True)  # sources run on their own threads and connections


def url(agent) -> str:
    return f"/v1/memory/agents/{agent.pk}/federated/recall"


def remember(client, agent, content: str, **fields) -> None:
    body = {"content": content, "scope": "agent", **fields}
    response = client.post(f"/v1/memory/agents/{agent.pk}/memories", body, format="json")
    assert response.status_code == 201, response.content


def test_builtin_memory_is_fused_with_provider_engines(world, local_server, as_agent):
    client = as_agent(world.agent)
    remember(client, world.agent, "Alice prefers green tea")
    remember(client, world.agent, "The deploy on Friday failed because the cache was cold")
    remember(as_agent(world.sibling), world.sibling, "Alice prefers coffee")  # another agent's memory
    engine = custom_engine(
        [{"id": "m1", "kind": "fact", "text": "alice prefers green tea.", "score": 7.5}],
        server=local_server(),
    )
    # A shared custom engine guarantees logical isolation only when it says so; the
    # default policy requires logical.
    declare("mem-a", engine.url, options={"shared_isolation": "logical"})

    body = client.post(
        url(world.agent), {"query": "what does Alice prefer", "top_k": 5}, format="json"
    ).json()
    assert body["status"] == "ok"
    sources = {s["engine_id"]: s for s in body["sources"]}
    assert sources["builtin"]["status"] == "ok" and sources["builtin"]["count"] >= 1
    top = body["results"][0]
    assert top["text"].lower().startswith("alice prefers green tea")
    assert {m["engine_id"] for m in top["matches"]} == {"builtin", "mem-a"}
    builtin_match = next(m for m in top["matches"] if m["engine_id"] == "builtin")
    assert builtin_match["provider_id"] == "builtin" and builtin_match["kind"] == "fact"
    assert builtin_match["metadata"]["scope"] == "agent"
    # Another agent's memory never comes through this agent's builtin source.
    assert all("coffee" not in group["text"] for group in body["results"])


def test_builtin_alone_and_named_explicitly(world, as_agent):
    client = as_agent(world.agent)
    remember(client, world.agent, "Invoices are sent on the first business day")
    body = client.post(
        url(world.agent), {"query": "when are invoices sent", "engines": ["builtin"]}, format="json"
    )
    assert body.status_code == 200
    data = body.json()
    assert [s["engine_id"] for s in data["sources"]] == ["builtin"]
    assert data["results"][0]["matches"][0]["external_id"]


def test_builtin_respects_the_tenant_boundary(world, as_agent):
    remember(as_agent(world.foreign_agent), world.foreign_agent, "Globex secret roadmap item")
    data = as_agent(world.agent).post(url(world.agent), {"query": "Globex roadmap"}, format="json").json()
    assert all("Globex" not in group["text"] for group in data["results"])
