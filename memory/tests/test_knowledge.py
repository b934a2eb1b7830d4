"""Knowledge datasets on the builtin engine: ingest, list, graph build (a job), search
types, relations, delete (with everything derived; refused under legal hold). Each
endpoint permitted, with bad input, anonymous, with the wrong role and across tenants."""

from __future__ import annotations

import os

import pytest
from rest_framework.test import APIClient

from conftest import assert_error
from governance.models import AuditEvent, Job
from governance.services.holds import legal_hold_place
from memory.models import CausalEdge, Dataset, MemoryItem, Mention
from memory.tasks import knowledge_graph_build
from memory.tests.graph_helpers import INCIDENT

RUNBOOK = " ".join(text for _, text in INCIDENT)
OTHER = "The cafeteria serves green tea on Mondays. Parking is free for visitors."


def url(agent, suffix: str = "") -> str:
    return f"/v1/memory/agents/{agent.pk}/knowledge{suffix}"


def ingest(client, agent, **body):
    body.setdefault("texts", [RUNBOOK, OTHER])
    body.setdefault("dataset_id", "runbooks")
    return client.post(url(agent), body, format="json")


def build(client, agent, names=("runbooks",)) -> Job:
    response = client.post(url(agent, "/graph"), {"dataset_ids": list(names)}, format="json")
    assert response.status_code == 202, response.content
    job = Job.objects.get(pk=response.json()["job"]["id"])
    dataset = Dataset.objects.get(name=names[0])
    assert job.status == Job.Status.QUEUED and dataset.graph_status == "queued"
    # The task function the worker runs, in this process.
    knowledge_graph_build(str(job.pk), str(agent.pk), [d.pk for d in Dataset.objects.filter(name__in=names)])
    job.refresh_from_db()
    return job


@pytest.fixture
def runbooks(world, as_agent):
    response = ingest(as_agent(world.agent), world.agent)
    assert response.status_code == 201, response.content
    return response.json()


def test_ingest_stores_chunks_as_document_memories_of_the_dataset(world, runbooks):
    assert runbooks["created"] is True and runbooks["engine_id"] == "builtin"
    assert runbooks["dataset"]["dataset_id"] == "runbooks" and runbooks["dataset"]["documents"] == 2
    assert runbooks["chunks"] == 2 and runbooks["stored"] == 2 and runbooks["failed"] == []
    items = MemoryItem.objects.filter(pk__in=runbooks["item_ids"]).order_by("metadata__document")
    assert [i.record_kind for i in items] == ["document", "document"]
    assert {i.dataset.name for i in items} == {"runbooks"}
    assert {i.provenance["dataset"] for i in items} == {"runbooks"}
    assert {i.scope for i in items} == {"agent"} and {i.user_id for i in items} == {""}
    assert items[0].content == RUNBOOK


def test_the_same_text_in_another_dataset_is_its_own_chunk(world, as_agent, runbooks):
    again = ingest(as_agent(world.agent), world.agent, texts=[OTHER], dataset_id="faq").json()
    assert again["stored"] == 1 and again["item_ids"][0] not in runbooks["item_ids"]
    twice = ingest(as_agent(world.agent), world.agent, texts=[OTHER]).json()
    assert twice["created"] is False and twice["deduplicated"] == 1 and twice["stored"] == 0


def test_long_texts_are_chunked_at_sentence_boundaries():
    from memory.services.knowledge import chunks_of

    text = " ".join(f"Sentence number {i} is here." for i in range(200))
    pieces = chunks_of(text, limit=300)
    assert len(pieces) > 1 and all(len(p) <= 300 for p in pieces)
    assert all(p.endswith(".") for p in pieces) and " ".join(pieces) == text


def test_graph_build_is_a_job_with_progress_then_relations(world, as_agent, as_user, runbooks):
    job = build(as_agent(world.agent), world.agent)
    assert job.status == Job.Status.SUCCEEDED, job.error
    assert job.kind == "knowledge_graph" and job.progress == job.total == 2
    report = job.result["datasets"]["runbooks"]
    assert report["status"] == "built" and report["chunks"] == 2 and report["causal_edges"] >= 3
    dataset = Dataset.objects.get(name="runbooks")
    assert dataset.graph_status == "built" and dataset.graph_built_at is not None
    polled = as_user(world.owner).get(f"/v1/jobs/{job.pk}").json()
    assert polled["status"] == "succeeded"
    relations = as_agent(world.agent).get(url(world.agent, "/datasets/runbooks/relations")).json()
    causes = {(e["cause"], e["effect"]) for e in relations["causal_edges"]}
    assert ("Verbose debug logging", "a full disk on db-1") in causes
    assert {e["item_id"] for e in relations["causal_edges"]} <= set(runbooks["item_ids"])
    assert any(e["name"].lower().startswith("db-1") or "db-1" in e["name"] for e in relations["entities"])


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_builds_the_graph(world, as_agent, worker_factory):
    from governance.tests.test_worker import wait_for

    worker_factory()
    client = as_agent(world.agent)
    assert ingest(client, world.agent, build_graph=True).status_code == 201
    dataset = Dataset.objects.get(name="runbooks")
    job = wait_for(Job.objects.get(pk=dataset.graph_job), timeout=120)
    assert job.status == Job.Status.SUCCEEDED, job.error
    assert int(job.worker.rsplit(":", 1)[1]) != os.getpid()
    dataset.refresh_from_db()
    assert dataset.graph_status == "built"


@pytest.mark.parametrize("search_type", ["CHUNKS", "CHUNKS_LEXICAL", "SUMMARIES"])
def test_search_types_find_the_chunk(world, as_agent, runbooks, search_type):
    body = {"query": "full disk", "search_type": search_type, "top_k": 1}
    response = as_agent(world.agent).post(url(world.agent, "/search"), body, format="json")
    assert response.status_code == 200, response.content
    data = response.json()
    assert [r["content"] for r in data["results"]] == [RUNBOOK]
    assert data["results"][0]["dataset_id"] == "runbooks"
    assert "answer" not in data
    if search_type == "SUMMARIES":
        summary = data["results"][0]["summary"]
        assert summary.startswith(INCIDENT[0][1]) and "full disk" in summary


def test_search_is_confined_to_the_named_datasets(world, as_agent, runbooks):
    ingest(
        as_agent(world.agent), world.agent, texts=["A full disk stopped the build server."], dataset_id="ci"
    )
    data = (
        as_agent(world.agent)
        .post(url(world.agent, "/search"), {"query": "full disk", "dataset_ids": ["ci"]}, format="json")
        .json()
    )
    assert {r["dataset_id"] for r in data["results"]} == {"ci"}


@pytest.mark.parametrize("search_type", ["RAG_COMPLETION", "GRAPH_COMPLETION"])
def test_completions_return_their_context_and_a_cited_answer(world, as_agent, runbooks, search_type):
    build(as_agent(world.agent), world.agent)
    body = {"query": "Why was revenue lost?", "search_type": search_type, "top_k": 3}
    data = as_agent(world.agent).post(url(world.agent, "/search"), body, format="json").json()
    context, answer = data["context"], data["answer"]
    assert [f["id"] for f in context["facts"]] == [r["id"] for r in data["results"]]
    assert context["causal_paths"] and context["causal_paths"][0]["cause"] == "Verbose debug logging"
    assert answer["text"].startswith("Root cause: Verbose debug logging")
    assert answer["citations"] and set(answer["citations"]) <= {f["id"] for f in context["facts"]}
    assert context["entities"]


def test_delete_removes_the_dataset_and_everything_derived(world, as_agent, runbooks):
    build(as_agent(world.agent), world.agent)
    ids = runbooks["item_ids"]
    assert (
        Mention.objects.filter(item_id__in=ids).exists()
        and CausalEdge.objects.filter(item_id__in=ids).exists()
    )
    response = as_agent(world.agent).delete(url(world.agent, "/datasets/runbooks"))
    assert response.status_code == 200, response.content
    deleted = response.json()["deleted"]
    assert deleted["items"] == 2 and deleted["causal_edges"] >= 3 and deleted["mentions"] >= 1
    assert not MemoryItem.objects.filter(pk__in=ids).exists()
    assert not Mention.objects.filter(item_id__in=ids).exists()
    assert not CausalEdge.objects.filter(item_id__in=ids).exists()
    assert not Dataset.objects.filter(name="runbooks").exists()
    assert AuditEvent.objects.filter(action="memory.knowledge.dataset.delete", target_id="runbooks").exists()
    assert_error(as_agent(world.agent).delete(url(world.agent, "/datasets/runbooks")), 404)


def test_delete_is_refused_under_legal_hold(world, as_agent, runbooks):
    legal_hold_place(
        tenant=world.tenant, actor=world.officer, target="dataset", dataset="runbooks", reason="case"
    )
    before = MemoryItem.objects.filter(dataset__name="runbooks").count()
    error = assert_error(
        as_agent(world.agent).delete(url(world.agent, "/datasets/runbooks")), 409, "memory_legal_hold"
    )
    assert error["details"]["dataset_id"] == "runbooks"
    assert MemoryItem.objects.filter(dataset__name="runbooks").count() == before == 2
    assert AuditEvent.objects.filter(action="legal_hold.blocked").exists()
    held = ingest(as_agent(world.agent), world.agent, dataset_id="held", texts=[OTHER], legal_hold=True)
    assert held.json()["dataset"]["legal_hold"] is True
    assert_error(as_agent(world.agent).delete(url(world.agent, "/datasets/held")), 409, "memory_legal_hold")


def test_datasets_list_paginates_and_filters_by_scope(
    world, as_agent, runbooks, django_assert_max_num_queries
):
    client = as_agent(world.agent)
    for name in ("a1", "a2", "a3"):
        ingest(client, world.agent, dataset_id=name, texts=[f"Note {name}."])
    client.get(url(world.agent, "/datasets"))
    with django_assert_max_num_queries(5):
        page = client.get(url(world.agent, "/datasets") + "?limit=2").json()
    assert [d["dataset_id"] for d in page["results"]] == ["a3", "a2"] and page["next"]
    rest = client.get(page["next"]).json()
    assert [d["dataset_id"] for d in rest["results"]] == ["a1", "runbooks"]
    assert client.get(url(world.agent, "/datasets") + "?scope=team").json()["results"] == []
    assert_error(client.get(url(world.agent, "/datasets") + "?scope=session"), 400)


def test_a_dataset_of_another_agent_is_a_conflict_and_invisible(world, as_agent, runbooks):
    response = ingest(as_agent(world.sibling), world.sibling)
    assert_error(response, 409, "knowledge_dataset_exists")
    sibling = as_agent(world.sibling)
    assert sibling.get(url(world.sibling, "/datasets")).json()["results"] == []
    assert_error(sibling.delete(url(world.sibling, "/datasets/runbooks")), 404, "knowledge_dataset_not_found")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"texts": []}, "texts"),
        ({"texts": ["x"] * 51}, "texts"),
        ({"texts": ["   "]}, "texts"),
        ({"dataset_id": "Bad Name"}, "dataset_id"),
        ({"dataset_id": "a__b"}, "dataset_id"),
        ({"scope": "session"}, "scope"),
        ({"scope": "team"}, "team"),
        ({"classification": "secret"}, "classification"),
    ],
)
def test_bad_ingest_names_the_field_and_stores_nothing(world, as_agent, body, field):
    error = assert_error(ingest(as_agent(world.agent), world.agent, **body), 400)
    assert field in error["details"]["fields"]
    assert not Dataset.objects.exists() and not MemoryItem.objects.exists()


def test_policy_refusal_stores_nothing(world, as_agent):
    response = ingest(as_agent(world.agent), world.agent, classification="restricted")
    assert_error(response, 403, "memory_policy_violation")
    assert not Dataset.objects.exists() and not MemoryItem.objects.exists()


@pytest.mark.parametrize(
    ("suffix", "body", "field"),
    [
        ("/search", {"query": "x", "search_type": "MAGIC"}, "search_type"),
        ("/search", {"query": "x", "top_k": 0}, "top_k"),
        ("/search", {}, "query"),
        ("/graph", {"dataset_ids": []}, "dataset_ids"),
    ],
)
def test_bad_search_and_graph_input(world, as_agent, runbooks, suffix, body, field):
    error = assert_error(as_agent(world.agent).post(url(world.agent, suffix), body, format="json"), 400)
    assert field in error["details"]["fields"]


def test_unknown_datasets_are_404(world, as_agent, runbooks):
    client = as_agent(world.agent)
    for response in (
        client.post(url(world.agent, "/search"), {"query": "x", "dataset_ids": ["nope"]}, format="json"),
        client.post(url(world.agent, "/graph"), {"dataset_ids": ["nope"]}, format="json"),
        client.get(url(world.agent, "/datasets/nope/relations")),
        client.delete(url(world.agent, "/datasets/nope")),
    ):
        assert_error(response, 404, "knowledge_dataset_not_found")


def _calls(agent):
    return [
        ("post", url(agent), {"texts": ["x."], "dataset_id": "runbooks"}),
        ("get", url(agent, "/datasets"), None),
        ("post", url(agent, "/graph"), {"dataset_ids": ["runbooks"]}),
        ("post", url(agent, "/search"), {"query": "disk"}),
        ("get", url(agent, "/datasets/runbooks/relations"), None),
        ("delete", url(agent, "/datasets/runbooks"), None),
    ]


def _call(client, method, path, body):
    return getattr(client, method)(path, body, format="json") if body else getattr(client, method)(path)


def test_anonymous_wrong_role_and_foreign_tenant_are_refused(world, as_user, as_agent, runbooks):
    count = MemoryItem.objects.count()
    for method, path, body in _calls(world.agent):
        assert_error(_call(APIClient(), method, path, body), 401)
        assert_error(_call(as_user(world.teammate), method, path, body), 404)
        assert_error(_call(as_user(world.auditor), method, path, body), 403, "permission_denied")
        assert_error(_call(as_user(world.outsider), method, path, body), 404)
        assert_error(_call(as_agent(world.foreign_agent), method, path, body), 404)
    assert MemoryItem.objects.count() == count and Dataset.objects.filter(name="runbooks").exists()


def test_the_owner_user_may_use_them(world, as_user, runbooks):
    client = as_user(world.owner)
    assert client.get(url(world.agent, "/datasets")).json()["results"][0]["dataset_id"] == "runbooks"
    assert client.post(url(world.agent, "/search"), {"query": "disk"}, format="json").status_code == 200


def test_a_text_the_policy_refuses_is_reported_and_not_counted(world, as_agent):
    from governance.services.policies import policy_version_create

    policy_version_create(agent=world.agent, policy={"allow_personal_data": False})
    response = ingest(
        as_agent(world.agent), world.agent, texts=[OTHER, "Write to alice@example.com about the invoice."]
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["stored"] == 1 and body["dataset"]["documents"] == 1
    assert [f["code"] for f in body["failed"]] == ["memory_policy_violation"]
