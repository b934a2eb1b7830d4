"""Worker-kill drill: tasks survive their worker being SIGKILLed mid-flight.

N extraction, import and erasure tasks go through the transactional outbox to a real
worker (prefork, one child, filesystem broker); the child is SIGKILLed at random
moments K times, and the worker's main process starts a new one each time. Late
acknowledgement with ``reject_on_worker_lost`` puts the interrupted message back;
idempotent tasks make the redelivery safe; the pool releases the job-pipe lock a
killed idle child held (fedmem_site/pool.py), so the new child does not hang. In the
end every effect happened exactly once and nothing stayed queued.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import psutil
import pytest
from django.conf import settings
from django.utils import timezone

from core.models import OutboxMessage
from governance.models import AuditEvent, Candidate, ErasureRequest, Job
from governance.services.erasure import erasure_request_create
from memory.enforcement import system_access
from memory.models import MemoryItem
from memory.services.items import MemoryDraft, memory_remember
from providers.imports import candidates_import_start
from providers.tests.engines import custom_engine, declare
from providers.tests.servers import LocalServer

# Small enough for CI (each kill costs a model load in the new child and billiard's
# wait for the lost job); FEDMEM_DRILL_TASKS / FEDMEM_DRILL_KILLS scale it up.
N = int(os.environ.get("FEDMEM_DRILL_TASKS", "2"))  # of each kind
K = int(os.environ.get("FEDMEM_DRILL_KILLS", "2"))
SEED = int(os.environ.get("FEDMEM_DRILL_SEED", "8"))


def _children(worker) -> list[psutil.Process]:
    try:
        return psutil.Process(worker.pid).children()
    except psutil.NoSuchProcess:
        return []


def _queued() -> int:
    folder = Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])
    return sum(1 for path in folder.iterdir() if path.is_file())


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_sigkilled_worker_children_lose_and_duplicate_nothing(world, worker_factory, capsys):
    rng = random.Random(SEED)
    server = custom_engine(
        [{"id": f"r{i}", "kind": "fact", "text": f"Jane noted fact number {i}"} for i in range(3)],
        server=LocalServer(max_seconds=900),
    )
    engine = declare("drill-engine", server.url)
    # Alone: a worker an earlier test left running would take some of the messages.
    worker = worker_factory(alone=True, FEDMEM_ENGINES_ALLOW_HTTP="true")

    access = system_access(world.agent)
    items = [
        memory_remember(
            access=access,
            draft=MemoryDraft(
                content=f"Deploy {i} of the billing service caused outage {i}.", user_id=f"u{i}"
            ),
        ).item.pk
        for i in range(N)
    ]
    imports = [
        candidates_import_start(
            tenant=world.tenant,
            agent=world.agent,
            engine_id=engine.pk,
            subject=f"jane-{i}",
            actor=world.admin,
        ).pk
        for i in range(N)
    ]
    # Other subjects than the extracted items' users: an erasure deleting an item
    # would make its extraction look lost.
    erasures = [
        erasure_request_create(
            tenant=world.tenant, actor=world.officer, subject=f"s{i}", scope="tenant", reason="drill"
        ).pk
        for i in range(N)
    ]
    tasks = len(items) + len(imports) + len(erasures)

    def outstanding() -> int:
        return (
            MemoryItem.objects.filter(pk__in=items, extraction_status=MemoryItem.Extraction.PENDING).count()
            + Job.objects.filter(pk__in=imports).exclude(status=Job.Status.SUCCEEDED).count()
            + ErasureRequest.objects.filter(pk__in=erasures)
            .exclude(status=ErasureRequest.Status.COMPLETED)
            .count()
        )

    kills = 0
    deadline = time.monotonic() + 600
    while kills < K and outstanding() and time.monotonic() < deadline:
        time.sleep(rng.uniform(0.5, 4.0))
        children = _children(worker)
        if children:
            rng.choice(children).send_signal(signal.SIGKILL)
            kills += 1
            # The main process forks a replacement; wait for it before the next kill.
            replaced = time.monotonic() + 60
            while not _children(worker) and time.monotonic() < replaced:
                time.sleep(0.1)
    # The drill's own tasks being done is not the end: every message still queued or
    # unsent must be taken too. A drill whose tasks all finished right after a kill
    # read the queue while messages were still in it.
    while (
        outstanding() or _queued() or OutboxMessage.objects.filter(sent_at__isnull=True).exists()
    ) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert worker.poll() is None, "the worker's main process must survive its children"

    extracted = MemoryItem.objects.filter(pk__in=items, extraction_status=MemoryItem.Extraction.DONE).count()
    imported_jobs = Job.objects.filter(pk__in=imports, status=Job.Status.SUCCEEDED)
    completed = ErasureRequest.objects.filter(pk__in=erasures, status=ErasureRequest.Status.COMPLETED)
    lost = (
        (len(items) - extracted)
        + (len(imports) - imported_jobs.count())
        + (len(erasures) - completed.count())
    )

    # Duplicates: a candidate per engine record and subject, one certificate per erasure,
    # and erasures certify what existed (a repeated run would certify 0 for a subject).
    candidates = Candidate.objects.filter(provider=engine.pk)
    duplicated = candidates.count() - candidates.values("subject", "external_id").distinct().count()
    for request_id in erasures:
        certified = AuditEvent.objects.filter(action="erasure.completed", target_id=str(request_id)).count()
        duplicated += max(0, certified - 1)
    expected_candidates = len(imports) and 3  # the engine's records, once (same tenant, same ids)
    duplicated += max(0, candidates.count() - expected_candidates)
    queued = _queued()
    unsent = OutboxMessage.objects.filter(sent_at__isnull=True).count()
    attempts = sorted(Job.objects.filter(pk__in=imports).values_list("attempts", flat=True))
    summary = (
        f"worker-kill drill: {kills} kills, {tasks} tasks ({N} each: extraction, import, erasure), "
        f"{lost} lost, {duplicated} duplicated, {queued} still queued, {unsent} unsent outbox rows; "
        f"import attempts {attempts} "
        f"at {timezone.now():%H:%M:%S}"
    )
    with capsys.disabled():
        print("\n" + summary)
    server.stop()
    # A failure carries the figures and the worker's last lines (under xdist the print
    # above is not shown, and pytest's temporary folders are soon replaced).
    tail = "\n".join(worker.log_path.read_text(errors="replace").splitlines()[-40:])
    assert kills == K or not outstanding(), f"{summary}\n{tail}"
    assert lost == 0, f"{summary}\n{tail}"
    assert duplicated == 0, f"{summary}\n{tail}"
    assert queued == 0 and unsent == 0, f"{summary}\n{tail}"
