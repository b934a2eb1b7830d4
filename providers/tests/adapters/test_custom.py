"""custom: fedmem's small HTTP protocol, held to the same envelope as every provider."""

from __future__ import annotations

import pytest

from providers.adapters.base import (
    AdapterError,
    CapabilityUnsupported,
    MemoryAdapter,
    NewRecord,
    RecordRefused,
)
from providers.adapters.custom import HttpCustomAdapter
from providers.tests.adapters.helpers import assert_contract, ctx, engine, key
from providers.tests.engines import custom_engine
from providers.tests.servers import LocalServer, Resp


@pytest.fixture
def server():
    server = custom_engine(
        [
            {
                "id": "r1",
                "kind": "fact",
                "text": "Alice prefers tea",
                "score": 3.5,
                "metadata": {"topic": "drinks", "nested": {"a": [1, 2]}},
                "provenance": {"source": "crm"},
                "created_at": "2026-01-01T00:00:00Z",
            }
        ]
    )
    yield server
    server.stop()


def test_round_trip(server):
    adapter = HttpCustomAdapter(engine("custom", server.url), credential=key("c-key"))
    written = adapter.perform("remember", ctx("remember"), record=NewRecord("Alice lives in Lisbon"))
    assert written.status == "settled" and written.external_ids == ["1000"]
    hits = adapter.perform("recall", ctx(), query="alice", top_k=5)
    assert [h.text for h in hits] == ["Alice prefers tea", "Alice lives in Lisbon"]
    assert hits[0].metadata["nested"] == '{"a": [1, 2]}'  # bounded: nested values become short JSON
    assert_contract(adapter, hits)
    assert adapter.perform("get", ctx("get"), external_id="1000").text == "Alice lives in Lisbon"
    adapter.perform("update", ctx("update"), external_id="1000", text="Alice lives in Porto")
    assert adapter.perform("get", ctx("get"), external_id="1000").text == "Alice lives in Porto"
    adapter.perform("forget", ctx("forget"), external_id="1000")
    assert len(adapter.perform("list", ctx("list"), limit=10)) == 1
    assert server.requests[0].headers["authorization"] == "Bearer c-key"
    assert adapter.perform("get_health", ctx("get_health")).status == "ok"


def test_announced_capabilities_can_be_narrowed_and_isolation_declared(server):
    adapter = HttpCustomAdapter(
        engine("custom", server.url, capabilities=["recall"], shared_isolation="logical")
    )
    assert adapter.announcement()["capabilities"]["memory"] == ["recall", "get_capabilities"]
    assert adapter.isolation == "logical"
    with pytest.raises(CapabilityUnsupported):
        adapter.perform("remember", ctx("remember"), record=NewRecord("x"))
    assert not any(r.path == "/memories" for r in server.requests)
    with pytest.raises(ValueError):
        HttpCustomAdapter.validate_options({"capabilities": ["build_graph"]})
    with pytest.raises(ValueError):
        HttpCustomAdapter.validate_options({"shared_isolation": "dedicated"})


def test_a_queued_write_is_never_reported_settled():
    server = LocalServer().start()
    server.route(
        "POST",
        "/memories",
        lambda req: Resp(202, {"id": "q1", "status": "accepted", "event_id": "ev-1"}),
    )
    try:
        result = HttpCustomAdapter(engine("custom", server.url)).perform(
            "remember", ctx("remember"), record=NewRecord("x")
        )
        assert result.status == "queued" and result.event_id == "ev-1"
    finally:
        server.stop()


def test_malformed_and_out_of_vocabulary_records_are_refused():
    server = LocalServer().start()
    answers = iter(
        [
            {"results": [{"id": "1", "kind": "checkpoint", "text": "state"}]},
            {"results": "nope"},
            {"results": [{"kind": "fact"}]},
        ]
    )
    server.route("POST", "/recall", lambda req: Resp(200, next(answers)))
    try:
        adapter = HttpCustomAdapter(engine("custom", server.url))
        with pytest.raises(RecordRefused):
            adapter.perform("recall", ctx(), query="x", top_k=3)
        for _ in range(2):
            with pytest.raises(AdapterError):
                adapter.perform("recall", ctx(), query="x", top_k=3)
    finally:
        server.stop()


def test_long_text_and_metadata_are_bounded():
    server = LocalServer().start()
    record = {
        "id": "x" * 400,
        "kind": "document",
        "text": "y" * 20000,
        "metadata": {f"k{i}": "v" * 900 for i in range(50)},
    }
    server.route("POST", "/recall", lambda req: Resp(200, {"results": [record]}))
    try:
        adapter = HttpCustomAdapter(engine("custom", server.url))
        hit = adapter.perform("recall", ctx(), query="x", top_k=3)[0]
        assert len(hit.text) == 8000 and hit.metadata["truncated"] is True
        assert len(hit.metadata) <= 24 and all(len(str(v)) <= 500 for v in hit.metadata.values())
        assert len(hit.external_id) == 256
        assert_contract(adapter, [hit])
    finally:
        server.stop()


class InProcessEngine(MemoryAdapter):
    """The documented base class: an engine living in this process."""

    provider = "custom"
    label = "in-process example"
    memory_capabilities = frozenset({"recall", "get_capabilities"})
    record_kinds = ("fact",)

    def recall(self, ctx, *, query, top_k):
        from providers.adapters.base import Hit, ranked

        return ranked(
            [
                Hit(
                    provider_id=self.provider,
                    engine_id=self.engine.engine_id,
                    external_id="1",
                    kind="fact",
                    text=f"echo: {query}",
                )
            ],
            top_k,
        )


def test_a_subclass_of_the_base_class_is_held_to_the_same_contract():
    adapter = InProcessEngine(engine("custom"))
    hits = adapter.perform("recall", ctx(), query="hello", top_k=3)
    assert_contract(adapter, hits)
    with pytest.raises(CapabilityUnsupported):
        adapter.perform("forget", ctx("forget"), external_id="1")
    with pytest.raises(CapabilityUnsupported):
        adapter.perform("not_an_operation", ctx())
