"""``manage.py fedmem_extract``: enqueues the extraction task for the selected items
through the outbox, and running it (and the task) twice changes nothing more."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from core.models import OutboxMessage
from memory.enforcement import system_access
from memory.models import CausalEdge, MemoryItem, SpanLink
from memory.tasks import extract_items
from memory.tests.conftest import remember


def _queued() -> list[str]:
    return sorted(
        pk
        for message in OutboxMessage.objects.filter(task_name="memory.extract_items")
        for pk in message.args[0]
    )


@pytest.fixture
def items(world, access):
    done = remember(access, "Verbose debug logging led to a full disk.", scope="agent").item
    failed = remember(access, "The crash happened because of a full disk.", scope="agent").item
    pending = remember(access, "The crash caused checkout failures.", scope="agent").item
    foreign = remember(system_access(world.foreign_agent), "Fog caused a delay.", scope="agent").item
    extract_items([str(done.pk)])
    MemoryItem.objects.filter(pk=failed.pk).update(extraction_status="failed", extraction_error="boom")
    MemoryItem.objects.filter(pk=foreign.pk).update(extraction_status="done")
    OutboxMessage.objects.all().delete()  # what the writes enqueued
    return {"done": done, "failed": failed, "pending": pending, "foreign": foreign}


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("fedmem_extract", *args, stdout=out)
    return out.getvalue()


def test_failed_resets_status_and_enqueues_only_those(items):
    assert "1 item(s)" in _run("--failed")
    assert _queued() == [str(items["failed"].pk)]
    items["failed"].refresh_from_db()
    assert (items["failed"].extraction_status, items["failed"].extraction_error) == ("pending", "")


def test_pending_and_agent_filter(world, items):
    _run("--pending", "--agent", str(world.agent.pk))
    assert _queued() == [str(items["pending"].pk)]
    OutboxMessage.objects.all().delete()
    _run("--pending", "--agent", str(world.foreign_agent.pk))
    assert _queued() == []


def test_all_backfills_the_graph_and_repeating_changes_nothing(world, items):
    _run("--all", "--tenant", world.tenant.slug, "--batch", "2")
    mine = sorted(str(items[k].pk) for k in ("done", "failed", "pending"))
    assert _queued() == mine
    assert OutboxMessage.objects.count() == 2  # batches of two
    for message in OutboxMessage.objects.all():
        extract_items(*message.args)
    assert set(
        MemoryItem.objects.filter(tenant=world.tenant).values_list("extraction_status", flat=True)
    ) == {"done"}
    edges = sorted(CausalEdge.objects.values_list("item_id", "cause", "effect"))
    links = SpanLink.objects.count()
    assert len(edges) == 3 and links == 2
    # Again: the same rows (the task replaces an item's derived rows).
    OutboxMessage.objects.all().delete()
    _run("--all", "--tenant", world.tenant.slug)
    for message in OutboxMessage.objects.all():
        extract_items(*message.args)
    assert sorted(CausalEdge.objects.values_list("item_id", "cause", "effect")) == edges
    assert SpanLink.objects.count() == links


def test_bad_arguments(items):
    with pytest.raises(CommandError):
        _run("--all", "--agent", "not-an-id")
    with pytest.raises(CommandError):
        _run("--all", "--tenant", "no-such-tenant")
    with pytest.raises(CommandError):
        _run("--pending", "--failed")
    with pytest.raises(CommandError):
        _run("--all", "--batch", "0")
    assert _queued() == []


def _age(item, seconds: int) -> None:
    MemoryItem.objects.filter(pk=item.pk).update(updated_at=timezone.now() - timedelta(seconds=seconds))


def test_sweep_requeues_only_items_pending_past_the_bound_and_once_per_bound(world, items):
    from memory.services.backfill import extraction_sweep

    _age(items["pending"], 3600)
    _age(items["failed"], 3600)
    fresh = remember(system_access(world.agent), "A fresh write is still on its way.", scope="agent").item
    OutboxMessage.objects.all().delete()

    assert extraction_sweep(stale_after=timedelta(minutes=10)) == 1
    assert _queued() == [str(items["pending"].pk)]
    assert OutboxMessage.objects.get().kwargs == {"only_pending": True}
    # Swept again at once: already re-queued within the bound, nothing more.
    assert extraction_sweep(stale_after=timedelta(minutes=10)) == 0
    # Once the bound has passed since the re-queue, it is re-queued again.
    MemoryItem.objects.filter(pk=items["pending"].pk).update(
        extraction_requeued_at=timezone.now() - timedelta(minutes=11)
    )
    assert extraction_sweep(stale_after=timedelta(minutes=10)) == 1
    fresh.refresh_from_db()
    assert fresh.extraction_status == "pending" and fresh.extraction_requeued_at is None


def test_swept_task_extracts_what_is_pending_and_skips_what_settled(world, items):
    before = CausalEdge.objects.filter(item_id=items["done"].pk).count()
    CausalEdge.objects.filter(item_id=items["done"].pk).delete()
    extract_items([str(items["done"].pk), str(items["pending"].pk)], only_pending=True)
    # The settled item was not extracted again (its edges stay deleted); the pending one was.
    assert before and not CausalEdge.objects.filter(item_id=items["done"].pk).exists()
    items["pending"].refresh_from_db()
    assert items["pending"].extraction_status == "done"


def test_the_sweep_runs_on_the_beat_schedule():
    from django.conf import settings

    entry = settings.CELERY_BEAT_SCHEDULE["memory-extraction-sweep"]
    assert entry["task"] == "memory.extraction_sweep"
    assert entry["schedule"] == settings.FEDMEM_EXTRACTION_SWEEP_SECONDS
    assert settings.FEDMEM_EXTRACTION_STALE_SECONDS > 62  # beyond the retries' total backoff
