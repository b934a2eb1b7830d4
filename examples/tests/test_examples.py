"""Every example runs against a live fedmem: REST examples on Django's live server,
the MCP configurations on daphne serving the production ASGI app."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time

import pytest

from examples import import_candidates, langgraph_store, mcp_client, shared_memory
from fedmem_client import FedmemClient
from fedmem_mcp.tests.live import ROOT, subprocess_env
from governance.models import Candidate
from governance.services.policies import policy_version_create
from governance.tests import factories as f
from memory.models import MemoryItem

pytestmark = pytest.mark.django_db(transaction=True)

TEAM_POLICY = {
    "teams": [shared_memory.TEAM],
    "write_scopes": ["team", "agent"],
    "read_scopes": ["team", "agent"],
    "default_scope": "team",
    "modes": {"shared": True},
}


@pytest.mark.worker
def test_two_agents_discover_each_others_facts(world, live_server, worker_factory):
    worker_factory()
    for agent in (world.agent, world.sibling):
        policy_version_create(agent=agent, policy=TEAM_POLICY)
    outcome = shared_memory.run(live_server.url, f.agent_key(world.agent), f.agent_key(world.sibling))
    oncall_fact = outcome["written"]["oncall"][0]
    database_fact = outcome["written"]["database"][0]
    assert MemoryItem.objects.get(pk=oncall_fact).agent_id == world.agent.pk
    assert MemoryItem.objects.get(pk=database_fact).agent_id == world.sibling.pk
    by_database = {r["id"]: r for r in outcome["database"]["results"]}
    by_oncall = {r["id"]: r for r in outcome["oncall"]["results"]}
    assert oncall_fact in by_database and database_fact in by_oncall
    # In a memory of two facts both are search candidates (kind "seed"), and an entity
    # both share is in every document, so it has no specificity and lends no graph
    # support: what the example shows is that each agent reads the other's fact.
    for found, other in ((by_database, oncall_fact), (by_oncall, database_fact)):
        assert len(found) == 2
        assert found[other]["why"]["reached_by"] == "seed" and found[other]["cross_session"] is False


def test_a_private_agent_sees_none_of_the_team(world, live_server):
    policy_version_create(agent=world.agent, policy=TEAM_POLICY)
    with FedmemClient(live_server.url, f.agent_key(world.agent)) as client:
        shared_memory.agent_of(client).remember(
            shared_memory.ONCALL_FACTS[0], scope="team", team="incident-response"
        )
    with FedmemClient(live_server.url, f.agent_key(world.sibling)) as client:
        seen = shared_memory.agent_of(client).discover("what filled the disk on db-1?")
    assert seen["results"] == []


def test_langgraph_agent_keeps_long_term_memory_in_fedmem(world, live_server):
    with FedmemClient(live_server.url, f.agent_key(world.agent)) as client:
        store = langgraph_store.FedmemStore(client.agent(str(world.agent.pk)))
        agent = langgraph_store.build_graph(store)
        told = agent.invoke(
            {"user": "dana", "message": "remember Dana's favourite editor is Helix", "reply": ""}
        )
        assert told["reply"] == "Noted: Dana's favourite editor is Helix"
        # A fresh graph run (another thread of conversation) answers from the store.
        asked = langgraph_store.build_graph(store).invoke(
            {"user": "dana", "message": "Which editor does Dana like?", "reply": ""}
        )
        assert asked["reply"] == "From memory: Dana's favourite editor is Helix"
        assert (
            langgraph_store.build_graph(store).invoke(
                {"user": "erin", "message": "Which editor does Erin like?", "reply": ""}
            )["reply"]
            == "I don't know yet."
        )

        item = MemoryItem.objects.get()
        assert (item.scope, item.source, item.metadata["langgraph"]["namespace"]) == (
            "agent",
            "langgraph",
            ["memories", "dana"],
        )
        # The BaseStore contract: get, update in place, list namespaces, delete.
        store.put(("prefs", "dana"), "theme", {"text": "dark"})
        assert store.get(("prefs", "dana"), "theme").value == {"text": "dark"}
        store.put(("prefs", "dana"), "theme", {"text": "light"})
        assert store.get(("prefs", "dana"), "theme").value == {"text": "light"}
        assert MemoryItem.objects.count() == 2
        assert store.list_namespaces(prefix=("prefs",)) == [("prefs", "dana")]
        assert [i.key for i in store.search(("prefs",))] == ["theme"]
        store.delete(("prefs", "dana"), "theme")
        assert store.get(("prefs", "dana"), "theme") is None and MemoryItem.objects.count() == 1
        assert asyncio.run(store.aget(("prefs", "dana"), "theme")) is None


def test_mcp_configurations_for_assistants(world, asgi_server):
    key = f.agent_key(world.agent)
    http = mcp_client.load(ROOT / "examples/mcp/http.json")
    http["url"] = asgi_server.url + "/mcp"
    http["headers"]["Authorization"] = f"Bearer {key}"
    stdio = mcp_client.load(ROOT / "examples/mcp/stdio.json")
    assert stdio["args"][1] == "fedmem_mcp"
    stdio["command"] = sys.executable
    stdio["args"][0] = str(ROOT / "manage.py")
    stdio["env"] = {**subprocess_env(), "FEDMEM_MCP_KEY": key}

    for server, fact in ((http, "Releases leave on Thursdays"), (stdio, "Hotfixes ship on Mondays")):
        outcome = asyncio.run(mcp_client.use(server, fact, "When do releases and hotfixes go out?"))
        assert "remember" in outcome["tools"] and not outcome["stored"].is_error
        assert fact in outcome["recalled"].content[0].text
        assert outcome["recalled"].content[0].text.startswith("<<<MEMORY_DATA_BEGIN nonce=")
    assert MemoryItem.objects.count() == 2


def test_import_candidates_and_promote(world, live_server, local_server, settings):
    settings.FEDMEM_ENGINES_ALLOW_HTTP = True  # the local engine speaks plain HTTP on loopback
    from core.models import OutboxMessage
    from providers.imports import candidates_import_run
    from providers.tests.engines import custom_engine, declare

    records = [
        {"id": "r1", "kind": "fact", "text": "Jane prefers morning calls"},
        {"id": "r2", "kind": "episode", "text": "Jane called about invoice 42"},
    ]
    declare("crm-engine", custom_engine(records, server=local_server()).url)
    outcome: dict = {}

    def script() -> None:
        outcome.update(
            import_candidates.import_and_promote(
                live_server.url,
                f.user_key(world.admin, world.tenant),
                agent_id=str(world.agent.pk),
                engine_id="crm-engine",
                subject="jane",
                keep=lambda candidate: candidate["record_kind"] == "fact",
                timeout=60,
            )
        )

    thread = threading.Thread(target=script)
    thread.start()
    # The job's task, run here instead of on a worker.
    deadline = time.monotonic() + 30
    while not OutboxMessage.objects.filter(task_name="providers.import_candidates").exists():
        assert time.monotonic() < deadline
        time.sleep(0.2)
    message = OutboxMessage.objects.get(task_name="providers.import_candidates")
    candidates_import_run(
        job_id=message.args[0],
        agent_id=message.args[1],
        engine_id=message.args[2],
        subject=message.args[3],
        limit=message.args[4],
    )
    thread.join(90)
    assert len(outcome["promoted"]) == 1 and len(outcome["rejected"]) == 1
    assert MemoryItem.objects.get(pk=outcome["promoted"][0]).content == "Jane prefers morning calls"
    assert set(Candidate.objects.values_list("status", flat=True)) == {"promoted", "rejected"}
    assert json.dumps(outcome["job"])
