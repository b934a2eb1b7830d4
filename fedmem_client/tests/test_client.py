"""The Python client against a live fedmem over real HTTP on loopback."""

from __future__ import annotations

import asyncio
import socket

import pytest

from fedmem_client import (
    AsyncFedmemClient,
    FedmemClient,
    FedmemError,
    NotAuthenticated,
    NotFound,
    ValidationError,
)
from governance.tests import factories as f

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def memory(world, live_server):
    with FedmemClient(live_server.url, f.agent_key(world.agent), max_retries=1) as client:
        yield client.agent(str(world.agent.pk))


def test_remember_recall_update_forget(memory):
    item = memory.remember("The staging database runs PostgreSQL 17", scope="agent")
    assert item["content"].startswith("The staging database")
    found = memory.recall("which PostgreSQL does staging run?", scopes=["agent"])
    assert found["results"][0]["id"] == item["id"] and "untrusted" in found["context"].lower()
    memory.update(item["id"], "The staging database runs PostgreSQL 18")
    assert memory.get(item["id"])["content"].endswith("18")
    memory.forget(item["id"])
    with pytest.raises(NotFound) as caught:
        memory.get(item["id"])
    assert caught.value.code and caught.value.status == 404


def test_the_same_idempotency_key_writes_once(memory):
    first = memory.remember("Backups run at 02:00 UTC", scope="agent", idempotency_key="backup-fact")
    again = memory.remember("Backups run at 02:00 UTC", scope="agent", idempotency_key="backup-fact")
    assert again["id"] == first["id"]
    assert sum(1 for _ in memory.iter_memories()) == 1


def test_pagination_walks_every_page(memory):
    memory.remember_batch(
        [{"content": f"Fact number {n} about the fleet", "scope": "agent"} for n in range(5)]
    )
    rows = list(memory.iter_memories(limit=2, include_content=True))
    assert len(rows) == 5 and len({r["id"] for r in rows}) == 5


def test_errors_carry_the_code(world, live_server, memory):
    with pytest.raises(ValidationError) as caught:
        memory.remember("", scope="agent")
    assert caught.value.status == 400 and caught.value.details
    with (
        FedmemClient(live_server.url, "fm_000000000000_" + "x" * 40) as bad,
        pytest.raises(NotAuthenticated) as denied,
    ):
        bad.me()
    assert denied.value.code == "authentication_failed"


def test_unreachable_server_is_a_clear_error_after_retries():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with (
        FedmemClient(f"http://127.0.0.1:{port}", "fm_x", max_retries=1) as client,
        pytest.raises(FedmemError) as caught,
    ):
        client.me()
    assert caught.value.code == "connection_failed" and caught.value.status == 0


def test_async_client(world, live_server):
    key = f.agent_key(world.agent)

    async def scenario():
        async with AsyncFedmemClient(live_server.url, key) as client:
            memory = client.agent(str(world.agent.pk))
            item = await memory.remember("Async writes reach the same store", scope="agent")
            rows = [row async for row in memory.iter_memories(limit=1)]
            return item, rows

    item, rows = asyncio.run(scenario())
    assert [r["id"] for r in rows] == [item["id"]]


def test_graph_routes_sessions_and_policy(memory):
    first = memory.remember("Verbose debug logging filled the disk on db-1", scope="agent")
    newer = memory.supersede(first["id"], "Verbose debug logging filled the disk on db-2", reason="typo")
    assert newer["old"]["id"] == first["id"] and newer["new"]["content"].endswith("db-2")
    assert [link["item_id"] for link in memory.history(first["id"])["superseded_by"]] == [newer["new"]["id"]]
    assert memory.discover("disk on db-2", scopes=["agent"])["results"][0]["id"] == newer["new"]["id"]
    assert memory.trace("effects", content="debug logging")["direction"] == "effects"
    assert memory.causal_chain("debug logging", "a full disk")["chain"] is None
    assert memory.policy()["policy"]["default_scope"] == "user"
    for n in range(3):
        memory.append_message("chat-1", "user", f"message {n}")
    assert [m["content"] for m in memory.iter_session("chat-1", limit=2)] == [
        f"message {n}" for n in range(3)
    ]


RUNBOOK = (
    "Verbose debug logging filled the disk on db-1. The full disk stopped the checkout service. "
    "The checkout outage caused lost revenue."
)


def test_knowledge_datasets_and_answers(memory):
    ingested = memory.ingest_knowledge("runbooks", [RUNBOOK, "Parking is free for visitors."])
    assert ingested["created"] is True and ingested["stored"] == 2 and ingested["engine_id"] == "builtin"
    memory.ingest_knowledge("faq", ["The cafeteria serves green tea on Mondays."], scope="agent")
    assert [d["dataset_id"] for d in memory.iter_datasets(limit=1)] == ["faq", "runbooks"]
    found = memory.search_knowledge("full disk", dataset_ids=["runbooks"], top_k=1)
    assert [r["content"] for r in found["results"]] == [RUNBOOK]
    job = memory.build_knowledge_graph(["runbooks"])["job"]
    assert job["url"] == f"/v1/jobs/{job['id']}"
    assert memory.job(job["id"])["kind"] == "knowledge_graph"  # the agent's key follows its own job
    relations = memory.dataset_relations("runbooks", limit=10)
    assert relations["dataset_id"] == "runbooks" and relations["engine_id"] == "builtin"

    answered = memory.answer("Why was revenue lost?", mode="recall", scopes=["agent"], top_k=3)
    assert answered["mode"] == "recall" and answered["answer"]["citations"]
    assert set(answered["answer"]["citations"]) <= {fact["id"] for fact in answered["facts"]}

    assert memory.delete_dataset("faq")["dataset_id"] == "faq"
    assert [d["dataset_id"] for d in memory.iter_datasets()] == ["runbooks"]
    with pytest.raises(NotFound) as missing:
        memory.search_knowledge("x", dataset_ids=["faq"])
    assert missing.value.code == "knowledge_dataset_not_found"
    with pytest.raises(ValidationError) as bad:
        memory.ingest_knowledge("Bad Name", ["x."])
    assert "dataset_id" in bad.value.details["fields"]


def test_async_client_knowledge(world, live_server):
    key = f.agent_key(world.agent)

    async def scenario():
        async with AsyncFedmemClient(live_server.url, key) as client:
            memory = client.agent(str(world.agent.pk))
            await memory.ingest_knowledge("runbooks", [RUNBOOK])
            datasets = [d["dataset_id"] async for d in memory.iter_datasets()]
            found = await memory.search_knowledge("full disk", search_type="CHUNKS_LEXICAL")
            answered = await memory.answer("Why was revenue lost?", mode="recall", scopes=["agent"])
            return datasets, found, answered

    datasets, found, answered = asyncio.run(scenario())
    assert datasets == ["runbooks"] and found["results"][0]["content"] == RUNBOOK
    assert answered["facts"][0]["content"] == RUNBOOK


def test_knowledge_of_a_foreign_agent_is_not_found(world, live_server):
    with FedmemClient(live_server.url, f.agent_key(world.agent), max_retries=1) as client:
        foreign = client.agent(str(world.foreign_agent.pk))
        with pytest.raises(NotFound) as caught:
            foreign.ingest_knowledge("runbooks", ["x."])
    assert caught.value.code == "agent_not_found"
