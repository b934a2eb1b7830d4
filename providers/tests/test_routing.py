"""Engine selection from the agent's policy: mem0 takes memory writes, cognee takes
knowledge, hybrid both; recall merges builtin with them; session memory stays
builtin; isolation, capabilities and unreachable engines answer with clear codes.
Against the local protocol-faithful Mem0 and Cognee servers."""

from __future__ import annotations

import pytest

from conftest import assert_error
from governance.models import AgentPolicyVersion
from governance.services.policies import policy_version_create
from memory.enforcement import system_access
from memory.models import Dataset, MemoryItem
from memory.services.items import MemoryDraft, memory_remember
from providers.models import AccessControl
from providers.tests.engines import declare
from providers.tests.fakes.cognee import STATIC_TOKEN, CogneeFake
from providers.tests.fakes.mem0 import API_KEY as MEM0_KEY
from providers.tests.fakes.mem0 import Mem0Platform


@pytest.fixture
def engines_up(world, monkeypatch):
    mem0, cognee = Mem0Platform().start(), CogneeFake().start()
    memories, state = mem0.memories, cognee
    monkeypatch.setenv("FEDMEM_CRED_MEM0", MEM0_KEY)
    monkeypatch.setenv("FEDMEM_CRED_COGNEE", STATIC_TOKEN)
    key = AccessControl.PLATFORM_KEY
    declare("mem0-eu", mem0.url, provider="mem0", access_control=key, credential_ref="env://FEDMEM_CRED_MEM0")
    declare(
        "cognee-eu",
        cognee.url,
        provider="cognee",
        access_control=key,
        credential_ref="env://FEDMEM_CRED_COGNEE",
    )
    yield {"mem0": mem0, "memories": memories, "cognee": cognee, "cognee_state": state}
    mem0.stop()
    cognee.stop()


def use(agent, engine: str, policy: dict | None = None, **instances):
    return policy_version_create(agent=agent, policy=policy or {}, engine=engine, **instances)


def memories_url(agent, suffix: str = "") -> str:
    return f"/v1/memory/agents/{agent.pk}/memories{suffix}"


def knowledge_url(agent, suffix: str = "") -> str:
    return f"/v1/memory/agents/{agent.pk}/knowledge{suffix}"


def recall(client, agent, **body):
    body.setdefault("user_id", "cust-1")
    return client.post(f"/v1/memory/agents/{agent.pk}/recall", body, format="json")


def test_mem0_policy_sends_writes_to_mem0_reported_as_queued(world, engines_up, as_agent):
    use(world.agent, "mem0", mem0_instance="mem0-eu")
    response = as_agent(world.agent).post(
        memories_url(world.agent), {"content": "Alice prefers green tea", "user_id": "cust-1"}, format="json"
    )
    assert response.status_code == 202, response.content
    engine = response.json()["engine"]
    assert engine["engine_id"] == "mem0-eu" and engine["status"] == "queued"
    assert engine["event_id"] == "00000000-0000-4000-8000-000000000001"
    assert not MemoryItem.objects.exists()  # not stored twice
    add = next(r for r in engines_up["mem0"].requests if r.path == "/v3/memories/add/")
    # One entity id per write (Mem0 matches several strictly); the agent goes in metadata.
    assert add.json["filters"] == {"user_id": "acme:cust-1"}
    assert add.json["metadata"]["fedmem_agent"] == str(world.agent.pk)
    assert response.json()["engine"]["write_id"]  # followed until Mem0 settles it
    assert "traceparent" in add.headers


def test_session_memory_always_stays_builtin(world, engines_up, as_agent):
    use(world.agent, "hybrid", mem0_instance="mem0-eu", cognee_instance="cognee-eu")
    response = as_agent(world.agent).post(
        memories_url(world.agent),
        {"content": "Call me back at 5", "scope": "session", "session_id": "s1"},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert MemoryItem.objects.get(pk=response.json()["id"]).scope == "session"
    assert not engines_up["memories"]


def test_the_policy_still_refuses_before_anything_leaves(world, engines_up, as_agent):
    use(world.agent, "mem0", mem0_instance="mem0-eu")
    before = len(engines_up["mem0"].requests)
    response = as_agent(world.agent).post(
        memories_url(world.agent),
        {"content": "x", "classification": "restricted", "user_id": "c"},
        format="json",
    )
    assert_error(response, 403, "memory_policy_violation")
    assert_error(as_agent(world.agent).post(memories_url(world.agent), {"content": " "}, format="json"), 400)
    assert len(engines_up["mem0"].requests) == before


@pytest.mark.django_db(transaction=True)  # the builtin source runs on its own thread and connection
def test_recall_merges_builtin_and_mem0_by_content_keeping_every_source(world, engines_up, as_agent):
    use(world.agent, "mem0", mem0_instance="mem0-eu")
    client = as_agent(world.agent)
    memory_remember(
        access=system_access(world.agent), draft=MemoryDraft("Alice prefers green tea.", user_id="cust-1")
    )
    client.post(
        memories_url(world.agent), {"content": "alice prefers green tea", "user_id": "cust-1"}, format="json"
    )
    client.post(
        memories_url(world.agent), {"content": "Alice lives in Porto", "user_id": "cust-1"}, format="json"
    )
    engines_up["mem0"].process()  # Mem0's workers turn the queued adds into memories
    response = recall(client, world.agent, query="alice green tea")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ok" and body["engine"] == "mem0"
    assert [s["engine_id"] for s in body["sources"]] == ["builtin", "mem0-eu"]
    top = body["results"][0]
    assert top["engines"] == ["builtin", "mem0-eu"] and len(top["matches"]) == 2
    assert top["id"] == str(MemoryItem.objects.get().pk)  # the builtin copy names the result
    assert body["nonce"] in body["context"] and top["trust"] == "untrusted"


def test_cognee_policy_sends_knowledge_to_cognee(world, engines_up, as_agent, as_user):
    use(world.agent, "cognee", cognee_instance="cognee-eu")
    client = as_agent(world.agent)
    body = {"texts": ["Alice leads the robotics team.", "The robotics team is based in Porto."],
            "dataset_id": "handbook"}  # fmt: skip
    response = client.post(knowledge_url(world.agent), body, format="json")
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["engine_id"] == "cognee-eu" and data["chunks"] == 0 and data["item_ids"] == []
    assert data["engine_result"]["detail"]["documents"] == 2
    assert not MemoryItem.objects.exists()
    state = engines_up["cognee_state"]
    assert [d["name"] for d in state.datasets.values()] == ["acme-handbook"]
    assert Dataset.objects.get(name="handbook").engine == "cognee-eu"

    found = client.post(
        knowledge_url(world.agent, "/search"), {"query": "robotics team"}, format="json"
    ).json()
    assert [r["engine_id"] for r in found["results"]] == ["cognee-eu", "cognee-eu"]
    completion = client.post(
        knowledge_url(world.agent, "/search"),
        {"query": "robotics team", "search_type": "GRAPH_COMPLETION"},
        format="json",
    ).json()
    assert completion["engine_answers"] == [
        {"engine_id": "cognee-eu", "text": "Alice leads the robotics team."}
    ]
    assert set(completion["answer"]["citations"]) == {r["id"] for r in completion["results"]}

    graph = client.post(knowledge_url(world.agent, "/graph"), {"dataset_ids": ["handbook"]}, format="json")
    assert graph.status_code == 202
    from governance.models import Job
    from memory.tasks import knowledge_graph_build

    job = Job.objects.get(pk=graph.json()["job"]["id"])
    knowledge_graph_build(str(job.pk), str(world.agent.pk), [Dataset.objects.get(name="handbook").pk])
    job.refresh_from_db()
    assert job.status == "succeeded", job.error
    assert job.result["datasets"]["handbook"]["status"] == "queued"  # Cognee builds in the background
    assert Dataset.objects.get(name="handbook").graph_status == "queued"
    assert state.running

    relations = client.get(knowledge_url(world.agent, "/datasets/handbook/relations")).json()
    assert {
        "subject": "Alice",
        "predicate": "leads",
        "object": "Robotics team",
        "text": "Alice leads Robotics team",
    } in relations["relations"]

    assert client.delete(knowledge_url(world.agent, "/datasets/handbook")).status_code == 200
    assert not state.datasets and not Dataset.objects.exists()


def test_hybrid_recall_queries_builtin_mem0_and_cognee(world, engines_up, as_agent):
    use(world.agent, "hybrid", mem0_instance="mem0-eu", cognee_instance="cognee-eu")
    client = as_agent(world.agent)
    written = client.post(
        memories_url(world.agent),
        {"content": "Alice leads the robotics team", "user_id": "cust-1"},
        format="json",
    )
    assert written.status_code == 202
    client.post(knowledge_url(world.agent), {"texts": ["Alice leads the robotics team."], "dataset_id": "hb"},
                format="json")  # fmt: skip
    engines_up["mem0"].process()
    body = recall(client, world.agent, query="robotics team").json()
    assert [s["engine_id"] for s in body["sources"]] == ["builtin", "mem0-eu", "cognee-eu"]
    top = body["results"][0]
    # Mem0 calls it a fact, Cognee a document: one result, both sources kept.
    assert set(top["engines"]) == {"mem0-eu", "cognee-eu"} and set(top["kinds"]) == {"fact", "document"}
    # The federated route defaults to the policy's engines too.
    fed = client.post(
        f"/v1/memory/agents/{world.agent.pk}/federated/recall", {"query": "robotics"}, format="json"
    )
    assert [s["engine_id"] for s in fed.json()["sources"]] == ["builtin", "mem0-eu", "cognee-eu"]


def test_an_engine_weaker_than_the_required_isolation_is_422(world, engines_up, as_agent):
    use(world.agent, "mem0", {"required_isolation": "dedicated"}, mem0_instance="mem0-eu")
    client = as_agent(world.agent)
    error = assert_error(
        client.post(memories_url(world.agent), {"content": "x y", "user_id": "c"}, format="json"),
        422,
        "memory_isolation_insufficient",
    )
    assert error["details"] == {
        "engine_id": "mem0-eu", "engine_isolation": "logical", "required_isolation": "dedicated",
    }  # fmt: skip
    assert_error(recall(client, world.agent, query="x"), 422, "memory_isolation_insufficient")
    assert not engines_up["mem0"].requests


def test_an_operation_the_engine_does_not_announce_is_422(world, engines_up, as_agent):
    # A version written before the instance was re-declared as another provider.
    AgentPolicyVersion.objects.create(agent=world.agent, version=99, engine="mem0", mem0_instance="cognee-eu")
    response = as_agent(world.agent).post(
        memories_url(world.agent), {"content": "x y", "user_id": "c"}, format="json"
    )
    error = assert_error(response, 422, "memory_capability_unsupported")
    assert error["details"] == {"engine_id": "cognee-eu", "operation": "remember"}


def test_an_unreachable_engine_is_502_and_nothing_is_recorded(world, engines_up, as_agent):
    use(world.agent, "hybrid", mem0_instance="mem0-eu", cognee_instance="cognee-eu")
    engines_up["mem0"].stop()
    engines_up["cognee"].stop()
    client = as_agent(world.agent)
    response = client.post(memories_url(world.agent), {"content": "x y", "user_id": "c"}, format="json")
    assert_error(response, 502, "memory_engine_unavailable")
    response = client.post(knowledge_url(world.agent), {"texts": ["a."], "dataset_id": "kb"}, format="json")
    assert_error(response, 502, "memory_engine_unavailable")
    assert not Dataset.objects.exists() and not MemoryItem.objects.exists()
    # A recall reports the failing sources instead of raising.
    body = recall(client, world.agent, query="x").json()
    assert body["status"] == "partial"
    assert {s["engine_id"]: s["status"] for s in body["sources"]}["mem0-eu"] in ("unavailable", "error")


def test_a_removed_engine_is_named(world, engines_up, as_agent):
    use(world.agent, "mem0", mem0_instance="mem0-eu")
    from providers.models import EngineInstance

    EngineInstance.objects.filter(pk="mem0-eu").delete()
    response = as_agent(world.agent).post(
        memories_url(world.agent), {"content": "x y", "user_id": "c"}, format="json"
    )
    assert_error(response, 422, "memory_engine_missing")


def test_a_builtin_policy_keeps_everything_builtin(world, engines_up, as_agent):
    client = as_agent(world.agent)
    response = client.post(
        memories_url(world.agent), {"content": "Alice likes tea", "user_id": "c"}, format="json"
    )
    assert response.status_code == 201 and MemoryItem.objects.count() == 1
    body = recall(client, world.agent, query="alice tea", user_id="c").json()
    assert "sources" not in body and body["results"][0]["content"] == "Alice likes tea"
    assert not engines_up["mem0"].requests


def test_batches_and_split_paragraphs_go_to_mem0_one_result_each(world, engines_up, as_agent):
    use(world.agent, "mem0", mem0_instance="mem0-eu")
    client = as_agent(world.agent)
    items = [
        {"content": "Alice prefers green tea", "user_id": "cust-1"},
        {"content": "Chat line", "scope": "session", "session_id": "s1"},
        {"content": "Too secret", "user_id": "cust-1", "classification": "restricted"},
    ]
    response = client.post(memories_url(world.agent, "/batch"), {"items": items}, format="json")
    assert response.status_code == 202, response.content
    body = response.json()
    assert [r["status"] for r in body["results"]] == ["queued", "created", "error"]
    assert (body["queued"], body["created"], body["failed"]) == (1, 1, 1)
    assert body["results"][2]["error"]["code"] == "memory_policy_violation"
    assert MemoryItem.objects.get().scope == "session"
    split = client.post(
        memories_url(world.agent),
        {"content": "Alice moved to Porto. She works at the port.", "user_id": "cust-1", "split": True},
        format="json",
    )
    assert split.status_code == 202, split.content
    assert [r["status"] for r in split.json()["results"]] == ["queued", "queued"]
    engines_up["mem0"].process()
    assert {m["memory"] for m in engines_up["memories"].values()} >= {
        "Alice moved to Porto.", "She works at the port.",
    }  # fmt: skip
