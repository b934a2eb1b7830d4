"""Concurrent writes on real threads, each with its own database connection, in
transactional tests (the rows commit for real, as in production)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from conftest import bearer
from governance.tests import factories as f
from memory.models import IdempotencyRecord, MemoryItem
from memory.tests.conftest import memories_url

THREADS = 6


def _hammer(url: str, secret: str, body: dict, headers: dict) -> list:
    barrier = threading.Barrier(THREADS)
    responses: list = [None] * THREADS

    def post(index: int) -> None:
        try:
            client = bearer(secret)
            barrier.wait(timeout=60)
            responses[index] = client.post(url, body, format="json", **headers)
        finally:
            connection.close()  # each thread opened its own connection

    threads = [threading.Thread(target=post, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert all(not thread.is_alive() for thread in threads)
    return responses


@pytest.mark.django_db(transaction=True)
def test_concurrent_writes_with_one_idempotency_key_create_one_item(world):
    secret = f.agent_key(world.agent)
    body = {"content": "Escalations go to the on-call lead first", "user_id": "cust-7"}
    responses = _hammer(memories_url(world.agent), secret, body, {"HTTP_IDEMPOTENCY_KEY": "retry-123"})

    assert sorted(r.status_code for r in responses) == [201] * THREADS
    assert len({r.json()["id"] for r in responses}) == 1
    assert MemoryItem.objects.count() == 1
    assert IdempotencyRecord.objects.count() == 1
    assert sum(1 for r in responses if r.get("Idempotent-Replayed") == "true") == THREADS - 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_identical_writes_without_a_key_are_deduplicated(world):
    secret = f.agent_key(world.agent)
    body = {"content": "The VPN drops every night at 2am", "user_id": "cust-7"}
    responses = _hammer(memories_url(world.agent), secret, body, {})

    assert sorted(r.status_code for r in responses) == [200] * (THREADS - 1) + [201]
    assert len({r.json()["id"] for r in responses}) == 1
    assert MemoryItem.objects.count() == 1
