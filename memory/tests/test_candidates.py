"""Candidates: closed vocabulary, checkpoints refused, owner review, promotion with
provenance, the erasure fence, never recalled as memory, and the API role matrix."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from conftest import assert_error
from governance.models import AuditEvent, Candidate, Role
from governance.services.candidates import CandidateRefused, candidate_import
from governance.services.erasure import erasure_request_create, erasure_run
from governance.tests import factories as f
from memory.models import MemoryItem
from memory.text import content_hash

URL = "/v1/memory/candidates"


def _import(world, content="Prefers morning calls", subject="jane", **fields):
    fields.setdefault("record_kind", "fact")
    fields.setdefault("captured_at", timezone.now())
    fields.setdefault("external_id", f"ext-{content_hash(content)[:8]}")
    return candidate_import(
        agent=world.agent,
        provider="mem0-shared",
        content=content,
        subject=subject,
        content_hash=content_hash(content),
        **fields,
    )


@pytest.fixture
def jane(world):
    """The subject of the records, a member of the tenant."""
    return f.member(world.tenant, Role.DEVELOPER, username="jane")


def test_record_kinds_are_a_closed_vocabulary_and_checkpoints_are_refused(world):
    with pytest.raises(CandidateRefused):
        _import(world, record_kind="blob")
    with pytest.raises(CandidateRefused) as caught:
        _import(world, record_kind="checkpoint")
    assert caught.value.code == "checkpoint_refused"
    with pytest.raises(CandidateRefused):
        _import(world, record_kind="langgraph_checkpoint")
    assert not Candidate.objects.exists()


def test_importing_twice_keeps_one_candidate(world):
    assert _import(world).pk == _import(world).pk
    assert Candidate.objects.count() == 1


def test_subject_approves_and_promotes_with_provenance(world, as_user, jane):
    candidate = _import(world)
    client = as_user(jane)
    assert_error(client.get(f"{URL}/{candidate.pk}"), 404)  # jane cannot view the agent
    admin = as_user(world.admin)
    review = admin.post(
        f"{URL}/{candidate.pk}/review", {"decision": "approve", "reason": "ok"}, format="json"
    )
    assert review.status_code == 200, review.content
    assert review.json()["reviewed_as"] == "tenant_admin"
    response = admin.post(f"{URL}/{candidate.pk}/promote")
    assert response.status_code == 201, response.content
    item = MemoryItem.objects.get(pk=response.json()["item_id"])
    assert item.content == "Prefers morning calls" and item.user_id == "jane"
    promoted = item.provenance["promoted_from"]
    assert promoted["provider"] == "mem0-shared" and promoted["external_id"] == candidate.external_id
    assert promoted["reviewer"] == str(world.admin.pk) and promoted["reviewed_as"] == "tenant_admin"
    assert promoted["reviewed_at"]
    assert response.json()["candidate"]["status"] == "promoted"
    assert {"candidate.review", "candidate.promote"} <= set(
        AuditEvent.objects.values_list("action", flat=True)
    )
    assert_error(admin.post(f"{URL}/{candidate.pk}/promote"), 409, "candidate_promoted")


def test_the_subject_themselves_may_review(world, as_user, jane):
    from guardian.shortcuts import assign_perm

    assign_perm("governance.viewer", jane, world.agent)
    candidate = _import(world, subject=str(jane.pk))
    response = as_user(jane).post(
        f"{URL}/{candidate.pk}/review", {"decision": "reject", "reason": "not true"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "rejected" and response.json()["reviewed_as"] == "subject"
    assert_error(as_user(world.admin).post(f"{URL}/{candidate.pk}/promote"), 409, "candidate_not_approved")


def test_ownership_is_the_user_id_not_the_username(world, as_user):
    from guardian.shortcuts import assign_perm

    # A member whose username equals the subject string is not the subject.
    namesake = f.member(world.tenant, Role.DEVELOPER, username="cust-77")
    assign_perm("governance.viewer", namesake, world.agent)
    candidate = _import(world, subject="cust-77")
    body = {"decision": "approve", "reason": "mine"}
    response = as_user(namesake).post(f"{URL}/{candidate.pk}/review", body, format="json")
    assert_error(response, 403, "not_candidate_owner")
    assert Candidate.objects.get().status == "pending"
    # A record about the namesake's user id is theirs.
    own = _import(world, subject=str(namesake.pk), content="Likes tea")
    response = as_user(namesake).post(f"{URL}/{own.pk}/review", body, format="json")
    assert response.status_code == 200 and response.json()["reviewed_as"] == "subject"


def test_someone_else_cannot_review_and_promotion_needs_approval(world, as_user):
    candidate = _import(world)
    owner = as_user(world.owner)  # editor of the agent, but not the subject nor an admin
    body = {"decision": "approve", "reason": "x"}
    assert_error(owner.post(f"{URL}/{candidate.pk}/review", body, format="json"), 403, "not_candidate_owner")
    assert_error(owner.post(f"{URL}/{candidate.pk}/promote"), 409, "candidate_not_approved")
    assert Candidate.objects.get().status == "pending"
    assert not MemoryItem.objects.exists()


def test_review_bad_input_names_the_field(world, as_user):
    candidate = _import(world)
    client = as_user(world.admin)
    error = assert_error(
        client.post(f"{URL}/{candidate.pk}/review", {"decision": "maybe"}, format="json"), 400
    )
    assert {"decision", "reason"} <= set(error["details"]["fields"])
    assert Candidate.objects.get().status == "pending"


def test_a_fence_blocks_promotion_of_a_pre_erasure_copy(world, as_user):
    candidate = _import(world, captured_at=timezone.now() - timedelta(days=1))
    admin = as_user(world.admin)
    admin.post(f"{URL}/{candidate.pk}/review", {"decision": "approve", "reason": "ok"}, format="json")
    # Erasing the subject deletes the candidate; a stale copy imported again is fenced.
    request = erasure_request_create(
        tenant=world.tenant, actor=world.officer, subject="jane", scope="tenant", reason="art. 17"
    )
    request = erasure_run(request_id=request.pk)
    assert not Candidate.objects.exists()
    assert request.certificate["deleted"]["governance_candidate"] == 1
    assert _import(world, captured_at=timezone.now() - timedelta(days=1)) is None
    # A copy that slipped in (written directly) still cannot be promoted.
    stale = Candidate.objects.create(
        tenant=world.tenant,
        agent=world.agent,
        provider="mem0-shared",
        external_id="stale",
        record_kind="fact",
        content="Prefers morning calls",
        content_hash=content_hash("Prefers morning calls"),
        subject="jane",
        captured_at=timezone.now(),
        status="approved",
        reviewed_as="tenant_admin",
        reviewed_by=world.admin,
    )
    assert_error(admin.post(f"{URL}/{stale.pk}/promote"), 409, "erasure_fenced")
    assert not MemoryItem.objects.exists()


def test_candidates_are_never_recalled_as_memory(world, as_agent):
    _import(world, content="Secret candidate content about invoices")
    response = as_agent(world.agent).post(
        f"/v1/memory/agents/{world.agent.pk}/recall", {"query": "invoices", "user_id": "jane"}, format="json"
    )
    assert response.status_code == 200
    assert "Secret candidate" not in response.content.decode()


def test_list_filters_and_visibility(world, as_user):
    _import(world, content="A fact")
    _import(world, content="An episode", record_kind="episode", subject="joe")
    client = as_user(world.admin)
    assert len(client.get(URL).json()) == 2
    assert [c["content"] for c in client.get(URL, {"kind": "episode"}).json()] == ["An episode"]
    assert [c["content"] for c in client.get(URL, {"subject": "jane"}).json()] == ["A fact"]
    assert client.get(URL, {"status": "promoted"}).json() == []
    assert client.get(URL, {"provider": "other"}).json() == []
    assert len(as_user(world.officer).get(URL).json()) == 2
    assert as_user(world.teammate).get(URL).json() == []


def test_anonymous_agent_keys_and_foreign_tenants(world, as_user, as_agent):
    candidate = _import(world)
    for path in (URL, f"{URL}/{candidate.pk}"):
        assert_error(APIClient().get(path), 401)
        assert_error(as_agent(world.agent).get(path), 403)
    assert_error(APIClient().post(f"{URL}/{candidate.pk}/promote"), 401)
    outsider = as_user(world.outsider)
    assert outsider.get(URL).json() == []
    assert_error(outsider.get(f"{URL}/{candidate.pk}"), 404, "candidate_not_found")
    body = {"decision": "approve", "reason": "x"}
    assert_error(outsider.post(f"{URL}/{candidate.pk}/review", body, format="json"), 404)
    assert_error(outsider.post(f"{URL}/{candidate.pk}/promote"), 404)
    assert_error(as_user(world.admin).get(f"{URL}/not-a-uuid"), 404)
