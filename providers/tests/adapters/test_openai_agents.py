"""openai_agents: the Agents SDK's SQLiteSession (in memory) in process, and the OpenAI
Conversations API through OpenAIConversationsSession against a local server."""

from __future__ import annotations

import itertools

import pytest

from providers.adapters.base import AdapterError, CapabilityUnsupported, NewRecord
from providers.adapters.openai_agents import OpenAIAgentsAdapter
from providers.tests.adapters.helpers import assert_contract, ctx, engine, key
from providers.tests.servers import LocalServer, Resp


def sqlite_sessions():
    """One in-memory SQLiteSession per session id (the SDK's own local store)."""
    from agents import SQLiteSession

    sessions: dict[str, SQLiteSession] = {}
    return lambda session_id: sessions.setdefault(session_id, SQLiteSession(session_id))


def _conversation(adapter, session="s1"):
    context = ctx("remember", session_id=session)
    for role, text in (
        ("user", "Hi, I'm planning a trip to Lisbon"),
        ("assistant", "Great, when?"),
        ("user", "In May, with my sister"),
    ):
        assert (
            adapter.perform("remember", context, record=NewRecord(text, kind="message", role=role)).status
            == "settled"
        )


def test_session_items_are_messages_newest_first():
    adapter = OpenAIAgentsAdapter(engine("openai_agents"), session_factory=sqlite_sessions())
    _conversation(adapter)
    hits = adapter.perform("recall", ctx(session_id="s1"), query="anything", top_k=2)
    assert [h.text for h in hits] == ["In May, with my sister", "Great, when?"]
    assert all(h.kind == "message" and h.metadata["durable"] is False for h in hits)
    assert [h.provenance["position"] for h in hits] == [2, 1]
    assert hits[1].metadata["role"] == "assistant"
    assert_contract(adapter, hits)
    assert adapter.announcement()["session_memory"] is True
    assert adapter.isolation == "logical"


def test_sessions_are_namespaced_by_tenant_and_agent():
    adapter = OpenAIAgentsAdapter(engine("openai_agents"), session_factory=sqlite_sessions())
    _conversation(adapter)
    assert adapter.perform("recall", ctx(session_id="s1", tenant_slug="globex"), query="x", top_k=5) == []
    assert adapter.perform("recall", ctx(session_id="s1", agent_id="other"), query="x", top_k=5) == []


def test_get_and_purge_and_no_session():
    adapter = OpenAIAgentsAdapter(engine("openai_agents"), session_factory=sqlite_sessions())
    _conversation(adapter)
    first = adapter.perform("list", ctx("list", session_id="s1"), limit=5)[0]
    assert (
        adapter.perform("get", ctx("get", session_id="s1"), external_id=first.external_id).text == first.text
    )
    adapter.perform("purge", ctx("purge", session_id="s1"))
    assert adapter.perform("list", ctx("list", session_id="s1"), limit=5) == []
    with pytest.raises(AdapterError) as info:
        adapter.perform("recall", ctx(), query="x", top_k=3)
    assert info.value.reason == "scope_required"


def test_a_session_is_not_durable_memory():
    adapter = OpenAIAgentsAdapter(engine("openai_agents"), session_factory=sqlite_sessions())
    for operation in ("update", "forget", "search", "ingest_knowledge"):
        with pytest.raises(CapabilityUnsupported):
            adapter.perform(operation, ctx(session_id="s1"))


def conversations_api() -> LocalServer:
    """The Conversations API items endpoints, as published (list with order/limit/after,
    create up to 20 items, delete a conversation), Bearer auth."""
    server = LocalServer().start()
    conversations: dict[str, list[dict]] = {"conv_1": []}
    ids = itertools.count(1)

    def authed(handler):
        def wrapped(req):
            if req.headers.get("authorization") != "Bearer sk-test":
                return Resp(
                    401,
                    {
                        "error": {
                            "message": "Incorrect API key provided",
                            "type": "invalid_request_error",
                            "code": "invalid_api_key",
                        }
                    },
                )
            return handler(req)

        return wrapped

    def page(items):
        return {
            "object": "list",
            "data": items,
            "first_id": items[0]["id"] if items else None,
            "last_id": items[-1]["id"] if items else None,
            "has_more": False,
        }

    def list_items(req):
        items = conversations.get(req.params["cid"])
        if items is None:
            return Resp(
                404,
                {"error": {"message": "Conversation not found", "type": "invalid_request_error"}},
            )
        ordered = list(items) if req.arg("order", "desc") == "asc" else list(reversed(items))
        return Resp(200, page(ordered[: int(req.arg("limit", "20"))]))

    def create(req):
        items = conversations.setdefault(req.params["cid"], [])
        created = []
        for item in req.json["items"]:
            content = item["content"]
            part = "input_text" if item["role"] == "user" else "output_text"
            stored = {
                "type": "message",
                "id": f"msg_{next(ids)}",
                "status": "completed",
                "role": item["role"],
                "content": [{"type": part, "text": content}] if isinstance(content, str) else content,
            }
            items.append(stored)
            created.append(stored)
        return Resp(200, page(created))

    def delete(req):
        conversations.pop(req.params["cid"], None)
        return Resp(200, {"id": req.params["cid"], "object": "conversation.deleted", "deleted": True})

    server.route("GET", "/v1/models", authed(lambda req: Resp(200, {"object": "list", "data": []})))
    server.route("GET", "/v1/conversations/(?P<cid>[^/]+)/items", authed(list_items))
    server.route("POST", "/v1/conversations/(?P<cid>[^/]+)/items", authed(create))
    server.route("DELETE", "/v1/conversations/(?P<cid>[^/]+)", authed(delete))
    return server


def test_openai_conversations_session_over_guarded_egress():
    server = conversations_api()
    try:
        adapter = OpenAIAgentsAdapter(engine("openai_agents", f"{server.url}/v1"), credential=key("sk-test"))
        assert adapter.isolation == "none"
        assert adapter.perform("get_health", ctx("get_health")).status == "ok"
        _conversation(adapter, session="conv_1")
        hits = adapter.perform("recall", ctx(session_id="conv_1"), query="trip", top_k=3)
        assert [h.text for h in hits] == [
            "In May, with my sister",
            "Great, when?",
            "Hi, I'm planning a trip to Lisbon",
        ]
        assert hits[0].external_id == "msg_3"
        assert_contract(adapter, hits)
        assert all("traceparent" in r.headers for r in server.requests)
        adapter.perform("purge", ctx("purge", session_id="conv_1"))
        assert any(r.method == "DELETE" for r in server.requests)
    finally:
        server.stop()


def test_openai_conversations_bad_key_is_not_retryable():
    server = conversations_api()
    try:
        adapter = OpenAIAgentsAdapter(engine("openai_agents", f"{server.url}/v1"), credential=key("sk-wrong"))
        with pytest.raises(AdapterError) as info:
            adapter.perform("recall", ctx(session_id="conv_1"), query="x", top_k=2)
        assert info.value.reason == "auth_refused" and not info.value.retryable
        assert "sk-wrong" not in info.value.message
    finally:
        server.stop()
