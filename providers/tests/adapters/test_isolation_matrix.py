"""Tenant isolation across every adapter in the registry.

For each engine kind in ``providers.adapters.registry`` (enumerated from the
registry: a new kind without a harness here fails this test), a record is written
as one caller and then asked for by another — another tenant, including the slug
pairs that collided in earlier encodings (``acme_corp`` / ``acme-corp``, ``acme`` /
``acme__evil``), and, where the provider scopes by user, the user pair
``a.b@x.io`` / ``a-b-x-io``. Every get / update / forget by the record's id must
answer not found (and change nothing), every recall must leave it out. The matrix
is printed; the test fails on the first leak.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from providers.adapters.base import AdapterError, MemoryAdapter, NewRecord, OperationContext
from providers.adapters.registry import adapter_class, provider_kinds
from providers.tests.adapters.helpers import ctx, engine, key
from providers.tests.servers import LocalServer, Req, Resp

TENANT_PAIRS = [
    ("acme", "globex"),
    ("acme_corp", "acme-corp"),
    ("acme-corp", "acme_corp"),
    ("acme", "acme__evil"),
    ("acme__evil", "acme"),
]
USER_PAIRS = [("a.b@x.io", "a-b-x-io"), ("a-b-x-io", "a.b@x.io"), ("alice", "_")]
SECRET = "the owner's secret"


@dataclass
class Harness:
    """One provider, ready to write as ``owner`` and be probed as anyone else."""

    adapter: MemoryAdapter
    write: Callable[[OperationContext, str], str | None]  # (owner, text) -> the record's external id
    by_user: bool  # the provider scopes memory by user (else by agent or session)
    stop: Callable[[], None] = lambda: None
    operations: list[str] = field(default_factory=lambda: ["get", "update", "forget"])
    recall: str = "recall"


def _owner(tenant: str = "acme", user: str = "alice", **extra: Any) -> OperationContext:
    return ctx(
        "remember", tenant_slug=tenant, user_id=user, session_id=extra.pop("session_id", "s1"), **extra
    )


# --- one harness per engine kind ----------------------------------------------------------


def _mem0() -> Harness:
    from providers.adapters.mem0 import Mem0Adapter
    from providers.tests.fakes.mem0 import API_KEY, Mem0Platform

    fake = Mem0Platform().start()
    adapter = Mem0Adapter(engine("mem0", fake.url), credential=key(API_KEY))

    def write(owner: OperationContext, text: str) -> str:
        adapter.perform("remember", owner, record=NewRecord(text))
        fake.process()
        return adapter.perform("list", owner.for_operation("list"), limit=50)[-1].external_id

    return Harness(adapter, write, by_user=True, stop=fake.stop)


def _mem0_server(memory: Any) -> Harness:
    from providers.adapters.mem0 import Mem0ServerAdapter
    from providers.tests.fakes.mem0 import server_routes

    server = server_routes(LocalServer(), memory).start()
    adapter = Mem0ServerAdapter(engine("mem0_server", server.url))

    def write(owner: OperationContext, text: str) -> str:
        return adapter.perform("remember", owner, record=NewRecord(text)).external_ids[0]

    return Harness(adapter, write, by_user=True, stop=server.stop, operations=["get", "forget"])


def _zep() -> Harness:
    from providers.adapters.zep import ZepAdapter
    from providers.tests.fakes.zep import API_KEY, ZepFake

    fake = ZepFake().start()
    adapter = ZepAdapter(engine("zep", fake.url), credential=key(API_KEY))

    def write(owner: OperationContext, text: str) -> str:
        written = adapter.perform("remember", owner, record=NewRecord(text))
        fake.process()
        return written.external_ids[0]

    return Harness(adapter, write, by_user=True, stop=fake.stop, operations=["forget"])


def _graphiti() -> Harness:
    from providers.adapters.graphiti import GraphitiAdapter
    from providers.tests.fakes.graphiti import GraphitiFake

    fake = GraphitiFake().start()
    adapter = GraphitiAdapter(engine("graphiti", fake.url))
    facts = itertools.count(1)

    def write(owner: OperationContext, text: str) -> str:
        fact = f"secret-fact-{next(facts)}"
        fake.seed_episode(
            adapter.group_id(owner),
            text,
            [
                {
                    "uuid": fact,
                    "name": "KNOWS",
                    "fact": text,
                    "valid_at": None,
                    "invalid_at": None,
                    "created_at": "2026-01-01T00:00:00Z",
                    "expired_at": None,
                }
            ],
        )
        return f"fact:{fact}"

    return Harness(adapter, write, by_user=True, stop=fake.stop, operations=["get", "forget"])


def _letta() -> Harness:
    from providers.adapters.letta import LettaAdapter

    server = LocalServer().start()
    agents: list[dict[str, Any]] = []
    ids = itertools.count(1)

    def list_agents(req: Req) -> Resp:
        tags = req.query.get("tags", [])
        return Resp(200, [a for a in agents if all(t in a["tags"] for t in tags)])

    def blocks(req: Req) -> Resp:
        found = next((a for a in agents if a["id"] == req.params["agent"]), None)
        return Resp(200, found["blocks"]) if found else Resp(404, {"detail": "Agent not found"})

    server.route("GET", "/v1/agents/", list_agents)
    server.route("GET", "/v1/agents/(?P<agent>[^/]+)/core-memory/blocks", blocks)
    server.route("GET", "/v1/agents/(?P<agent>[^/]+)/messages", lambda req: Resp(200, []))
    adapter = LettaAdapter(engine("letta", server.url))

    def write(owner: OperationContext, text: str) -> str:
        block = f"block-{next(ids)}"
        twin = next((a for a in agents if adapter.tag(owner) in a["tags"]), None)
        if twin is None:
            twin = {
                "id": f"agent-{block}",
                "name": "a",
                "tags": [adapter.tag(owner)],
                "agent_type": "letta_v1_agent",
                "blocks": [],
            }
            agents.append(twin)
        twin["blocks"].append({"id": block, "label": "human", "value": text, "limit": 5000})
        return f"block:{block}"

    return Harness(adapter, write, by_user=False, stop=server.stop, operations=[], recall="list")


def _langgraph() -> Harness:
    from langgraph.store.memory import InMemoryStore

    from providers.adapters.langgraph import LangGraphAdapter

    adapter = LangGraphAdapter(engine("langgraph"), store=InMemoryStore())

    def write(owner: OperationContext, text: str) -> str:
        return adapter.perform("remember", owner, record=NewRecord(text)).external_ids[0]

    return Harness(adapter, write, by_user=True)


def _openai_agents() -> Harness:
    from agents import SQLiteSession

    from providers.adapters.openai_agents import OpenAIAgentsAdapter

    sessions: dict[str, Any] = {}
    adapter = OpenAIAgentsAdapter(
        engine("openai_agents"), session_factory=lambda sid: sessions.setdefault(sid, SQLiteSession(sid))
    )

    def write(owner: OperationContext, text: str) -> str:
        adapter.perform("remember", owner, record=NewRecord(text, kind="message"))
        return adapter.perform("list", owner.for_operation("list"), limit=5)[0].external_id

    return Harness(adapter, write, by_user=False, operations=["get"])


def _cognee() -> Harness:
    from providers.adapters.cognee import CogneeAdapter
    from providers.tests.fakes.cognee import STATIC_TOKEN, CogneeFake

    fake = CogneeFake().start()
    adapter = CogneeAdapter(engine("cognee", fake.url), credential=key(STATIC_TOKEN))
    names = itertools.count(1)

    def write(owner: OperationContext, text: str) -> str:
        dataset = f"handbook-{next(names)}"
        adapter.perform(
            "ingest_knowledge", owner.for_operation("ingest_knowledge"), dataset=dataset, documents=[text]
        )
        return f"dataset:{dataset}"

    return Harness(
        adapter, write, by_user=False, stop=fake.stop, operations=["get_relations", "delete_dataset"]
    )


def _custom() -> Harness:
    """The custom protocol leaves isolation to the engine (it is sent the namespace on
    every call); this engine honours it, as a ``logical`` custom engine must."""
    from providers.adapters.custom import HttpCustomAdapter

    server = LocalServer().start()
    records: dict[str, dict[str, Any]] = {}
    ids = itertools.count(1)

    def tenant_of(req: Req) -> str | None:
        body = req.json if req.body else {}
        return (body.get("namespace") or {}).get("tenant") or req.arg("tenant")

    def remember(req: Req) -> Resp:
        rid = str(next(ids))
        records[rid] = {"id": rid, "kind": "fact", "text": req.json["text"], "_tenant": tenant_of(req)}
        return Resp(201, {"id": rid, "status": "settled"})

    def mine(req: Req) -> list[dict[str, Any]]:
        return [
            {k: v for k, v in r.items() if k != "_tenant"}
            for r in records.values()
            if r["_tenant"] == tenant_of(req)
        ]

    def one(req: Req) -> Resp:
        record = records.get(req.params["id"])
        if record is None or record["_tenant"] != tenant_of(req):
            return Resp(404, {"detail": "not found"})
        if req.method == "DELETE":
            records.pop(req.params["id"])
            return Resp(204)
        if req.method == "PATCH":
            record["text"] = req.json["text"]
        return Resp(200, {k: v for k, v in record.items() if k != "_tenant"})

    server.route("POST", "/memories", remember)
    server.route("POST", "/recall", lambda req: Resp(200, {"results": mine(req)}))
    server.route("GET", "/memories", lambda req: Resp(200, {"results": mine(req)}))
    for method in ("GET", "PATCH", "DELETE"):
        server.route(method, "/memories/(?P<id>[^/]+)", one)
    adapter = HttpCustomAdapter(engine("custom", server.url, shared_isolation="logical"))

    def write(owner: OperationContext, text: str) -> str:
        return adapter.perform("remember", owner, record=NewRecord(text)).external_ids[0]

    return Harness(adapter, write, by_user=False, stop=server.stop)


HARNESSES: dict[str, Callable[..., Harness | None]] = {
    "mem0": _mem0,
    "mem0_server": _mem0_server,
    "zep": _zep,
    "graphiti": _graphiti,
    "letta": _letta,
    "langgraph": _langgraph,
    "openai_agents": _openai_agents,
    "cognee": _cognee,
    "custom": _custom,
    # Stores nothing (an answer endpoint): there is no record to reach.
    "openai_compatible": lambda: None,
}


def _probe(
    harness: Harness, owner: OperationContext, other: OperationContext, external_id: str | None, text: str
) -> list[str]:
    """Every way ``other`` could reach the owner's record; returns the leaks."""
    adapter, leaks = harness.adapter, []
    for operation in harness.operations:
        kwargs: dict[str, Any] = {"external_id": external_id}
        if operation == "update":
            kwargs["text"] = "overwritten by another tenant"
        if operation == "delete_dataset":
            kwargs = {"dataset": str(external_id).partition(":")[2]}
        try:
            adapter.perform(operation, other.for_operation(operation), **kwargs)
            leaks.append(operation)
        except AdapterError as exc:
            if exc.reason != "not_found":
                leaks.append(f"{operation}:{exc.reason}")
    hits = adapter.perform(
        harness.recall,
        other.for_operation(harness.recall),
        **({"limit": 50} if harness.recall == "list" else {"query": text, "top_k": 50}),
    )
    if any(text in hit.text for hit in hits):
        leaks.append(harness.recall)
    # The owner still has it, unchanged: nothing above wrote through.
    mine = adapter.perform(
        harness.recall,
        owner.for_operation(harness.recall),
        **({"limit": 50} if harness.recall == "list" else {"query": text, "top_k": 50}),
    )
    if not any(hit.text == text for hit in mine):
        leaks.append("owner-lost-record")
    return leaks


@pytest.fixture
def oss_memory_or_none(request):
    """mem0_server runs mem0's own routes over a real OSS Memory (pgvector, local embedder)."""
    return request.getfixturevalue("oss_memory")


def test_no_adapter_reaches_another_tenants_record(oss_memory_or_none, capsys):
    kinds = provider_kinds()
    assert set(kinds) <= set(HARNESSES), f"add an isolation harness for {sorted(set(kinds) - set(HARNESSES))}"
    rows, total_leaks, probes, errors = [], 0, 0, 0
    for kind in kinds:
        maker = HARNESSES[kind]
        harness = maker(oss_memory_or_none) if kind == "mem0_server" else maker()
        if harness is None:
            assert not set(adapter_class(kind).memory_capabilities) & {"remember", "get", "list", "recall"}
            rows.append((kind, "-", "stores nothing", 0))
            continue
        try:
            pairs = [(_owner(tenant=a), _owner(tenant=b)) for a, b in TENANT_PAIRS]
            if harness.by_user:
                pairs += [(_owner(user=a), _owner(user=b)) for a, b in USER_PAIRS]
            for number, (owner, other) in enumerate(pairs):
                text = f"{SECRET} number{number}"
                label = f"{owner.tenant_slug}/{owner.user_id} -> {other.tenant_slug}/{other.user_id}"
                try:
                    external_id = harness.write(owner, text)
                    leaks = _probe(harness, owner, other, external_id, text)
                except Exception as exc:  # the owner could not even write or read back its own
                    errors += 1
                    rows.append((kind, label, "-", f"error: {getattr(exc, 'reason', type(exc).__name__)}"))
                    continue
                probes += len(harness.operations) + 1
                total_leaks += len(leaks)
                rows.append((kind, label, ",".join([*harness.operations, harness.recall]), len(leaks)))
                if leaks:
                    rows[-1] = (*rows[-1][:3], f"{len(leaks)} {leaks}")
        finally:
            harness.stop()
    with capsys.disabled():
        summary = f"{len(kinds)} engine kinds, {probes} probes, {total_leaks} leaks, {errors} errors"
        print(f"\nisolation matrix: {summary}")
        for kind, pair, operations, leaks in rows:
            print(f"  {kind:<17} {pair:<34} {operations:<32} leaks={leaks}")
    assert total_leaks == 0 and errors == 0, [row for row in rows if row[3]]


# The OSS Memory fixture lives with the Mem0 tests.
from providers.tests.adapters.test_mem0 import oss_memory  # noqa: E402,F401
