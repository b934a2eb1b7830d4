"""cognee: datasets, cognify, search types, relations, delete — raw HTTP (there is no
separate official client) against a local server written from Cognee's REST API."""

from __future__ import annotations

import itertools
import re

import pytest

from providers.adapters.base import AdapterError, CapabilityUnsupported
from providers.adapters.cognee import CogneeAdapter
from providers.tests.adapters.helpers import assert_contract, ctx, engine, key
from providers.tests.servers import LocalServer, Resp


def cognee_server() -> tuple[LocalServer, dict]:
    server = LocalServer().start()
    state: dict = {"datasets": {}, "data": {}, "cognified": set()}
    ids = itertools.count(1)

    def authed(handler):
        def wrapped(req):
            if req.headers.get("authorization") != "Bearer cg-token":
                return Resp(401, {"detail": "Unauthorized"})
            return handler(req)

        return wrapped

    def add(req):
        body = req.body.decode("utf-8", "replace")
        name = re.search(r'name="datasetName"\r\n\r\n([^\r]+)', body).group(1)
        texts = re.findall(r'filename="[^"]+"\r\nContent-Type: text/plain\r\n\r\n(.*?)\r\n--', body, re.S)
        dataset = next((d for d in state["datasets"].values() if d["name"] == name), None)
        if dataset is None:
            dataset = {
                "id": f"00000000-0000-4000-8000-{next(ids):012d}",
                "name": name,
                "createdAt": "2026-03-01T10:00:00Z",
                "ownerId": "owner-1",
            }
            state["datasets"][dataset["id"]] = dataset
        state["data"].setdefault(dataset["id"], []).extend(texts)
        return Resp(200, {"status": "PipelineRunCompleted", "dataset_id": dataset["id"]})

    def cognify(req):
        dataset_id = req.json["datasetIds"][0]
        state["cognified"].add(dataset_id)
        return Resp(
            200,
            {
                dataset_id: {
                    "status": "PipelineRunStarted",
                    "pipeline_run_id": "run-1",
                    "dataset_id": dataset_id,
                }
            },
        )

    def search(req):
        body = req.json
        words = set(body["query"].lower().split())
        out = []
        for dataset_id in body["datasetIds"]:
            chunks = [
                {"id": f"chunk-{dataset_id[-3:]}-{i}", "text": t, "chunk_index": i}
                for i, t in enumerate(state["data"].get(dataset_id, []))
                if words & set(t.lower().split())
            ]
            if body["searchType"] == "GRAPH_COMPLETION":
                chunks = ["Alice leads the robotics team."] if chunks else []
            out.append(
                {
                    "search_result": chunks[: body["topK"]],
                    "dataset_id": dataset_id,
                    "dataset_name": state["datasets"][dataset_id]["name"],
                }
            )
        return Resp(200, out)

    def graph(req):
        return Resp(
            200,
            {
                "nodes": [
                    {"id": "n1", "label": "Alice"},
                    {"id": "n2", "label": "Robotics team"},
                    {"id": "n3", "label": "Porto"},
                ],
                "edges": [
                    {"source": "n1", "target": "n2", "label": "leads"},
                    {"source": "n1", "target": "n3", "label": "lives_in"},
                    {"source": "n2", "target": "n3", "label": "based_in"},
                ],
            },
        )

    def delete(req):
        state["datasets"].pop(req.params["id"], None)
        return Resp(200, {"status": "success"})

    server.route(
        "GET",
        "/health",
        lambda req: Resp(200, {"status": "ready", "health": "up", "version": "0.5"}),
    )
    server.route("GET", "/api/v1/datasets", authed(lambda req: Resp(200, list(state["datasets"].values()))))
    server.route("POST", "/api/v1/add", authed(add))
    server.route("POST", "/api/v1/cognify", authed(cognify))
    server.route("POST", "/api/v1/search", authed(search))
    server.route("GET", "/api/v1/datasets/(?P<id>[^/]+)/graph", authed(graph))
    server.route("DELETE", "/api/v1/datasets/(?P<id>[^/]+)", authed(delete))
    return server, state


@pytest.fixture
def cognee():
    server, state = cognee_server()
    yield server, state
    server.stop()


def _adapter(server):
    return CogneeAdapter(engine("cognee", server.url), credential=key("cg-token"))


def test_ingest_cognify_search_relations_delete(cognee):
    server, state = cognee
    adapter = _adapter(server)
    result = adapter.perform(
        "ingest_knowledge",
        ctx("ingest_knowledge"),
        dataset="handbook",
        documents=["Alice leads the robotics team", "The robotics team is based in Porto"],
    )
    assert result.status == "settled"
    assert [d["name"] for d in state["datasets"].values()] == ["acme__handbook"]
    built = adapter.perform("build_graph", ctx("build_graph"), dataset="handbook")
    assert built.status == "queued" and built.event_id == "run-1"

    chunks = adapter.perform("recall", ctx(), query="who leads robotics", top_k=5)
    assert [h.text for h in chunks] == [
        "Alice leads the robotics team",
        "The robotics team is based in Porto",
    ]
    assert chunks[0].kind == "document" and chunks[0].provenance["dataset"] == "handbook"
    assert_contract(adapter, chunks)

    answer = adapter.perform(
        "search_graph",
        ctx("search_graph"),
        query="who leads robotics",
        top_k=3,
        dataset="handbook",
        search_type="GRAPH_COMPLETION",
    )
    assert answer[0].kind == "summary" and answer[0].text == "Alice leads the robotics team."

    relations = adapter.perform("get_relations", ctx("get_relations"), external_id="node:handbook:n1")
    assert sorted(h.text for h in relations) == [
        "Alice leads Robotics team",
        "Alice lives_in Porto",
    ]
    assert relations[0].metadata["subject"] == "Alice"
    assert_contract(adapter, relations)

    adapter.perform("delete_dataset", ctx("delete_dataset"), dataset="handbook")
    assert state["datasets"] == {}


def test_a_tenant_only_reaches_its_own_datasets(cognee):
    server, _ = cognee
    adapter = _adapter(server)
    adapter.perform(
        "ingest_knowledge",
        ctx("ingest_knowledge"),
        dataset="handbook",
        documents=["Alice leads robotics"],
    )
    globex = ctx(tenant_slug="globex")
    assert adapter.perform("recall", globex, query="alice robotics", top_k=5) == []
    with pytest.raises(AdapterError) as info:
        adapter.perform("delete_dataset", ctx("delete_dataset", tenant_slug="globex"), dataset="handbook")
    assert info.value.reason == "not_found"
    searches = [r for r in server.requests if r.path == "/api/v1/search"]
    assert searches == []  # no unscoped search was ever sent


def test_cognee_is_knowledge_not_a_memory_store(cognee):
    server, _ = cognee
    adapter = _adapter(server)
    announcement = adapter.announcement()
    assert set(announcement["capabilities"]["knowledge"]) == {
        "ingest_knowledge",
        "build_graph",
        "search_graph",
        "get_relations",
        "delete_dataset",
    }
    for operation in ("remember", "update", "forget"):
        with pytest.raises(CapabilityUnsupported):
            adapter.perform(operation, ctx(operation))
    assert adapter.perform("get_health", ctx("get_health")).status == "ok"


def test_bad_dataset_names_and_search_types(cognee):
    server, _ = cognee
    adapter = _adapter(server)
    with pytest.raises(AdapterError):
        adapter.perform("ingest_knowledge", ctx("ingest_knowledge"), dataset="a__b", documents=["x"])
    with pytest.raises(AdapterError):
        adapter.perform("search_graph", ctx("search_graph"), query="x", top_k=3, search_type="CYPHER")
