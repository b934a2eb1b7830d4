"""A Celery worker keeps its database sessions across tasks.

Celery's Django fixup closes a prefork child's whole connection pool before and after
every task, so each task opened a new PostgreSQL session: a backend started, its
caches cold, its prepared statements gone. fedmem keeps the pool (CELERY_DB_REUSE_MAX)
and hands the connections back to it at each task's boundaries (fedmem_site.celery).
The worker's sessions are told apart by their application name (libpq's PGAPPNAME)."""

from __future__ import annotations

import time

import pytest
from django.db import connection

from memory.models import MemoryItem
from memory.tests.conftest import settled

APP = "fedmem-worker-sessions-test"


def _worker_sessions() -> set[tuple[int, object]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, backend_start FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = %s",
            [APP],
        )
        return set(cursor.fetchall())


def _extracted(client, agent, text: str) -> None:
    response = client.post(
        f"/v1/memory/agents/{agent.pk}/memories", {"content": text, "scope": "agent"}, format="json"
    )
    assert response.status_code == 201, response.content
    item = settled(MemoryItem.objects.get(pk=response.json()["id"]))
    assert item.extraction_status == "done", item.extraction_error


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_runs_its_tasks_on_the_sessions_it_opened_once(world, worker_factory, as_agent):
    worker_factory(PGAPPNAME=APP)
    client = as_agent(world.agent)
    texts = [
        "The expired certificate results in failed logins.",
        "A full disk caused the nightly backup to fail.",
        "The cache miss storm led to slow checkouts.",
        "Heavy fog caused the flight delay.",
    ]
    _extracted(client, world.agent, texts[0])
    # The task's end has handed its connection back; the pool keeps it open.
    deadline = time.monotonic() + 10
    while not (first := _worker_sessions()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert first, "the worker holds no session after its first task"
    for text in texts[1:]:
        _extracted(client, world.agent, text)
    time.sleep(0.5)  # past the last task's end
    # The sessions of the first task served the others: none was closed in between.
    assert first <= _worker_sessions()
