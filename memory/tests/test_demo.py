"""The demo command seeds a few hundred realistic memories, once."""

from __future__ import annotations

import io
import uuid

import pytest
from django.core.management import call_command

from memory.graph_datasets import facts
from memory.models import MemoryHistory, MemoryItem, SessionMessage


def test_demo_seeds_a_few_hundred_memories_idempotently(db, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    first = io.StringIO()
    call_command("fedmem_demo", stdout=first)
    count = MemoryItem.objects.count()
    graph = MemoryItem.objects.filter(source="demo-graph").count()
    assert graph == len(facts())  # the demo graph datasets, written by their own agents
    assert 200 <= count - graph <= 500
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
    assert f"Demo memories: {count - graph}" in first.getvalue()
    assert first.getvalue() == second.getvalue()


def test_graph_datasets_load_into_any_tenant_and_trace_their_chains(world):
    """Loaded with extraction, each chain is found through trace from its root cause,
    in order, across agents and sessions, and the distractors stay out."""
    from memory.enforcement import read_scopes, system_access, visible_q
    from memory.graph_datasets import cases
    from memory.reasoning import graph

    out = io.StringIO()
    args = ["--graph-tenant", world.tenant.slug, "--graph-domains", "operations,finance", "--extract-now"]
    call_command("fedmem_demo", *args, stdout=out)
    assert f"{len(facts(['operations', 'finance']))} facts" in out.getvalue()
    loaded = MemoryItem.objects.filter(tenant=world.tenant, source="demo-graph")
    assert loaded.count() == len(facts(["operations", "finance"]))
    assert loaded.values("agent").distinct().count() == 4
    assert not loaded.exclude(extraction_status="done").exists()
    reader = system_access(loaded.first().agent)
    view = graph.View(reader, visible_q(reader, read_scopes(reader, None)))
    checked = 0
    for case in cases():
        if case.domain not in ("operations", "finance"):
            continue
        result = graph.trace(view, direction="effects", content=case.root, max_depth=6, max_visited=50)
        contents = dict(loaded.values_list("pk", "content"))
        depth = {}
        for hop in result["chain"]:
            depth.setdefault(contents[uuid.UUID(hop["item_id"])], hop["depth"])
        # Every fact of the gold chain is reached from the root cause, each no deeper
        # than its place in the chain (a loose span link may reach a later fact
        # early; none is skipped).
        assert set(case.gold) <= set(depth), (case.question, depth)
        depths = [depth[text] for text in case.gold]
        assert depths[0] == 1 and all(d <= k + 1 for k, d in enumerate(depths)), (case.question, depths)
        checked += 1
    assert checked == 12
    # Idempotent: a rerun writes nothing new.
    again = io.StringIO()
    call_command("fedmem_demo", *args, stdout=again)
    assert "(0 new)" in again.getvalue()
    assert MemoryItem.objects.filter(tenant=world.tenant, source="demo-graph").count() == loaded.count()


def test_graph_datasets_command_refuses_unknown_tenant_or_domain(world):
    from django.core.management import CommandError

    with pytest.raises(CommandError):
        call_command("fedmem_demo", "--graph-tenant", "no-such-tenant")
    with pytest.raises(CommandError):
        call_command("fedmem_demo", "--graph-tenant", world.tenant.slug, "--graph-domains", "astrology")
    assert not MemoryItem.objects.exists()
