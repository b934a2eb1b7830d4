"""Celery entry points for provider work; each calls one service."""

from __future__ import annotations

from celery import shared_task

from providers.imports import candidates_import_run


@shared_task(name="providers.import_candidates", acks_late=True)
def run_candidates_import(job_id: str, agent_id: str, engine_id: str, subject: str, limit: int) -> None:
    candidates_import_run(job_id=job_id, agent_id=agent_id, engine_id=engine_id, subject=subject, limit=limit)
