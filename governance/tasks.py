"""Celery entry points for governance work; each calls a service and returns."""

from __future__ import annotations

from celery import shared_task
from django.db import connection

from governance.services.erasure import erasure_run
from governance.services.jobs import job_finish, job_mark_running


@shared_task(name="governance.run_self_check", acks_late=True)
def run_self_check(job_id: str) -> None:
    job = job_mark_running(job_id)
    if job is None:
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
    job_finish(job, result={"database": "ok", "pgvector": row[0] if row else None, "worker": job.worker})


@shared_task(name="governance.run_erasure", acks_late=True)
def run_erasure(request_id: str) -> None:
    erasure_run(request_id=request_id)


@shared_task(name="governance.audit_anchor_export", acks_late=True, ignore_result=True)
def audit_anchor_export() -> int:
    """Beat: export each audit chain's signed head outside the database."""
    from governance.services.audit import audit_anchor_export as export

    return export()
