"""letta: core memory blocks -> pinned_context, recent messages -> message, through the
official letta-client against a local server written from Letta's published REST API."""

from __future__ import annotations

import pytest

from providers.adapters.base import AdapterError, CapabilityUnsupported
from providers.adapters.letta import LettaAdapter
from providers.tests.adapters.helpers import assert_contract, ctx, engine, key
from providers.tests.servers import LocalServer, Resp

AGENT = "agent-00000000-0000-4000-8000-000000000001"


def letta_server(tag: str = "fedmem:acme:agent-1") -> LocalServer:
    server = LocalServer().start()
    agents = [
        {
            "id": AGENT,
            "name": "support",
            "tags": [tag],
            "agent_type": "letta_v1_agent",
        }
    ]
    blocks = [
        {
            "id": "block-1",
            "label": "human",
            "value": "Name: Alice. Prefers email over phone.",
            "limit": 5000,
        },
        {
            "id": "block-2",
            "label": "persona",
            "value": "I am Acme's support agent.",
            "limit": 5000,
            "read_only": True,
        },
    ]
    messages = [
        {
            "id": "message-1",
            "message_type": "user_message",
            "date": "2026-03-01T10:00:00Z",
            "content": "My order is late",
        },
        {
            "id": "message-2",
            "message_type": "reasoning_message",
            "date": "2026-03-01T10:00:01Z",
            "reasoning": "Look up the order",
        },
        {
            "id": "message-3",
            "message_type": "tool_call_message",
            "date": "2026-03-01T10:00:02Z",
            "tool_call": {"name": "lookup", "arguments": "{}"},
        },
        {
            "id": "message-4",
            "message_type": "assistant_message",
            "date": "2026-03-01T10:00:03Z",
            "content": [{"type": "text", "text": "It ships tomorrow."}],
        },
    ]

    def authed(handler):
        def wrapped(req):
            if req.headers.get("authorization") != "Bearer letta-key":
                return Resp(401, {"detail": "Unauthorized"})
            return handler(req)

        return wrapped

    def list_agents(req):
        tags = req.query.get("tags", [])
        found = [a for a in agents if all(t in a["tags"] for t in tags)]
        return Resp(200, found[: int(req.arg("limit", "50"))])

    def list_messages(req):
        ordered = list(reversed(messages)) if req.arg("order") == "desc" else messages
        return Resp(200, ordered[: int(req.arg("limit", "100"))])

    server.route("GET", "/v1/health/", lambda req: Resp(200, {"version": "0.16.0", "status": "ok"}))
    server.route("GET", "/v1/agents/", authed(list_agents))
    server.route("GET", f"/v1/agents/{AGENT}/core-memory/blocks", authed(lambda req: Resp(200, blocks)))
    server.route("GET", f"/v1/agents/{AGENT}/messages", authed(list_messages))
    return server


@pytest.fixture
def letta():
    server = letta_server()
    yield server
    server.stop()


def test_blocks_are_pinned_context_and_messages_are_messages(letta):
    adapter = LettaAdapter(engine("letta", letta.url), credential=key("letta-key"))
    hits = adapter.perform("list", ctx("list"), limit=10)
    assert [(h.kind, h.text) for h in hits] == [
        ("pinned_context", "Name: Alice. Prefers email over phone."),
        ("pinned_context", "I am Acme's support agent."),
        ("message", "It ships tomorrow."),
        ("message", "My order is late"),
    ]
    assert hits[0].metadata["label"] == "human" and hits[1].metadata["read_only"] is True
    assert hits[2].metadata["role"] == "assistant" and hits[2].metadata["durable"] is False
    assert_contract(adapter, hits)
    agents_call = next(r for r in letta.requests if r.path == "/v1/agents/")
    assert agents_call.query["tags"] == ["fedmem:acme:agent-1"]


def test_no_claim_to_archival_retrieval(letta):
    adapter = LettaAdapter(engine("letta", letta.url), credential=key("letta-key"))
    for operation in ("search", "remember", "forget"):
        with pytest.raises(CapabilityUnsupported):
            adapter.perform(operation, ctx(operation), query="x", top_k=3)
    assert "search" not in adapter.announcement()["capabilities"]["memory"]


def test_an_agent_without_a_letta_twin_has_nothing(letta):
    adapter = LettaAdapter(engine("letta", letta.url), credential=key("letta-key"))
    assert adapter.perform("recall", ctx(tenant_slug="globex"), query="x", top_k=5) == []


def test_health_and_bad_key(letta):
    assert LettaAdapter(engine("letta", letta.url)).perform("get_health", ctx("get_health")).status == "ok"
    with pytest.raises(AdapterError) as info:
        LettaAdapter(engine("letta", letta.url), credential=key("bad")).perform(
            "recall", ctx(), query="x", top_k=3
        )
    assert info.value.reason == "auth_refused"


def test_recall_answers_the_query_not_every_block(letta):
    adapter = LettaAdapter(engine("letta", letta.url), credential=key("letta-key"))
    hits = adapter.perform("recall", ctx(), query="when does my order ship", top_k=10)
    assert [h.text for h in hits] == ["It ships tomorrow.", "My order is late"]
    email = adapter.perform("recall", ctx(), query="does alice prefer email", top_k=10)
    assert [h.kind for h in email] == ["pinned_context"] and email[0].metadata["label"] == "human"
    assert adapter.perform("recall", ctx(), query="quantum chromodynamics", top_k=10) == []


def test_an_agent_mapping_and_a_cloud_project():
    server = letta_server(tag="unrelated")
    try:
        adapter = LettaAdapter(
            engine("letta", server.url, agents={"agent-1": AGENT}, project="acme-prod"),
            credential=key("letta-key"),
        )
        hits = adapter.perform("list", ctx("list"), limit=10)
        assert len(hits) == 4
        assert all(r.headers.get("x-project") == "acme-prod" for r in server.requests)
        assert not any(r.path == "/v1/agents/" for r in server.requests)  # no tag lookup
        # Another fedmem agent is not mapped and has no tagged twin.
        assert adapter.perform("list", ctx("list", agent_id="agent-2"), limit=10) == []
        with pytest.raises(ValueError):
            LettaAdapter.validate_options({"agents": {"agent-1": 3}})
    finally:
        server.stop()
