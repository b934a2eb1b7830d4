"""The write pipeline's contract: slow analysis (embedding, personal-data detection)
runs before a write's transaction, storing runs inside one, and a change refused by
a legal hold leaves its audit record on every path (supersede and revive like
update and forget)."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from core.errors import Conflict
from governance.models import AuditEvent
from governance.services.holds import legal_hold_place
from memory import embeddings
from memory.models import MemoryItem
from memory.services.contradictions import contradiction_undo
from memory.services.supersession import memory_revive, memory_supersede
from memory.tests.conftest import remember


def _in_own_transaction() -> bool:
    # The transactions a test case wraps around each test do not count.
    return any(not getattr(block, "_from_testcase", False) for block in connection.atomic_blocks)


class RecordingEmbedder:
    """The real embedder, noting for each call whether a transaction was open."""

    def __init__(self, real: embeddings.Embedder) -> None:
        self.real = real
        self.dimension = real.dimension
        self.calls: list[bool] = []

    def embed(self, texts):
        self.calls.append(_in_own_transaction())
        return self.real.embed(texts)


@pytest.fixture
def recording(monkeypatch):
    spy = RecordingEmbedder(embeddings.get_embedder())
    monkeypatch.setattr(embeddings, "_embedder", spy)
    return spy


def _blocked(operation: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action="legal_hold.blocked", data__operation=operation))


def test_contradiction_undo_embeds_before_its_transaction(world, access, recording):
    remember(access, "The checkout service depends on Redis.", scope="agent")
    out = remember(
        access, "The checkout service now depends on Memcached.", scope="agent", check_contradictions=True
    )
    [decision] = out.contradictions
    recording.calls.clear()
    undone = contradiction_undo(access=access, decision_id=decision.pk, user=world.owner)
    restored = MemoryItem.objects.get(pk=undone.details["restored_item"])
    assert restored.content == "The checkout service depends on Redis." and restored.invalid_at is None
    # The restored copy was embedded, and never while the decision and item rows were locked.
    assert recording.calls == [False]


def test_supersede_and_revive_embed_before_their_transaction(world, access, recording):
    old = remember(access, "The deploy window is Tuesday.", scope="agent").item
    recording.calls.clear()
    outcome = memory_supersede(access=access, item_id=old.pk, content="The deploy window is Thursday.")
    memory_revive(access=access, item_id=old.pk)
    assert MemoryItem.objects.current().filter(content="The deploy window is Tuesday.").count() == 1
    assert outcome.new.content == "The deploy window is Thursday."
    assert recording.calls and not any(recording.calls)


def test_a_supersede_refused_by_a_hold_is_audited(world, access):
    item = remember(access, "Clause 7 was waived by phone", user_id="cust-1").item
    hold = legal_hold_place(
        tenant=world.tenant, actor=world.officer, reason="litigation", target="item", item_id=item.pk
    )
    with pytest.raises(Conflict) as caught:
        memory_supersede(access=access, item_id=item.pk, content="Clause 7 stands")
    assert caught.value.code == "memory_legal_hold"
    assert MemoryItem.objects.filter(content="Clause 7 stands").count() == 0
    [event] = _blocked("supersede")
    assert event.data["holds"] == [str(hold.pk)] and event.target_id == str(item.pk)


def test_a_revive_refused_by_a_hold_on_the_successor_is_audited(world, access):
    old = remember(access, "The SLA is 99.9%.", user_id="cust-1").item
    successor = memory_supersede(access=access, item_id=old.pk, content="The SLA is 99.5%.").new
    legal_hold_place(
        tenant=world.tenant, actor=world.officer, reason="audit", target="item", item_id=successor.pk
    )
    count = MemoryItem.objects.count()
    with pytest.raises(Conflict) as caught:
        memory_revive(access=access, item_id=old.pk)
    assert caught.value.code == "memory_legal_hold"
    assert MemoryItem.objects.count() == count
    assert MemoryItem.objects.get(pk=successor.pk).invalid_at is None
    [event] = _blocked("revive")
    assert event.target_id == str(successor.pk)


def test_prepare_refuses_to_run_inside_a_transaction(access):
    from memory.services.write import MemoryDraft, prepare
    from memory.services.write.prepare import InTransaction

    with pytest.raises(InTransaction), transaction.atomic():
        prepare(access, [MemoryDraft(content="Slow work under a lock", scope="agent")])


def test_store_requires_a_transaction(access):
    from memory.services.write import MemoryDraft, prepare, store
    from memory.services.write.store import NotInTransaction

    [prepared] = prepare(access, [MemoryDraft(content="Stored only inside a transaction", scope="agent")])
    with pytest.raises(NotInTransaction):
        store(access, [prepared], "api")
    assert not MemoryItem.objects.filter(content="Stored only inside a transaction").exists()
