"""Legal holds over the API: place, release by a second officer, roles, tenants, audit."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from conftest import assert_error
from governance.models import AuditEvent, LegalHold, Role
from governance.services.audit import subject_hash
from governance.tests import factories as f

URL = "/v1/memory/legal-holds"


@pytest.fixture
def second_officer(world):
    return f.member(world.tenant, Role.SECURITY_OFFICER, username="officer2")


def place(client, **body):
    body.setdefault("reason", "litigation 2026-17")
    return client.post(URL, body, format="json")


def test_officer_places_a_subject_hold_audited_with_the_subject_hashed(world, as_user):
    response = place(as_user(world.officer), target="subject", subject="cust-1")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["is_active"] and body["placed_by"] == "officer"
    assert body["subject_hash"] == subject_hash("cust-1") and "subject" not in body
    event = AuditEvent.objects.get(action="legal_hold.place")
    assert event.data["subject_hash"] == subject_hash("cust-1")
    assert "cust-1" not in str(event.data)
    # The hold row itself keeps only the keyed hash, active or released.
    assert LegalHold.objects.get().subject == subject_hash("cust-1")


def test_hold_targets_keep_only_their_own_fields(world, as_user):
    client = as_user(world.officer)
    agent_hold = place(client, target="agent", agent=str(world.agent.pk), subject="ignored").json()
    assert agent_hold["agent"] == str(world.agent.pk) and agent_hold["subject_hash"] == ""
    scope_hold = place(client, target="scope", scope="team", agent=str(world.agent.pk)).json()
    assert scope_hold["scope"] == "team"
    assert place(client, target="dataset", dataset="contracts").json()["dataset"] == "contracts"
    assert LegalHold.objects.count() == 3


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"target": "planet"}, "target"),
        ({"target": "subject"}, "subject"),
        ({"target": "agent"}, "agent"),
        ({"target": "agent", "agent": "not-a-uuid"}, "agent"),
        ({"target": "scope", "scope": "galaxy"}, "scope"),
        ({"target": "dataset"}, "dataset"),
        ({"target": "item", "item": "5b1f0f5e-0000-4000-8000-000000000000"}, "item"),
        ({"target": "subject", "subject": "cust-1", "reason": ""}, "reason"),
    ],
)
def test_place_refuses_bad_input_naming_the_field(world, as_user, body, field):
    error = assert_error(place(as_user(world.officer), **body), 400, "validation_error")
    assert field in error["details"]["fields"]
    assert not LegalHold.objects.exists()
    assert not AuditEvent.objects.filter(action="legal_hold.place").exists()


def test_an_agent_of_another_tenant_cannot_be_held(world, as_user):
    response = place(as_user(world.officer), target="agent", agent=str(world.foreign_agent.pk))
    assert "agent" in assert_error(response, 400)["details"]["fields"]


def test_release_needs_a_second_security_officer(world, as_user, second_officer):
    hold_id = place(as_user(world.officer), target="subject", subject="cust-1").json()["id"]
    release = f"{URL}/{hold_id}/release"
    assert_error(
        as_user(world.officer).post(release, {"reason": "done"}, format="json"), 403, "two_person_rule"
    )
    assert LegalHold.objects.get(pk=hold_id).is_active
    response = as_user(second_officer).post(release, {"reason": "case closed"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["released_by"] == "officer2" and not response.json()["is_active"]
    event = AuditEvent.objects.get(action="legal_hold.release")
    assert event.actor_label == "officer2"
    assert_error(as_user(world.officer).post(release, {"reason": "again"}, format="json"), 409)


def test_release_needs_a_reason(world, as_user, second_officer):
    hold_id = place(as_user(world.officer), target="subject", subject="cust-1").json()["id"]
    error = assert_error(as_user(second_officer).post(f"{URL}/{hold_id}/release", {}, format="json"), 400)
    assert "reason" in error["details"]["fields"]
    assert LegalHold.objects.get(pk=hold_id).is_active


def test_the_database_refuses_a_self_release(world, as_user):
    from django.db import IntegrityError, transaction
    from django.utils import timezone

    hold_id = place(as_user(world.officer), target="subject", subject="cust-1").json()["id"]
    with pytest.raises(IntegrityError), transaction.atomic():
        LegalHold.objects.filter(pk=hold_id).update(released_by=world.officer, released_at=timezone.now())


@pytest.mark.parametrize("who", ["owner", "admin", "auditor"])
def test_other_roles_cannot_place_or_release(world, as_user, who):
    hold_id = place(as_user(world.officer), target="subject", subject="cust-1").json()["id"]
    client = as_user(getattr(world, who))
    assert_error(place(client, target="subject", subject="cust-2"), 403)
    assert_error(client.post(f"{URL}/{hold_id}/release", {"reason": "x"}, format="json"), 403)
    assert LegalHold.objects.count() == 1 and LegalHold.objects.get().is_active


def test_readers_list_and_get_holds(world, as_user):
    hold_id = place(as_user(world.officer), target="subject", subject="cust-1").json()["id"]
    for who in ("officer", "auditor", "admin"):
        client = as_user(getattr(world, who))
        assert [h["id"] for h in client.get(URL).json()] == [hold_id]
        assert client.get(f"{URL}/{hold_id}").json()["id"] == hold_id
        assert client.get(URL, {"active": "false"}).json() == []
    assert_error(as_user(world.owner).get(URL), 403)
    assert_error(as_user(world.owner).get(f"{URL}/{hold_id}"), 403)


def test_anonymous_is_401(world):
    client = APIClient()
    assert_error(client.get(URL), 401)
    assert_error(client.post(URL, {}, format="json"), 401)
    assert_error(client.get(f"{URL}/x"), 401)
    assert_error(client.post(f"{URL}/x/release", {}, format="json"), 401)


def test_agent_keys_are_refused(world, as_agent):
    assert_error(as_agent(world.agent).get(URL), 403)


def test_a_foreign_tenants_hold_is_404(world, as_user):
    hold_id = place(as_user(world.officer), target="subject", subject="cust-1").json()["id"]
    foreign_officer = f.member(world.other_tenant, Role.SECURITY_OFFICER, username="globex-officer")
    client = as_user(foreign_officer)
    assert client.get(URL).json() == []
    assert_error(client.get(f"{URL}/{hold_id}"), 404, "legal_hold_not_found")
    assert_error(client.post(f"{URL}/{hold_id}/release", {"reason": "x"}, format="json"), 404)
    assert_error(client.get(f"{URL}/not-a-uuid"), 404)
    assert LegalHold.objects.get(pk=hold_id).is_active
