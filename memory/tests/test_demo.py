"""The demo command seeds a few hundred realistic memories, once."""

from __future__ import annotations

import io

from django.core.management import call_command

from memory.models import MemoryHistory, MemoryItem, SessionMessage


def test_demo_seeds_a_few_hundred_memories_idempotently(db, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    first = io.StringIO()
    call_command("fedmem_demo", stdout=first)
    count = MemoryItem.objects.count()
    assert 200 <= count <= 500
    assert (
        MemoryItem.objects.filter(agent__name="support-bot", scope="user")
        .values("user_id")
        .distinct()
        .count()
        > 20
    )
    assert MemoryItem.objects.filter(agent__name="ops-agent").count() >= 70
    assert MemoryItem.objects.filter(personal_data=True).exists()  # customer names are personal data
    assert SessionMessage.objects.count() == 3
    history = MemoryHistory.objects.count()

    second = io.StringIO()
    call_command("fedmem_demo", stdout=second)
    assert MemoryItem.objects.count() == count
    assert MemoryHistory.objects.count() == history
    assert SessionMessage.objects.count() == 3
    assert f"Demo memories: {count}" in first.getvalue()
    assert first.getvalue() == second.getvalue()
