"""Long work: a Job row tracks it, a Celery task does it (enqueued after commit)."""

from __future__ import annotations

import os
import socket
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.tasks import enqueue_on_commit
from governance.consumers import broadcast_job
from governance.models import Job, Tenant, User


@transaction.atomic
def self_check_start(*, tenant: Tenant, requested_by: User | None) -> Job:
    """Queue a round trip through the worker: proves the broker and a worker are alive."""
    job = Job.objects.create(tenant=tenant, kind="self_check", total=1, created_by=requested_by)
    enqueue_on_commit("governance.run_self_check", str(job.pk))
    return job


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def job_mark_running(job_id: Any) -> Job | None:
    """Claim a job; returns None when it already finished (a redelivered message)."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.status in (Job.Status.SUCCEEDED, Job.Status.FAILED):
            return None
        job.status = Job.Status.RUNNING
        job.started_at = job.started_at or timezone.now()
        job.attempts += 1
        job.worker = worker_identity()
        job.save(update_fields=["status", "started_at", "attempts", "worker"])
        _announce(job)
        return job


def job_finish(job: Job, *, result: dict[str, Any] | None = None, error: str = "") -> Job:
    job.status = Job.Status.FAILED if error else Job.Status.SUCCEEDED
    job.error = error
    job.result = result or {}
    job.progress = job.total if not error else job.progress
    job.finished_at = timezone.now()
    job.save(update_fields=["status", "error", "result", "progress", "finished_at"])
    _announce(job)
    return job


def _announce(job: Job) -> None:
    transaction.on_commit(lambda: broadcast_job(job))
