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


def _race(calls: list) -> list:
    """Run each (client method, url, body) on its own thread, released together."""
    barrier = threading.Barrier(len(calls))
    responses: list = [None] * len(calls)

    def run(index: int) -> None:
        method, url, body = calls[index]
        try:
            barrier.wait(timeout=60)
            responses[index] = method(url, body, format="json") if body is not None else method(url)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    assert all(not thread.is_alive() for thread in threads)
    return responses


@pytest.mark.django_db(transaction=True)
def test_parallel_updates_supersedes_and_deletes_keep_one_consistent_history(world, capsys):
    from memory.models import MemoryHistory, Supersession

    secret = f.agent_key(world.agent)
    client = bearer(secret)
    created = client.post(
        memories_url(world.agent),
        {"content": "Release train leaves Monday", "user_id": "cust-7"},
        format="json",
    )
    item_id = created.json()["id"]
    url = memories_url(world.agent, f"/{item_id}")
    calls = [(bearer(secret).patch, url, {"content": f"Release train leaves day {i}"}) for i in range(4)]
    calls += [
        (
            bearer(secret).post,
            url + "/supersede",
            {"content": f"Release train moved to week {i}", "reason": "x"},
        )
        for i in range(2)
    ]
    responses = _race(calls)
    statuses = [r.status_code for r in responses]

    assert all(code in (200, 201, 204, 404, 409) for code in statuses), statuses
    history = list(MemoryHistory.objects.filter(item_id=item_id).order_by("created_at", "pk"))
    # No lost update: each change starts from the text the previous one left.
    text = None
    for row in history:
        if row.event == MemoryHistory.Event.CREATED:
            text = row.new_content
        elif row.event == MemoryHistory.Event.UPDATED:
            assert row.old_content == text, [(h.event, h.old_content, h.new_content) for h in history]
            text = row.new_content
    updates_ok = sum(
        1
        for (m, _, b), r in zip(calls, responses, strict=True)
        if b and "reason" not in b and r.status_code == 200
    )
    assert updates_ok == sum(1 for row in history if row.event == MemoryHistory.Event.UPDATED)
    supersedes_ok = [
        r
        for (_, u, _), r in zip(calls, responses, strict=True)
        if u.endswith("supersede") and r.status_code == 201
    ]
    # One item can be retired once: exactly one supersede wins, and its successor
    # exists once; the other waited for the winner (409) or came after it (404).
    assert len(supersedes_ok) == 1, statuses
    lost = [
        r
        for (_, u, _), r in zip(calls, responses, strict=True)
        if u.endswith("supersede") and r.status_code != 201
    ]
    assert all(
        (r.status_code, r.json()["error"]["code"]) in {(409, "memory_superseded"), (404, "memory_not_found")}
        for r in lost
    ), [r.content for r in lost]
    assert Supersession.objects.filter(old_item_id=item_id).count() == len(supersedes_ok)
    assert MemoryItem.objects.get(pk=item_id).content == text

    # A delete racing updates: the item is gone, and no update lands after the delete.
    other = client.post(
        memories_url(world.agent), {"content": "Standup at ten", "user_id": "cust-7"}, format="json"
    )
    other_url = memories_url(world.agent, f"/{other.json()['id']}")
    race = [(bearer(secret).delete, other_url, None)]
    race += [(bearer(secret).patch, other_url, {"content": f"Standup at {9 - i}"}) for i in range(3)]
    raced = [r.status_code for r in _race(race)]
    assert raced[0] == 204 and all(code in (200, 404) for code in raced[1:]), raced
    events = list(
        MemoryHistory.objects.filter(item_id=other.json()["id"])
        .order_by("created_at", "pk")
        .values_list("event", flat=True)
    )
    assert events[-1] == MemoryHistory.Event.DELETED and events.count(MemoryHistory.Event.DELETED) == 1
    assert events.count(MemoryHistory.Event.UPDATED) == raced.count(200)
    deleted = not MemoryItem.objects.filter(pk=other.json()["id"]).exists()
    assert deleted
    with capsys.disabled():
        print(
            f"\nconcurrency: {len(calls)} parallel writers on one item: statuses {sorted(statuses)}, "
            f"{len(history)} history rows, {updates_ok} updates applied in one chain, "
            f"{len(supersedes_ok)} supersede; delete vs 3 updates: {sorted(raced)}, history {events}"
        )


@pytest.mark.django_db(transaction=True)
def test_a_supersede_waiting_for_a_concurrent_one_loses_with_409(world):
    """The interleaving that let two supersedes of one item both answer 201, forced:
    A holds the row lock; B passes its checks and waits for the lock; A then
    retires the item (at A's clock, later than B's start) and commits. B must see
    the retirement once it holds the lock, not the state as of when it began."""
    import time

    from core.errors import MemorySuperseded
    from memory.enforcement import system_access
    from memory.services.supersession import memory_supersede, retire, successor_draft
    from memory.services.write import guards, prepare, store
    from memory.tests.conftest import remember

    access = system_access(world.agent)
    item = remember(access, "Release train leaves Monday").item
    prepared = prepare(access, [successor_draft(item, "Release train leaves Tuesday")])[0]
    holding, outcome = threading.Event(), {}

    def winner() -> None:
        try:
            with guards.modifying(access, item.pk, "supersede") as old:
                holding.set()
                # Until B waits for this row's lock.
                for _ in range(600):
                    with connection.cursor() as cursor:
                        cursor.execute(
                            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                            "AND wait_event_type = 'Lock' AND query LIKE %s",
                            ["%FOR UPDATE%"],
                        )
                        if cursor.fetchone()[0]:
                            break
                    time.sleep(0.05)
                new = store(access, [prepared], "supersede")[0].item
                retire(access, old=old, new=new, reason="a")
            outcome["a"] = "superseded"
        finally:
            connection.close()

    def loser() -> None:
        try:
            holding.wait(timeout=60)
            memory_supersede(
                access=access, item_id=item.pk, content="Release train leaves Friday", reason="b"
            )
            outcome["b"] = "superseded"
        except MemorySuperseded as exc:
            outcome["b"] = exc.code
        finally:
            connection.close()

    threads = [threading.Thread(target=winner), threading.Thread(target=loser)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    from memory.models import Supersession

    assert outcome == {"a": "superseded", "b": "memory_superseded"}
    assert Supersession.objects.filter(old_item_id=item.pk).count() == 1
