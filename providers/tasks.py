"""Celery entry points for provider work; each calls one service."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="providers.import_candidates", acks_late=True)
def run_candidates_import(job_id: str, agent_id: str, engine_id: str, subject: str, limit: int) -> None:
    from providers.imports import candidates_import_run

    candidates_import_run(job_id=job_id, agent_id=agent_id, engine_id=engine_id, subject=subject, limit=limit)


@shared_task(name="providers.reconcile_write", acks_late=True, ignore_result=True)
def reconcile_write(write_id: str) -> None:
    from providers.settlement import write_reconcile

    write_reconcile(write_id=write_id)


@shared_task(name="providers.reconcile_due", ignore_result=True)
def reconcile_due() -> dict[str, int]:
    from providers.settlement import writes_reconcile_due

    return writes_reconcile_due()
