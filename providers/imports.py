"""Import an engine's records into the candidate queue (a Celery task with a Job).

Records are listed with the adapter's ``list`` capability for one agent and one
subject, and stored as pending candidates (:func:`candidate_import`): records
outside the vocabulary or LangGraph checkpoints are counted as refused, records an
erasure fence covers as fenced — neither is stored.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core.errors import EngineNotFound, InvalidInput
from core.tasks import enqueue_on_commit
from governance.models import Agent, Job, Tenant
from governance.services.audit import audit_record, subject_hash
from governance.services.candidates import CandidateRefused, candidate_import
from governance.services.jobs import job_finish, job_mark_running
from memory.text import content_hash
from providers.models import EngineInstance
from providers.services import adapter_for, operation_context

DEFAULT_LIMIT = 500


@transaction.atomic
def candidates_import_start(
    *, tenant: Tenant, agent: Agent, engine_id: str, subject: str, actor: Any, limit: int = DEFAULT_LIMIT
) -> Job:
    """Queue an import; the job's result says how many were imported, fenced, refused."""
    if not EngineInstance.objects.visible_to_tenant(tenant).filter(pk=engine_id).exists():
        raise EngineNotFound("Engine not found.")
    if not subject:
        raise InvalidInput("Invalid input: subject.", details={"fields": {"subject": ["required"]}})
    job = Job.objects.create(
        tenant=tenant,
        kind="candidates_import",
        agent=agent,
        created_by=actor if getattr(actor, "pk", None) else None,
    )
    audit_record(
        tenant=tenant,
        actor=actor,
        action="candidate.import",
        target=agent,
        data={"engine": engine_id, "subject_hash": subject_hash(subject), "limit": limit, "job": str(job.pk)},
    )
    enqueue_on_commit("providers.import_candidates", str(job.pk), str(agent.pk), engine_id, subject, limit)
    return job


def _captured_at(value: str | None) -> datetime:
    parsed = parse_datetime(value) if value else None
    # Without the provider's own time the copy counts as captured now: a fence of an
    # earlier erasure then still refuses it by content hash.
    return parsed if parsed and parsed.tzinfo else timezone.now()


def candidates_import_run(
    *, job_id: Any, agent_id: Any, engine_id: str, subject: str, limit: int
) -> Job | None:
    job = job_mark_running(job_id)
    if job is None:
        return None
    agent = Agent.objects.select_related("tenant").get(pk=agent_id)
    engine = EngineInstance.objects.visible_to_tenant(agent.tenant).get(pk=engine_id)
    try:
        adapter = adapter_for(engine, agent.tenant)
        ctx = operation_context(tenant=agent.tenant, operation="list", agent=agent, user_id=subject)
        hits = adapter.perform("list", ctx, limit=limit)
    except Exception as exc:  # an engine failure ends this job, not the worker
        return job_finish(job, error=f"{type(exc).__name__}: {exc}")
    Job.objects.filter(pk=job.pk).update(total=len(hits))
    imported = fenced = refused = 0
    for done, hit in enumerate(hits, start=1):
        try:
            stored = candidate_import(
                agent=agent,
                provider=engine.id,
                external_id=hit.external_id,
                record_kind=hit.kind,
                content=hit.text,
                subject=subject,
                captured_at=_captured_at(hit.created_at),
                content_hash=content_hash(hit.text),
            )
        except CandidateRefused:
            refused += 1
        else:
            if stored is None:
                fenced += 1
            else:
                imported += 1
        Job.objects.filter(pk=job.pk).update(progress=done)
    job.total = len(hits)
    return job_finish(job, result={"imported": imported, "fenced": fenced, "refused": refused})
