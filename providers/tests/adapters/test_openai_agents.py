"""openai_agents: the Agents SDK's SQLiteSession (in memory) in process, and the OpenAI
Conversations API through OpenAIConversationsSession against a local server."""

from __future__ import annotations

import itertools

import pytest

from providers.adapters.base import AdapterError, CapabilityUnsupported, NewRecord
from providers.adapters.openai_agents import OpenAIAgentsAdapter
from providers.tests.adapters.helpers import assert_contract, ctx, engine, key
from providers.tests.servers import LocalServer, Resp, conform


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


def _part(kind, text):
    # Output text always carries its annotations list in the API's answers.
    return {"type": kind, "text": text, **({"annotations": []} if kind == "output_text" else {})}


def conversations_api() -> LocalServer:
    """The Conversations API as published: create a conversation (with up to 20 items
    and metadata), retrieve it, list its items (order, limit default 20, ``after``
    cursor, ``has_more``), add items to an existing one (404 otherwise), delete it.
    Bearer auth. Bodies conform to the openai SDK's own models."""
    from openai.types.conversations import Conversation, ConversationDeletedResource
    from openai.types.conversations.conversation_item_list import ConversationItemList

    server = LocalServer().start()
    conversations: dict[str, dict] = {"conv_1": {"items": [], "metadata": {}}}
    ids = itertools.count(1)
    not_found = Resp(404, {"error": {"message": "Conversation not found", "type": "invalid_request_error"}})

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

    def page(items, has_more=False):
        body = {
            "object": "list",
            "data": items,
            "first_id": items[0]["id"] if items else "",
            "last_id": items[-1]["id"] if items else "",
            "has_more": has_more,
        }
        return conform(ConversationItemList, body)

    def stored(item):
        content = item["content"]
        part = "input_text" if item["role"] == "user" else "output_text"
        return {
            "type": "message",
            "id": f"msg_{next(ids)}",
            "status": "completed",
            "role": item["role"],
            "content": [_part(part, content)] if isinstance(content, str) else content,
        }

    def conversation(cid):
        meta = conversations[cid]["metadata"]
        return conform(
            Conversation, {"id": cid, "object": "conversation", "created_at": 1767225600, "metadata": meta}
        )

    def create_conversation(req):
        cid = f"conv_{next(ids)}"
        body = req.json or {}
        conversations[cid] = {
            "items": [stored(i) for i in body.get("items") or []],
            "metadata": body.get("metadata") or {},
        }
        return Resp(200, conversation(cid))

    def retrieve(req):
        return Resp(200, conversation(req.params["cid"])) if req.params["cid"] in conversations else not_found

    def list_items(req):
        found = conversations.get(req.params["cid"])
        if found is None:
            return not_found
        ordered = (
            list(found["items"]) if req.arg("order", "desc") == "asc" else list(reversed(found["items"]))
        )
        after = req.arg("after")
        if after:
            position = next((i for i, item in enumerate(ordered) if item["id"] == after), len(ordered))
            ordered = ordered[position + 1 :]
        limit = int(req.arg("limit", "20"))
        return Resp(200, page(ordered[:limit], has_more=len(ordered) > limit))

    def create(req):
        found = conversations.get(req.params["cid"])
        if found is None:
            return not_found
        created = [stored(item) for item in req.json["items"]]
        found["items"].extend(created)
        return Resp(200, page(created))

    def delete(req):
        if conversations.pop(req.params["cid"], None) is None:
            return not_found
        body = {"id": req.params["cid"], "object": "conversation.deleted", "deleted": True}
        return Resp(200, conform(ConversationDeletedResource, body))

    server.route("GET", "/v1/models", authed(lambda req: Resp(200, {"object": "list", "data": []})))
    server.route("POST", "/v1/conversations", authed(create_conversation))
    server.route("GET", "/v1/conversations/(?P<cid>[^/]+)", authed(retrieve))
    server.route("GET", "/v1/conversations/(?P<cid>[^/]+)/items", authed(list_items))
    server.route("POST", "/v1/conversations/(?P<cid>[^/]+)/items", authed(create))
    server.route("DELETE", "/v1/conversations/(?P<cid>[^/]+)", authed(delete))
    server.conversations = conversations
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


def _api_adapter(server):
    return OpenAIAgentsAdapter(engine("openai_agents", f"{server.url}/v1"), credential=key("sk-test"))


def test_a_long_conversation_is_read_page_by_page():
    server = conversations_api()
    try:
        adapter = _api_adapter(server)
        context = ctx("remember", session_id="conv_1")
        for n in range(45):
            adapter.perform("remember", context, record=NewRecord(f"message {n}", kind="message"))
        hits = adapter.perform("list", ctx("list", session_id="conv_1"), limit=30)
        assert [h.text for h in hits][:2] == ["message 44", "message 43"] and len(hits) == 30
        listed = [r for r in server.requests if r.method == "GET" and r.path.endswith("/items")]
        assert any(r.arg("after") for r in listed)  # the SDK followed has_more
    finally:
        server.stop()


def test_remember_into_a_session_that_is_no_conversation_starts_one():
    server = conversations_api()
    try:
        adapter = _api_adapter(server)
        result = adapter.perform(
            "remember", ctx("remember", session_id="my-chat"), record=NewRecord("Hello", kind="message")
        )
        created = result.detail["session_id"]
        assert result.status == "settled" and result.detail["conversation_created"] is True
        assert server.conversations[created]["metadata"]["fedmem_tenant"] == "acme"
        hits = adapter.perform("recall", ctx(session_id=created), query="x", top_k=3)
        assert [h.text for h in hits] == ["Hello"]
        assert adapter.perform("recall", ctx(session_id="my-chat"), query="x", top_k=3) == []
        # Started for acme: never read, listed or purged for another tenant.
        other = ctx(session_id=created, tenant_slug="globex")
        assert adapter.perform("recall", other, query="x", top_k=3) == []
        adapter.perform("purge", other.for_operation("purge"))
        assert created in server.conversations
    finally:
        server.stop()
