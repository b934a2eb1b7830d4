"""Holds and erasure under the conditions an adversarial pass found them failing:
a dataset hold next to ordinary memory, a contradiction decision, a hold the
contradiction check and deduplication ignored, knowledge chunks and merged
entities left behind, a hold row naming its subject in clear."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from core.errors import Conflict
from governance.models import AuditEvent, Candidate, ErasureRequest, LegalHold, Role
from governance.services import erasure as erasure_service
from governance.services.audit import subject_hash
from governance.services.erasure import erasure_request_create, erasure_run
from governance.services.holds import legal_hold_place, legal_hold_release
from governance.tests import factories as f
from memory.models import ContradictionDecision, Entity, MemoryItem, Mention
from memory.services.knowledge import knowledge_ingest
from memory.services.retention import overdue_unheld_count, retention_sweep
from memory.tests.conftest import remember
from memory.tests.graph_helpers import fact

SUBJECT = "cust-erase-me"


def _hold(world, **fields):
    fields.setdefault("reason", "litigation")
    return legal_hold_place(tenant=world.tenant, actor=world.officer, **fields)


def _erase(world, subject: str = SUBJECT) -> ErasureRequest:
    request = erasure_request_create(
        tenant=world.tenant, actor=world.officer, subject=subject, scope="tenant", reason="GDPR art. 17"
    )
    return erasure_run(request_id=request.pk)


def _row(table: str, pk) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT row_to_json(t)::text FROM {table} t WHERE id = %s", [pk])
        row = cursor.fetchone()
    return row[0] if row else ""


def _blocked(operation: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action="legal_hold.blocked", data__operation=operation))


# --- finding 1: a dataset hold is NULL for rows without the key ---------------------------


def test_a_dataset_hold_does_not_shield_ordinary_memory_from_erasure(world, access):
    plain = remember(access, "Prefers the window seat", user_id=SUBJECT).item
    _hold(world, target="dataset", dataset="contracts")
    request = _erase(world)
    assert not MemoryItem.objects.filter(pk=plain.pk).exists()
    assert request.status == "completed"
    assert request.certificate["held"] == [] and request.certificate["holds"] == []


def test_a_dataset_hold_does_not_stop_retention_of_ordinary_memory(world, access):
    expired = remember(access, "Temporary door code 4471", user_id="cust-2", retention_days=1).item
    _hold(world, target="dataset", dataset="contracts")
    later = timezone.now() + timedelta(days=2)
    assert overdue_unheld_count(now=later) == 1
    report = retention_sweep(now=later)
    assert report.deleted == 1 and report.kept_held == 0
    assert not MemoryItem.objects.filter(pk=expired.pk).exists()
    assert overdue_unheld_count(now=later) == 0


def test_a_dataset_hold_still_keeps_its_chunks_and_the_certificate_names_it(world, access):
    outcome = knowledge_ingest(
        access=access, texts=["The lease renews every March."], dataset_name="contracts", user_id=SUBJECT
    )
    remember(access, "Prefers the window seat", user_id=SUBJECT)
    hold = _hold(world, target="dataset", dataset="contracts")
    [chunk_id] = outcome.item_ids
    before = _row("memory_item", chunk_id)
    request = _erase(world)
    assert _row("memory_item", chunk_id) == before
    assert MemoryItem.objects.filter(user_id=SUBJECT).count() == 1
    [entry] = request.certificate["held"]
    assert entry["table"] == "memory_item" and entry["by_hold"] == {str(hold.pk): 1}
    [summary] = request.certificate["holds"]
    assert (summary["hold"], summary["target"], summary["dataset"]) == (str(hold.pk), "dataset", "contracts")


# --- finding 2: contradiction decisions, and one plan without partial deletion -----------


def test_erasure_completes_for_a_subject_whose_items_took_part_in_a_contradiction(world, access):
    remember(access, "The billing service runs on MySQL.", user_id=SUBJECT, scope="user")
    remember(
        access,
        "The billing service runs on PostgreSQL.",
        user_id=SUBJECT,
        scope="user",
        check_contradictions=True,
    )
    assert ContradictionDecision.objects.count() == 1
    request = _erase(world)
    assert request.status == "completed"
    assert not MemoryItem.objects.filter(user_id=SUBJECT).exists()
    assert not ContradictionDecision.objects.exists()
    assert request.certificate["deleted"]["memory_contradiction"] == 1


def test_a_failing_erasure_deletes_nothing_and_keeps_going_after_a_fix(world, access):
    remember(access, "Prefers the window seat", user_id=SUBJECT)
    Candidate.objects.create(
        tenant=world.tenant,
        agent=world.agent,
        subject=SUBJECT,
        provider="mem0",
        external_id="m-1",
        record_kind="fact",
        content="Prefers the window seat",
        content_hash="x" * 64,
        captured_at=timezone.now(),
    )

    def broken(target):
        raise RuntimeError("disk full")

    erasure_service.register_subject_deleter("zz-broken", broken)
    try:
        request = erasure_request_create(
            tenant=world.tenant, actor=world.officer, subject=SUBJECT, scope="tenant", reason="r"
        )
        with pytest.raises(RuntimeError):
            erasure_run(request_id=request.pk)
    finally:
        erasure_service._DELETERS.pop("zz-broken")
    request.refresh_from_db()
    assert request.status == "failed"
    # Neither the candidates (erased first) nor the memory: nothing half-erased.
    assert Candidate.objects.filter(subject=SUBJECT).count() == 1
    assert MemoryItem.objects.filter(user_id=SUBJECT).count() == 1


# --- finding 3: the contradiction check and holds ------------------------------------------


@pytest.mark.parametrize("target", ["subject", "item"])
def test_the_contradiction_check_never_retires_a_held_fact(world, access, target):
    old = remember(access, "The billing service runs on MySQL.", user_id=SUBJECT, scope="user").item
    hold = _hold(
        world, target=target, **({"subject": SUBJECT} if target == "subject" else {"item_id": old.pk})
    )
    before = _row("memory_item", old.pk)
    remember(
        access,
        "The billing service runs on PostgreSQL.",
        user_id=SUBJECT,
        scope="user",
        check_contradictions=True,
    )
    assert _row("memory_item", old.pk) == before
    assert MemoryItem.objects.get(pk=old.pk).invalid_at is None
    assert not ContradictionDecision.objects.exists()
    [event] = _blocked("contradiction")
    assert event.data["holds"] == [str(hold.pk)] and event.target_id == str(old.pk)


# --- finding 4: deduplication and holds -----------------------------------------------------


def test_reposting_held_content_changes_nothing_on_the_held_row(world, access):
    held = remember(access, "Clause 7 was waived by phone", user_id=SUBJECT, scope="user").item
    _hold(world, target="subject", subject=SUBJECT)
    before = _row("memory_item", held.pk)
    again = remember(
        access,
        "Clause 7 was waived by phone",
        user_id=SUBJECT,
        scope="agent",
        classification="confidential",
        retention_days=36500,
        personal_data=True,
    )
    assert again.item.pk == held.pk and again.deduplicated
    assert _row("memory_item", held.pk) == before
    assert len(_blocked("dedup_merge")) == 1


def test_reingesting_into_a_held_dataset_keeps_the_chunk_classification(world, access):
    outcome = knowledge_ingest(
        access=access, texts=["The lease renews every March."], dataset_name="contracts"
    )
    _hold(world, target="dataset", dataset="contracts")
    [chunk_id] = outcome.item_ids
    before = _row("memory_item", chunk_id)
    knowledge_ingest(
        access=access,
        texts=["The lease renews every March."],
        dataset_name="contracts",
        classification="confidential",
    )
    assert _row("memory_item", chunk_id) == before
    assert len(_blocked("dedup_merge")) == 1


# --- finding 6: residue --------------------------------------------------------------------


def test_knowledge_chunks_written_for_the_subject_are_erased_with_their_graph(world, access):
    outcome = knowledge_ingest(
        access=access,
        texts=["Quentin Vasquez-Ortel signed the lease because the rent fell."],
        dataset_name="tenancy",
        user_id=SUBJECT,
    )
    from memory.extraction.pipeline import extract_item

    [chunk_id] = outcome.item_ids
    extract_item(chunk_id)
    assert MemoryItem.objects.get(pk=chunk_id).user_id == SUBJECT
    assert Mention.objects.filter(item_id=chunk_id).exists()
    request = _erase(world)
    assert not MemoryItem.objects.filter(pk=chunk_id).exists()
    assert not Mention.objects.filter(item_id=chunk_id).exists()
    assert not Entity.objects.filter(normalized="quentin vasquez-ortel").exists()
    assert request.certificate["deleted"]["memory_item"] == 1


@pytest.fixture
def merging(settings):
    # "Zorblax Industries" and "Zorblax Industries Group" embed at ~0.917 cosine.
    settings.FEDMEM_ENTITY_MERGE_THRESHOLD = 0.9


def test_a_shared_entity_loses_the_erased_subjects_spelling(world, access, merging):
    fact(access, "Zorblax Industries bought the plant.", user_id="cust-keep")
    fact(access, "Zorblax Industries Group signed the lease.", user_id=SUBJECT)
    entity = Entity.objects.get(normalized="zorblax industries")
    assert "zorblax industries group" in entity.aliases
    _erase(world)
    entity.refresh_from_db()
    assert entity.aliases == [] and entity.name == "Zorblax Industries"


def test_an_entity_the_erased_subject_created_does_not_survive_a_merge(world, access, merging):
    fact(access, "Zorblax Industries Group signed the lease.", user_id=SUBJECT)
    kept = fact(access, "Zorblax Industries bought the plant.", user_id="cust-keep")
    created = Entity.objects.get(normalized="zorblax industries group")
    assert created.aliases == ["zorblax industries"]
    old_vector = list(created.embedding)
    _erase(world)
    assert not Entity.objects.filter(normalized="zorblax industries group").exists()
    [entity] = Entity.objects.filter(mentions__item=kept, normalized="zorblax industries")
    assert entity.name == "Zorblax Industries" and entity.aliases == []
    assert list(entity.embedding) != old_vector  # the name's vector is re-derived too


def test_a_released_hold_does_not_keep_the_subject_in_clear(world, access):
    remember(access, "Prefers the window seat", user_id=SUBJECT)
    hold = _hold(world, target="subject", subject=SUBJECT)
    second = f.member(world.tenant, Role.SECURITY_OFFICER, username="officer2")
    legal_hold_release(hold=hold, actor=second, reason="case closed")
    _erase(world)
    hold.refresh_from_db()
    assert hold.subject == subject_hash(SUBJECT)
    assert not LegalHold.objects.filter(subject__icontains=SUBJECT).exists()


def test_a_hashed_subject_hold_still_covers_the_subject(world, access):
    held = remember(access, "Clause 7 was waived by phone", user_id=SUBJECT).item
    free = remember(access, "Another customer", user_id="cust-2").item
    hold = _hold(world, target="subject", subject=SUBJECT)
    assert hold.subject == subject_hash(SUBJECT)
    from memory.services.items import memory_forget

    with pytest.raises(Conflict):
        memory_forget(access=access, item_id=held.pk)
    memory_forget(access=access, item_id=free.pk)
    request = _erase(world)
    assert MemoryItem.objects.filter(pk=held.pk).exists()
    assert request.certificate["held"][0]["by_hold"] == {str(hold.pk): 1}
