"""Large knowledge ingests run as a job: 202 with the job at once, the chunks stored
by the worker batch by batch with progress, the texts gone from the job when done."""

from __future__ import annotations

import os

import pytest

from conftest import assert_error
from governance.models import Job
from memory.models import Dataset, MemoryItem
from memory.services.knowledge import knowledge_ingest_run

SENTENCE = "The failover drill moved traffic to the standby region within four minutes. "


def url(agent, suffix: str = "") -> str:
    return f"/v1/memory/agents/{agent.pk}/knowledge{suffix}"


@pytest.fixture
def small_bound(settings):
    settings.FEDMEM_KNOWLEDGE_SYNC_BYTES = 2000


def _texts(n: int = 3, sentences: int = 24) -> list[str]:
    # Every sentence distinct, so no chunk is a duplicate of another.
    return [" ".join(f"Runbook {i} step {j}: {SENTENCE}" for j in range(sentences)) for i in range(n)]


def test_a_large_ingest_answers_202_with_a_job_and_stores_nothing_yet(world, as_user, small_bound):
    client = as_user(world.owner)
    response = client.post(url(world.agent), {"texts": _texts(), "dataset_id": "drills"}, format="json")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["queued"] is True and body["stored"] == 0 and body["chunks"] >= 3
    job = Job.objects.get(pk=body["job"]["id"])
    assert job.kind == "knowledge_ingest" and job.status == "queued" and job.total == body["chunks"]
    assert not MemoryItem.objects.filter(dataset__name="drills").exists()
    followed = client.get(body["job"]["url"])
    assert followed.status_code == 200 and followed.json()["status"] == "queued"


def test_the_agent_that_queued_an_ingest_follows_its_job(world, as_agent, small_bound):
    client = as_agent(world.agent)
    response = client.post(url(world.agent), {"texts": _texts(), "dataset_id": "drills"}, format="json")
    assert response.status_code == 202, response.content
    job_url = response.json()["job"]["url"]
    assert Job.objects.get(pk=response.json()["job"]["id"]).agent == world.agent
    followed = client.get(job_url)
    assert followed.status_code == 200 and followed.json()["status"] == "queued"
    assert_error(as_agent(world.sibling).get(job_url), 404, "job_not_found")
    assert_error(as_agent(world.foreign_agent).get(job_url), 404, "job_not_found")


def test_the_job_stores_the_chunks_with_progress_and_drops_the_texts(world, as_user, small_bound):
    client = as_user(world.owner)
    body = client.post(
        url(world.agent), {"texts": _texts(), "dataset_id": "drills", "user_id": "cust-9"}, format="json"
    ).json()
    job = knowledge_ingest_run(job_id=body["job"]["id"])
    assert job.status == "succeeded", job.error
    assert job.progress == job.total == body["chunks"]
    assert job.result["stored"] == body["chunks"] and "pending" not in job.result
    assert "failover drill" not in str(Job.objects.get(pk=job.pk).result)
    chunks = MemoryItem.objects.filter(dataset__name="drills")
    assert chunks.count() == body["chunks"]
    # The caller is the actor of record and the subject rides on every chunk.
    assert {c.provenance["writer"]["name"] for c in chunks} == {world.owner.username}
    assert set(chunks.values_list("user_id", flat=True)) == {"cust-9"}
    assert Dataset.objects.get(name="drills").documents == 3
    # A redelivered message finds the job finished and stores nothing twice.
    assert knowledge_ingest_run(job_id=job.pk) is None
    assert chunks.count() == body["chunks"]


def test_a_small_ingest_stays_synchronous(world, as_user, small_bound):
    response = as_user(world.owner).post(
        url(world.agent), {"texts": ["One short runbook."], "dataset_id": "drills"}, format="json"
    )
    assert response.status_code == 201 and response.json()["queued"] is False
    assert not Job.objects.filter(kind="knowledge_ingest").exists()


def test_a_large_ingest_the_policy_refuses_queues_nothing(world, as_user, small_bound):
    from governance.services.policies import policy_version_create

    policy_version_create(agent=world.agent, policy={"max_classification": "internal"})
    response = as_user(world.owner).post(
        url(world.agent),
        {"texts": _texts(), "dataset_id": "drills", "classification": "restricted"},
        format="json",
    )
    assert response.status_code in (403, 422), response.content
    assert not Job.objects.exists() and not Dataset.objects.exists()


def test_a_large_ingest_with_bad_input_is_400_and_queues_nothing(world, as_user, small_bound):
    response = as_user(world.owner).post(
        url(world.agent), {"texts": _texts(), "dataset_id": "Bad Name"}, format="json"
    )
    assert_error(response, 400)
    assert not Job.objects.exists()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_the_ingest_job(world, as_user, worker_factory, small_bound):
    from governance.tests.test_worker import wait_for

    worker_factory()
    body = as_user(world.owner).post(
        url(world.agent), {"texts": _texts(), "dataset_id": "drills"}, format="json"
    )
    assert body.status_code == 202, body.content
    job = wait_for(Job.objects.get(pk=body.json()["job"]["id"]), timeout=180)
    assert job.status == Job.Status.SUCCEEDED, job.error
    assert int(job.worker.rsplit(":", 1)[1]) != os.getpid()
    assert job.progress == job.total
    assert MemoryItem.objects.filter(dataset__name="drills").count() == job.total


def test_the_console_shows_the_ingest_job_with_its_progress(world, as_user, client, small_bound):
    body = as_user(world.owner).post(
        url(world.agent), {"texts": _texts(), "dataset_id": "drills"}, format="json"
    )
    job_id = body.json()["job"]["id"]
    client.force_login(world.owner)
    queued = client.get(f"/jobs/{job_id}/", HTTP_HX_REQUEST="true")
    # Still running: the row polls itself for the progress.
    assert queued.status_code == 200 and b'hx-trigger="every 1s"' in queued.content
    assert b"knowledge_ingest" in queued.content and b'value="0"' in queued.content
    job = knowledge_ingest_run(job_id=job_id)
    done = client.get(f"/jobs/{job_id}/", HTTP_HX_REQUEST="true")
    assert f'value="{job.total}"'.encode() in done.content and b"every 1s" not in done.content
    assert b"knowledge_ingest" in client.get("/").content


def _erase(world, subject: str = "", datasets: list[str] | None = None):
    from governance.services.erasure import erasure_request_create, erasure_run

    request = erasure_request_create(
        tenant=world.tenant,
        actor=world.officer,
        subject=subject,
        scope="tenant",
        reason="GDPR art. 17",
        **({"datasets": datasets} if datasets else {}),
    )
    return erasure_run(request_id=request.pk)


@pytest.mark.parametrize("by", ["subject", "dataset"])
def test_an_erasure_cancels_a_queued_ingest_it_covers_and_drops_its_texts(world, as_user, small_bound, by):
    from memory.tests.test_reliability_holds import canary_hits

    canary = f"canary{os.urandom(5).hex()}"
    subject = f"cust-{canary}"
    texts = [t + f" Contact {canary}." for t in _texts()]
    body = (
        as_user(world.owner)
        .post(url(world.agent), {"texts": texts, "dataset_id": "drills", "user_id": subject}, format="json")
        .json()
    )
    assert canary_hits(canary)  # waiting in the job row
    request = _erase(world, subject=subject) if by == "subject" else _erase(world, datasets=["drills"])
    assert request.status == "completed"
    assert request.certificate["deleted"].get("governance_job") == 1
    assert canary_hits(canary) == {}
    job = Job.objects.get(pk=body["job"]["id"])
    assert job.status == "failed" and "erasure" in job.error
    # The worker, when the message arrives, finds the job finished and stores nothing.
    assert knowledge_ingest_run(job_id=job.pk) is None
    assert not MemoryItem.objects.filter(dataset__name="drills").exists()


def test_a_held_subjects_queued_ingest_outlives_the_erasure_and_the_certificate_says_why(
    world, as_user, small_bound
):
    from governance.services.holds import legal_hold_place

    hold = legal_hold_place(
        tenant=world.tenant, actor=world.officer, target="subject", subject="cust-held", reason="litigation"
    )
    body = (
        as_user(world.owner)
        .post(
            url(world.agent),
            {"texts": _texts(), "dataset_id": "drills", "user_id": "cust-held"},
            format="json",
        )
        .json()
    )
    request = _erase(world, subject="cust-held")
    assert "governance_job" not in request.certificate["deleted"]
    kept = [h for h in request.certificate["held"] if h["table"] == "governance_job"]
    assert kept and kept[0]["by_hold"] == {str(hold.pk): 1}
    job = knowledge_ingest_run(job_id=body["job"]["id"])
    assert job.status == "succeeded" and job.result["stored"] == body["chunks"]


def test_an_ingest_cancelled_while_it_runs_stores_no_further_batch(world, as_user, small_bound, monkeypatch):
    # The erasure lands between two batches: the worker sees it under the job row's
    # lock before the next batch and stops, leaving the job as the erasure finished it.
    from memory.services import knowledge

    monkeypatch.setattr(knowledge, "MAX_BATCH", 2)
    body = (
        as_user(world.owner)
        .post(
            url(world.agent), {"texts": _texts(), "dataset_id": "drills", "user_id": "cust-7"}, format="json"
        )
        .json()
    )
    assert body["chunks"] > 2
    real = knowledge.memory_remember_batch
    calls = []

    def batch_then_erase(**kwargs):
        out = real(**kwargs)
        calls.append(len(out))
        if len(calls) == 1:
            _erase(world, subject="cust-7")
        return out

    monkeypatch.setattr(knowledge, "memory_remember_batch", batch_then_erase)
    job = knowledge_ingest_run(job_id=body["job"]["id"])
    assert len(calls) == 1
    assert job.status == "failed" and "erasure" in job.error
    assert not MemoryItem.objects.filter(user_id="cust-7").exists()
