"""Celery entry points of the memory app. Thin: each calls one service function."""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import shared_task
from django.db import transaction

from memory.extraction.pipeline import EXTRACT_BATCH
from memory.models import MemoryItem

logger = logging.getLogger(__name__)

MAX_RETRIES = 5
# A task stops taking new items after this long and hands the rest to a fresh task.
# A worker's warm shutdown waits for the running task: a 100-item batch extracted
# in one go would outlast the grace period fedmem_run gives it (and be killed).
SLICE_SECONDS = 2.0


@shared_task(
    name="memory.extract_items",
    bind=True,
    ignore_result=True,
    max_retries=MAX_RETRIES,
    acks_late=True,
)
def extract_items(
    self: Any,
    item_ids: list[str],
    slice_seconds: float = SLICE_SECONDS,
    only_pending: bool = False,
    batch: int = EXTRACT_BATCH,
    inputs: dict[str, Any] | None = None,
) -> None:
    """Extract entities and causal edges of freshly written items.

    Idempotent (each run replaces the item's derived rows), so at-least-once
    delivery from the outbox is safe. A failure is written on the item, and the
    item stays ``pending`` while retries (exponential backoff) remain; after the
    last one it is ``failed`` with the error. Items go through the models
    ``batch`` at a time (one parse batch, one embedding batch) and are stored
    together in one transaction (item by item if that fails). ``inputs`` (item
    id -> offsets the write read from its own parse,
    :mod:`memory.extraction.handoff`) spares parsing those texts again;
    checked against each item's content, so a stale entry is simply parsed anew.
    """
    from core.tasks import enqueue_on_commit
    from memory.extraction.pipeline import load_items, mark_extraction, prepare, store, store_many

    failed: list[str] = []
    last_error: Exception | None = None
    if only_pending:  # a sweep's re-queue: what settled meanwhile is not extracted again
        pending = MemoryItem.objects.filter(pk__in=item_ids, extraction_status=MemoryItem.Extraction.PENDING)
        still = {str(pk) for pk in pending.values_list("pk", flat=True)}
        item_ids = [pk for pk in item_ids if pk in still]
    began = time.monotonic()

    def record(item_id: str, exc: Exception) -> None:
        nonlocal last_error
        final = self.request.retries >= MAX_RETRIES
        status = MemoryItem.Extraction.FAILED if final else MemoryItem.Extraction.PENDING
        mark_extraction(item_id, status=status, error=f"{exc.__class__.__name__}: {exc}")
        failed.append(item_id)
        last_error = exc

    for index in range(0, len(item_ids), batch):
        if index and time.monotonic() - began > slice_seconds:
            # Through the outbox: if publishing fails now, the relay sends it later.
            with transaction.atomic():
                rest = item_ids[index:]
                handed = {pk: inputs[pk] for pk in rest if inputs and pk in inputs}
                enqueue_on_commit(extract_items, rest, only_pending=only_pending, inputs=handed or None)
            break
        chunk = item_ids[index : index + batch]
        try:
            # The models run once over the whole chunk (nlp.pipe, batched embedding).
            prepared = [(str(p.item_id), p) for p in prepare(load_items(chunk), inputs)]
        except Exception:  # one bad text must not fail its neighbours: item by item
            prepared = []
            for item_id in chunk:
                try:
                    prepared.extend((str(p.item_id), p) for p in prepare(load_items([item_id]), inputs))
                except Exception as exc:  # recorded on the item; the task retries what failed
                    record(item_id, exc)
        try:
            # The whole chunk in one transaction, set-based (a handful of statements).
            store_many([one for _, one in prepared])
            continue
        except Exception:  # nothing stored: item by item, so one bad item fails alone
            logger.warning("batched store failed; storing item by item", exc_info=True)
        for item_id, one in prepared:
            try:
                store(one)
            except Exception as exc:  # recorded on the item; the task retries what failed
                record(item_id, exc)
    if failed and last_error is not None and self.request.retries < MAX_RETRIES:
        raise self.retry(
            args=[failed],
            kwargs={"only_pending": only_pending},
            exc=last_error,
            countdown=min(2 ** (self.request.retries + 1), 300),
        )


@shared_task(name="memory.retention_sweep", acks_late=True)
def retention_sweep() -> dict[str, int]:
    from memory.services.retention import retention_sweep as sweep

    report = sweep()
    return {"deleted": report.deleted, "kept_held": report.kept_held}


@shared_task(name="memory.extraction_sweep", acks_late=True, ignore_result=True)
def extraction_sweep() -> int:
    """Beat: re-queue extraction left pending past FEDMEM_EXTRACTION_STALE_SECONDS."""
    from datetime import timedelta

    from django.conf import settings

    from memory.services.backfill import extraction_sweep as sweep

    return sweep(stale_after=timedelta(seconds=settings.FEDMEM_EXTRACTION_STALE_SECONDS))


@shared_task(name="memory.knowledge_graph_build", acks_late=True, ignore_result=True)
def knowledge_graph_build(job_id: str, agent_id: str, dataset_pks: list[int]) -> None:
    """Build the graph of knowledge datasets; progress and outcome in the governance Job."""
    from memory.services.knowledge import knowledge_graph_run

    knowledge_graph_run(job_id=job_id, agent_id=agent_id, dataset_pks=dataset_pks)


@shared_task(name="memory.knowledge_ingest", acks_late=True, ignore_result=True)
def knowledge_ingest_job(job_id: str) -> None:
    """Store a large knowledge ingest; progress and outcome in the governance Job."""
    from memory.services.knowledge import knowledge_ingest_run

    knowledge_ingest_run(job_id=job_id)
