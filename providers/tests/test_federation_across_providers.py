"""One federated recall across different providers, each through its own adapter and
official client, against the same local servers the adapter tests use."""

from __future__ import annotations

import pytest

from providers.adapters.base import OperationContext
from providers.adapters.graphiti import GraphitiAdapter
from providers.adapters.zep import ZepAdapter
from providers.models import AccessControl
from providers.tests.adapters.test_letta import letta_server
from providers.tests.engines import declare
from providers.tests.fakes.graphiti import GraphitiFake
from providers.tests.fakes.mem0 import API_KEY as MEM0_KEY
from providers.tests.fakes.mem0 import Mem0Platform
from providers.tests.fakes.zep import API_KEY as ZEP_KEY
from providers.tests.fakes.zep import ZepFake


@pytest.fixture
def providers_up(world, monkeypatch):
    from providers.adapters.registry import warm

    assert warm(["mem0", "zep", "letta", "graphiti"]) == dict.fromkeys(
        ["mem0", "zep", "letta", "graphiti"], "ok"
    )
    mem0, zep, graphiti = Mem0Platform().start(), ZepFake().start(), GraphitiFake().start()
    letta = letta_server(tag=f"fedmem:{world.tenant.slug}:{world.agent.pk}")
    servers = [mem0, zep, letta, graphiti]
    tenant, agent = world.tenant.slug, str(world.agent.pk)
    alice = OperationContext(
        operation="recall",
        tenant_id=str(world.tenant.pk),
        tenant_slug=tenant,
        agent_id=agent,
        user_id="alice",
    )
    # What each provider already holds for this tenant's agent and its user "alice".
    mem0.seed(
        id="m-1", memory="Alice lives in Porto", user_id=f"{tenant}:alice", created_at="2026-03-01T10:00:00Z"
    )
    graphiti.seed_episode(
        GraphitiAdapter.group_id(alice),
        "user: I moved to Porto",
        [
            {
                "uuid": "f-1",
                "name": "LIVES_IN",
                "fact": "Alice lives in Porto",
                "valid_at": "2026-02-01T00:00:00Z",
                "invalid_at": None,
                "created_at": "2026-02-01T00:00:00Z",
                "expired_at": None,
            }
        ],
    )
    zep_graph = zep.graphs[zep.add_user(ZepAdapter.user_key(alice))["graph_uuid"]]
    zep_graph["edges"] = [
        {
            "uuid": "edge-1",
            "fact": "Alice lives in Lisbon",
            "name": "LIVES_IN",
            "source_node_name": "Alice",
            "target_node_name": "Lisbon",
            "valid_at": "2024-01-01T00:00:00Z",
            "invalid_at": None,
        }
    ]
    monkeypatch.setenv("FEDMEM_CRED_MEM0", MEM0_KEY)
    monkeypatch.setenv("FEDMEM_CRED_ZEP", ZEP_KEY)
    monkeypatch.setenv("FEDMEM_CRED_LETTA", "letta-key")
    key = AccessControl.PLATFORM_KEY
    declare(
        "mem0",
        mem0.url,
        provider="mem0",
        access_control=key,
        credential_ref="env://FEDMEM_CRED_MEM0",
    )
    declare(
        "zep",
        zep.url,
        provider="zep",
        access_control=key,
        credential_ref="env://FEDMEM_CRED_ZEP",
    )
    declare(
        "letta",
        letta.url,
        provider="letta",
        access_control=key,
        credential_ref="env://FEDMEM_CRED_LETTA",
    )
    declare("graphiti", graphiti.url, provider="graphiti", tenant=world.tenant)
    yield servers
    for server in servers:
        server.stop()


def test_a_recall_across_four_providers(world, providers_up, as_agent):
    response = as_agent(world.agent).post(
        f"/v1/memory/agents/{world.agent.pk}/federated/recall",
        # The longest budget there is: this test is about fusion, not about how fast
        # four local servers answer on a busy machine (the deadline has its own tests).
        {"query": "where does alice live", "user_id": "alice", "top_k": 10, "timeout_ms": 60000},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    # fedmem's own memory is always one of the default sources (empty here).
    assert {s["engine_id"]: s["status"] for s in body["sources"]} == {
        "builtin": "ok",
        "graphiti": "ok",
        "letta": "ok",
        "mem0": "ok",
        "zep": "ok",
    }
    by_text = {g["text"]: g for g in body["results"]}
    assert by_text["Alice lives in Porto"]["kind"] == "fact"
    assert by_text["Alice lives in Lisbon"]["kind"] in {"fact", "edge"}
    # Graphiti's Porto fact and Mem0's Porto memory are one group with both matches.
    porto = by_text["Alice lives in Porto"]
    assert {m["provider_id"] for m in porto["matches"]} == {"mem0", "graphiti"}
    # Mem0 says Porto, Zep says Lisbon: flagged, not resolved.
    assert porto["conflict"] is not None
    kinds = {g["kind"] for g in body["results"]}
    assert "pinned_context" in kinds  # Letta's core memory blocks
