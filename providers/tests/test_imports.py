"""Importing an engine's records into candidates: a job with progress, fence honoured."""

from __future__ import annotations

from core.models import OutboxMessage
from governance.models import Candidate, Job
from governance.services.erasure import erasure_request_create, erasure_run
from providers.imports import candidates_import_run, candidates_import_start
from providers.tests.engines import custom_engine, declare

RECORDS = [
    {"id": "r1", "kind": "fact", "text": "Jane prefers morning calls"},
    {"id": "r2", "kind": "episode", "text": "Jane called about invoice 42"},
]


def _run(world, engine_id: str) -> Job:
    job = candidates_import_start(
        tenant=world.tenant, agent=world.agent, engine_id=engine_id, subject="jane", actor=world.admin
    )
    message = OutboxMessage.objects.get(task_name="providers.import_candidates", args__0=str(job.pk))
    return candidates_import_run(
        job_id=message.args[0],
        agent_id=message.args[1],
        engine_id=message.args[2],
        subject=message.args[3],
        limit=message.args[4],
    )


def test_import_lists_the_engine_into_pending_candidates(world, local_server):
    server = custom_engine(RECORDS, server=local_server())
    declare("crm-engine", server.url)
    job = _run(world, "crm-engine")
    assert job.status == "succeeded", job.error
    assert job.result == {"imported": 2, "fenced": 0, "refused": 0}
    assert Job.objects.get(pk=job.pk).progress == Job.objects.get(pk=job.pk).total == 2
    stored = Candidate.objects.order_by("external_id")
    assert [(c.external_id, c.record_kind, c.status, c.subject) for c in stored] == [
        ("r1", "fact", "pending", "jane"),
        ("r2", "episode", "pending", "jane"),
    ]
    # Running again imports nothing new.
    OutboxMessage.objects.all().delete()
    assert _run(world, "crm-engine").result["imported"] == 2
    assert Candidate.objects.count() == 2


def test_import_after_an_erasure_refuses_erased_content(world, local_server):
    from memory.enforcement import system_access
    from memory.services.items import MemoryDraft, memory_remember

    memory_remember(
        access=system_access(world.agent),
        draft=MemoryDraft(content="Jane prefers morning calls", user_id="jane"),
    )
    request = erasure_request_create(
        tenant=world.tenant, actor=world.officer, subject="jane", scope="tenant", reason="art. 17"
    )
    erasure_run(request_id=request.pk)
    # Declared after the erasure: an engine that still holds a stale copy.
    server = custom_engine(RECORDS, server=local_server())
    declare("crm-engine", server.url)
    job = _run(world, "crm-engine")
    assert job.result == {"imported": 1, "fenced": 1, "refused": 0}
    assert list(Candidate.objects.values_list("external_id", flat=True)) == ["r2"]


def test_an_unreachable_engine_fails_the_job_not_the_worker(world, local_server):
    server = custom_engine(RECORDS, server=local_server())
    declare("gone", server.url)
    server.stop()
    job = _run(world, "gone")
    assert job.status == "failed" and job.error
    assert not Candidate.objects.exists()
