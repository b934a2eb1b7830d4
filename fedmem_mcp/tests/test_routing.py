"""The remember tool takes REST's path through engine routing: under a mem0 / hybrid
policy the write goes to Mem0 (queued, never stored twice), session memory stays
builtin, and the policy refuses before anything leaves. Against the local
protocol-faithful Mem0 server of the routing tests, through the server's call path."""

from __future__ import annotations

import pytest

from fedmem_mcp.server import ToolError, framed_result, run_tool
from fedmem_mcp.tools import REGISTRY
from governance.models import ApiKey
from governance.permissions import AgentPrincipal
from governance.tests import factories as f
from memory.models import MemoryItem
from providers.tests import conftest as providers_conftest
from providers.tests import test_routing as routing
from providers.tests.test_routing import memories_url, use

# The routing tests' local Mem0 / Cognee servers, and the loopback-over-HTTP settings they need.
engines_up = routing.engines_up
_engines_settings = providers_conftest._engines_settings


@pytest.fixture
def call(world):
    f.agent_key(world.agent)
    key = ApiKey.objects.get(agent=world.agent)
    principal = AgentPrincipal(world.agent, key)

    def run(name: str, **arguments):
        return run_tool(REGISTRY[name], principal, key, arguments)

    return run


def _adds(engines_up) -> list:
    return [r for r in engines_up["mem0"].requests if r.path == "/v3/memories/add/"]


@pytest.mark.parametrize("engine", ["mem0", "hybrid"])
def test_remember_goes_to_mem0_like_rest(world, engines_up, call, as_agent, engine):
    use(world.agent, engine, mem0_instance="mem0-eu", cognee_instance="cognee-eu")
    body = call("remember", content="Alice prefers green tea", user_id="cust-1")
    assert body["engine"]["engine_id"] == "mem0-eu" and body["engine"]["status"] == "queued"
    assert body["engine"]["event_id"]
    assert not MemoryItem.objects.exists()  # Mem0 holds it; not stored twice
    [add] = _adds(engines_up)
    # One entity id per Mem0 write (Mem0 matches ids strictly); the agent rides in metadata.
    assert add.json["filters"] == {"user_id": "acme:cust-1"}
    assert add.json["metadata"]["fedmem_agent"] == str(world.agent.pk)
    assert framed_result(REGISTRY["remember"], body).structured_content == body

    rest = as_agent(world.agent).post(
        memories_url(world.agent), {"content": "Bob prefers coffee", "user_id": "cust-1"}, format="json"
    )
    assert rest.status_code == 202
    assert set(rest.json()) == set(body) and set(rest.json()["engine"]) == set(body["engine"])
    assert len(_adds(engines_up)) == 2 and not MemoryItem.objects.exists()


def test_split_sends_one_write_per_sentence(world, engines_up, call):
    use(world.agent, "mem0", mem0_instance="mem0-eu")
    body = call("remember", content="Alice moved to Porto. She works at the port.", user_id="c", split=True)
    assert [r["status"] for r in body["results"]] == ["queued", "queued"] and body["queued"] == 2
    engines_up["mem0"].process()  # the local platform, like Mem0's, stores queued adds later
    assert {m["memory"] for m in engines_up["memories"].values()} >= {
        "Alice moved to Porto.", "She works at the port.",
    }  # fmt: skip
    assert not MemoryItem.objects.exists()


def test_session_memory_stays_builtin(world, engines_up, call):
    use(world.agent, "hybrid", mem0_instance="mem0-eu", cognee_instance="cognee-eu")
    body = call("remember", content="Call me back at 5", scope="session", session_id="s1")
    assert MemoryItem.objects.get(pk=body["id"]).scope == "session"
    assert not _adds(engines_up)


def test_the_policy_refuses_before_anything_leaves(world, engines_up, call):
    use(world.agent, "mem0", mem0_instance="mem0-eu")
    with pytest.raises(ToolError) as refused:
        call("remember", content="x", classification="restricted", user_id="c")
    assert refused.value.body["error"]["code"] == "memory_policy_violation"
    with pytest.raises(ToolError) as invalid:
        call("remember", content="   ", user_id="c")
    assert invalid.value.body["error"]["code"] == "validation_error"
    assert not _adds(engines_up) and not MemoryItem.objects.exists()


def test_an_unreachable_mem0_is_the_rest_error(world, engines_up, call):
    use(world.agent, "mem0", mem0_instance="mem0-eu")
    engines_up["mem0"].stop()
    with pytest.raises(ToolError) as down:
        call("remember", content="x y", user_id="c")
    assert down.value.body["error"]["code"] == "memory_engine_unavailable"
    assert not MemoryItem.objects.exists()


def test_a_builtin_policy_stores_builtin(world, engines_up, call):
    body = call("remember", content="Alice likes tea", user_id="c", idempotency_key="k-1")
    assert call("remember", content="Alice likes tea", user_id="c", idempotency_key="k-1")["id"] == body["id"]
    assert MemoryItem.objects.get().content == "Alice likes tea"
    assert not engines_up["mem0"].requests
