"""Retention sweep: overdue unheld items go with their derived data; held ones stay."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from governance.models import AuditEvent
from governance.services.holds import legal_hold_place
from memory.models import IdempotencyRecord, MemoryHistory, MemoryItem
from memory.services.items import MemoryDraft, memory_remember
from memory.services.retention import overdue_unheld_count, retention_sweep
from memory.tasks import retention_sweep as retention_task
from memory.tests.conftest import remember


def _expire(*items) -> None:
    MemoryItem.objects.filter(pk__in=[i.pk for i in items]).update(
        retention_until=timezone.now() - timedelta(minutes=1)
    )


def test_sweep_deletes_overdue_items_with_derived_data_and_skips_held(world, access):
    overdue = memory_remember(
        access=access, draft=MemoryDraft(content="Old shipping address", user_id="c1"), idempotency_key="r-1"
    ).item
    flagged = remember(access, "Flagged by policy", legal_hold=True).item
    covered = remember(access, "Covered by a subject hold", user_id="c-held").item
    fresh = remember(access, "Still valid", retention_days=30).item
    _expire(overdue, flagged, covered)
    hold = legal_hold_place(
        tenant=world.tenant, actor=world.officer, target="subject", subject="c-held", reason="r"
    )
    assert overdue_unheld_count() == 1

    report = retention_sweep()

    assert report.deleted == 1 and report.kept_held == 2
    assert overdue_unheld_count() == 0
    assert not MemoryItem.objects.filter(pk=overdue.pk).exists()
    assert not MemoryHistory.objects.filter(item_id=overdue.pk).exists()
    assert not IdempotencyRecord.objects.filter(key="r-1").exists()
    assert set(MemoryItem.objects.values_list("pk", flat=True)) == {flagged.pk, covered.pk, fresh.pk}
    sweep = AuditEvent.objects.get(action="retention.sweep")
    assert sweep.data["deleted"] == 1 and sweep.data["kept_held"] == 2
    blocked = AuditEvent.objects.get(action="legal_hold.blocked", data__operation="retention")
    assert blocked.data["count"] == 2 and blocked.data["flagged_items"] == 1
    assert blocked.data["holds"] == [str(hold.pk)]


def test_policy_retention_days_expire_through_the_sweep(world, access):
    from governance.services.policies import policy_version_create
    from memory.enforcement import system_access

    policy_version_create(agent=world.agent, policy={"retention_days": 1})
    item = remember(system_access(world.agent), "Short-lived by policy").item
    assert item.retention_until is not None
    retention_sweep(now=timezone.now() + timedelta(days=2))
    assert not MemoryItem.objects.filter(pk=item.pk).exists()


def test_a_sweep_with_nothing_due_changes_nothing(world, access):
    remember(access, "Keeps forever")
    assert retention_sweep().deleted == 0
    assert MemoryItem.objects.count() == 1


def test_the_task_runs_the_sweep_and_is_on_the_beat_schedule(world, access):
    _expire(remember(access, "Due").item)
    assert retention_task() == {"deleted": 1, "kept_held": 0}
    schedule = settings.CELERY_BEAT_SCHEDULE["memory-retention-sweep"]
    assert schedule["task"] == "memory.retention_sweep"


def _recall(access, query: str):
    from memory.enforcement import Keys
    from memory.retrieval.hybrid import RecallQuery, retrieve

    keys = Keys(user_id="cust-1", session_id=None, narrow=True)
    return retrieve(access, RecallQuery(query=query, scopes=("user",), keys=keys, top_k=3))


def test_recall_records_when_an_item_was_last_recalled_at_most_hourly(world, access):
    hit = remember(access, "Invoices are paid by bank transfer").item
    other = remember(access, "The office dog is called Biscuit").item
    for n in range(4):
        remember(access, f"Bank transfer invoice reference {n}")
    assert MemoryItem.objects.get(pk=hit.pk).last_recalled_at is None
    assert any(h.item.pk == hit.pk for h in _recall(access, "bank transfer invoices"))
    first = MemoryItem.objects.get(pk=hit.pk).last_recalled_at
    assert first is not None
    # Recalled again within the hour: the row is not rewritten.
    _recall(access, "bank transfer invoices")
    assert MemoryItem.objects.get(pk=hit.pk).last_recalled_at == first
    # An hour later it is refreshed.
    stale = first - timedelta(hours=2)
    MemoryItem.objects.filter(pk=hit.pk).update(last_recalled_at=stale)
    _recall(access, "bank transfer invoices")
    assert MemoryItem.objects.get(pk=hit.pk).last_recalled_at > stale
    # Only what the recall returned is stamped.
    assert MemoryItem.objects.get(pk=other.pk).last_recalled_at is None


def test_idle_days_forget_what_nobody_recalled_and_skip_held_items(world, access):
    from governance.services.policies import policy_version_create

    policy_version_create(agent=world.agent, policy={"idle_days": 30})
    now = timezone.now()
    long_ago = now - timedelta(days=45)
    idle = remember(access, "Never asked about again").item
    recalled = remember(access, "Asked about last week").item
    held_idle = remember(access, "Idle but under a subject hold", user_id="c-held").item
    fresh = remember(access, "Written yesterday").item
    MemoryItem.objects.filter(pk__in=[idle.pk, recalled.pk, held_idle.pk]).update(created_at=long_ago)
    MemoryItem.objects.filter(pk=recalled.pk).update(last_recalled_at=now - timedelta(days=7))
    MemoryItem.objects.filter(pk=fresh.pk).update(created_at=now - timedelta(days=1))
    # The sibling agent has no idle policy: its old, never recalled item stays.
    from memory.enforcement import system_access

    sibling_item = remember(system_access(world.sibling), "Sibling memory, old").item
    MemoryItem.objects.filter(pk=sibling_item.pk).update(created_at=long_ago)
    hold = legal_hold_place(
        tenant=world.tenant, actor=world.officer, target="subject", subject="c-held", reason="r"
    )
    assert overdue_unheld_count() == 1

    report = retention_sweep()

    assert report.deleted == 1 and report.kept_held == 1
    assert overdue_unheld_count() == 0
    assert set(MemoryItem.objects.values_list("pk", flat=True)) == {
        recalled.pk,
        held_idle.pk,
        fresh.pk,
        sibling_item.pk,
    }
    blocked = AuditEvent.objects.get(action="legal_hold.blocked", data__operation="retention")
    assert blocked.data["holds"] == [str(hold.pk)]
    # Recalled long ago counts as idle too.
    MemoryItem.objects.filter(pk=recalled.pk).update(last_recalled_at=now - timedelta(days=31))
    assert retention_sweep().deleted == 1
    assert not MemoryItem.objects.filter(pk=recalled.pk).exists()


def test_idle_days_is_validated_in_the_policy(world):
    import pytest

    from core.errors import InvalidInput
    from governance.services.policies import policy_version_create

    for bad in (0, -3, "30", True):
        with pytest.raises(InvalidInput):
            policy_version_create(agent=world.agent, policy={"idle_days": bad})


@pytest.mark.django_db(transaction=True)
def test_a_recall_on_its_own_commits_its_stamp_without_waiting_for_the_wal_flush(world, access):
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    hit = remember(access, "Invoices are paid by bank transfer").item
    assert connection.get_autocommit()
    with CaptureQueriesContext(connection) as captured:
        assert any(h.item.pk == hit.pk for h in _recall(access, "bank transfer invoices"))
    statements = [q["sql"] for q in captured.captured_queries]
    at = statements.index("SET LOCAL synchronous_commit = off")
    assert "touched AS (UPDATE memory_item" in statements[at + 1]
    # Committed (another transaction sees it), and the setting ended with that transaction.
    assert MemoryItem.objects.get(pk=hit.pk).last_recalled_at is not None
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"
    # Inside a caller's transaction the commit is the caller's: its durability stays.
    MemoryItem.objects.filter(pk=hit.pk).update(last_recalled_at=None)
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        _recall(access, "bank transfer invoices")
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            assert cursor.fetchone()[0] == "on"
    assert not any("synchronous_commit = off" in q["sql"] for q in captured.captured_queries)
    assert MemoryItem.objects.get(pk=hit.pk).last_recalled_at is not None


def test_the_item_table_leaves_room_for_a_rows_next_version(db):
    # A stamp that fits on its row's page is a heap-only update: no new entry in the
    # HNSW graph, the GIN index or any other index of the table.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'memory_item'")
        assert "fillfactor=85" in (cursor.fetchone()[0] or [])


def test_graph_ranking_stamps_the_facts_it_returns_not_its_candidates(world, access):
    from memory.enforcement import Keys, read_scopes, visible_q
    from memory.reasoning import graph
    from memory.retrieval import graphrank
    from memory.retrieval.hybrid import RecallQuery

    for n in range(8):
        remember(access, f"Invoice {n} was paid by bank transfer from the Leeds account", scope="agent")
    remember(access, "The office dog is called Biscuit", scope="agent")
    scopes = read_scopes(access, None)
    view = graph.View(access, visible_q(access, scopes))
    rq = RecallQuery(query="bank transfer invoices", scopes=scopes, keys=Keys(narrow=True), top_k=2)
    returned = {r.item.pk for r in graphrank.rank(access, rq, view, hops=2, limit=2)}
    assert len(returned) == 2
    stamped = set(MemoryItem.objects.filter(last_recalled_at__isnull=False).values_list("pk", flat=True))
    # The rank's thirty seeds are candidates; idle retention counts what a caller got.
    assert stamped == returned
