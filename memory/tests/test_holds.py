"""Legal holds against the memory delete paths: nothing held is deleted or changed,
every stopped attempt is audited, and releasing the hold lets deletion proceed."""

from __future__ import annotations

import pytest
from django.db import connection

from core.errors import Conflict
from governance.models import AuditEvent, LegalHold, Role
from governance.services.holds import legal_hold_place, legal_hold_release
from governance.tests import factories as f
from memory.holds import is_held
from memory.models import MemoryItem, SessionMessage
from memory.services.items import memory_forget, memory_purge, memory_update
from memory.services.sessions import session_message_append
from memory.tests.conftest import memories_url, remember


def _row_bytes(pk) -> tuple:
    """The stored row as the database has it, to prove held data is byte-identical."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT row_to_json(m)::text FROM memory_item m WHERE id = %s", [pk])
        return cursor.fetchone()


def _hold(world, **fields):
    fields.setdefault("reason", "litigation")
    return legal_hold_place(tenant=world.tenant, actor=world.officer, **fields)


def _blocked(operation: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action="legal_hold.blocked", data__operation=operation))


@pytest.fixture
def held_item(world, access):
    item = remember(access, "Clause 7 was waived by phone", user_id="cust-1").item
    return item


@pytest.mark.parametrize(
    "target",
    ["subject", "agent", "scope", "item", "dataset"],
)
def test_each_hold_target_covers_the_item(world, access, target):
    item = remember(access, "Clause 7 was waived by phone", user_id="cust-1", scope="user").item
    MemoryItem.objects.filter(pk=item.pk).update(provenance={"dataset": "contracts"})
    other = remember(access, "Unrelated note", user_id="cust-2", scope="agent").item
    fields = {
        "subject": {"subject": "cust-1"},
        "agent": {"agent": world.agent},
        "scope": {"scope": "user", "agent": world.agent},
        "item": {"item_id": item.pk},
        "dataset": {"dataset": "contracts"},
    }[target]
    _hold(world, target=target, **fields)
    assert is_held(MemoryItem.objects.get(pk=item.pk))
    assert is_held(MemoryItem.objects.get(pk=other.pk)) == (target == "agent")


def test_a_hold_blocks_delete_and_the_attempt_is_audited(world, access, held_item):
    hold = _hold(world, target="subject", subject="cust-1")
    before = _row_bytes(held_item.pk)
    with pytest.raises(Conflict) as caught:
        memory_forget(access=access, item_id=held_item.pk)
    assert caught.value.code == "memory_legal_hold"
    assert _row_bytes(held_item.pk) == before
    [event] = _blocked("delete")
    assert event.data["holds"] == [str(hold.pk)]
    assert event.target_id == str(held_item.pk)


def test_a_hold_blocks_update_byte_identical(world, access, held_item):
    _hold(world, target="item", item_id=held_item.pk)
    before = _row_bytes(held_item.pk)
    with pytest.raises(Conflict):
        memory_update(access=access, item_id=held_item.pk, content="rewritten entirely")
    assert _row_bytes(held_item.pk) == before
    assert len(_blocked("update")) == 1


def test_a_hold_blocks_purge_for_what_it_covers_only(world, access, held_item):
    free = remember(access, "Free to go", user_id="cust-2").item
    _hold(world, target="subject", subject="cust-1")
    before = _row_bytes(held_item.pk)
    report = memory_purge(access=access, scope="user", confirm=True)
    assert report.kept_legal_hold == 1 and report.deleted == 1
    assert _row_bytes(held_item.pk) == before
    assert not MemoryItem.objects.filter(pk=free.pk).exists()
    [event] = _blocked("purge")
    assert event.data["count"] == 1


def test_a_hold_keeps_session_messages_through_a_purge(world, access):
    session_message_append(
        access=access, session_id="s1", role="user", content="held words", user_id="cust-1"
    )
    session_message_append(
        access=access, session_id="s1", role="user", content="free words", user_id="cust-2"
    )
    _hold(world, target="subject", subject="cust-1")
    memory_purge(access=access, scope="session", confirm=True)
    assert list(SessionMessage.objects.values_list("content", flat=True)) == ["held words"]


def test_released_hold_no_longer_protects(world, access, held_item):
    hold = _hold(world, target="subject", subject="cust-1")
    second = f.member(world.tenant, Role.SECURITY_OFFICER, username="officer2")
    legal_hold_release(hold=hold, actor=second, reason="case closed")
    memory_forget(access=access, item_id=held_item.pk)
    assert not MemoryItem.objects.filter(pk=held_item.pk).exists()


def test_a_hold_of_another_tenant_covers_nothing_here(world, access, held_item):
    other_officer = f.member(world.other_tenant, Role.SECURITY_OFFICER)
    legal_hold_place(
        tenant=world.other_tenant, actor=other_officer, target="subject", subject="cust-1", reason="x"
    )
    assert not is_held(held_item)
    memory_forget(access=access, item_id=held_item.pk)


def test_delete_over_the_api_is_409_and_audited(world, access, as_agent, held_item):
    _hold(world, target="agent", agent=world.agent)
    response = as_agent(world.agent).delete(memories_url(world.agent, f"/{held_item.pk}"))
    assert response.status_code == 409, response.content
    assert MemoryItem.objects.filter(pk=held_item.pk).exists()
    [event] = _blocked("delete")
    assert event.actor_type == "agent"


def test_officer_places_an_item_hold_over_the_api(world, as_user, held_item):
    response = as_user(world.officer).post(
        "/v1/memory/legal-holds", {"target": "item", "item": str(held_item.pk), "reason": "r"}, format="json"
    )
    assert response.status_code == 201, response.content
    assert LegalHold.objects.get().item_id == held_item.pk
