"""Erasure requests over the API: 202 and queued work, bad input, roles, tenants."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from conftest import assert_error
from core.models import OutboxMessage
from governance.models import AuditEvent, ErasureRequest, Role
from governance.services.audit import subject_hash
from governance.tests import factories as f

URL = "/v1/memory/erasure-requests"
BODY = {"subject": "cust-9", "scope": "tenant", "reason": "GDPR art. 17 request of 2026-11-02"}


@pytest.mark.parametrize("who", ["officer", "admin"])
def test_officers_and_tenant_admins_request_an_erasure(world, as_user, who):
    response = as_user(getattr(world, who)).post(URL, BODY, format="json")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "queued" and body["progress"] == 0 and body["total"] >= 1
    assert body["subject_hash"] == subject_hash("cust-9") and "subject" not in body
    assert OutboxMessage.objects.filter(task_name="governance.run_erasure", args=[body["id"]]).exists()
    event = AuditEvent.objects.get(action="erasure.requested")
    assert "cust-9" not in str(event.data)


def test_agent_scope_names_an_agent_of_the_tenant(world, as_user):
    client = as_user(world.officer)
    ok = client.post(URL, {**BODY, "scope": "agent", "agent": str(world.agent.pk)}, format="json")
    assert ok.status_code == 202 and ok.json()["agent"] == str(world.agent.pk)
    foreign = client.post(
        URL, {**BODY, "scope": "agent", "agent": str(world.foreign_agent.pk)}, format="json"
    )
    assert "agent" in assert_error(foreign, 400)["details"]["fields"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scope": "tenant", "reason": "r"}, "subject"),
        ({**BODY, "subject": ""}, "subject"),
        ({**BODY, "subject": "   "}, "subject"),
        ({**BODY, "scope": "planet"}, "scope"),
        ({**BODY, "scope": "agent"}, "agent"),
        ({**BODY, "agent": "nope"}, "agent"),
        ({"subject": "cust-9", "scope": "tenant"}, "reason"),
    ],
)
def test_bad_input_names_the_field_and_stores_nothing(world, as_user, body, field):
    error = assert_error(as_user(world.officer).post(URL, body, format="json"), 400, "validation_error")
    assert field in error["details"]["fields"]
    assert not ErasureRequest.objects.exists()
    assert not OutboxMessage.objects.filter(task_name="governance.run_erasure").exists()


@pytest.mark.parametrize("who", ["owner", "auditor"])
def test_other_roles_cannot_request(world, as_user, who):
    assert_error(as_user(getattr(world, who)).post(URL, BODY, format="json"), 403)
    assert not ErasureRequest.objects.exists()


def test_anonymous_and_agent_keys_are_refused(world, as_agent):
    assert_error(APIClient().post(URL, BODY, format="json"), 401)
    assert_error(APIClient().get(f"{URL}/x"), 401)
    assert_error(APIClient().get(f"{URL}/x/certificate"), 401)
    assert_error(as_agent(world.agent).post(URL, BODY, format="json"), 403)


def test_readers_see_progress_and_the_certificate_waits_for_completion(world, as_user):
    request_id = as_user(world.officer).post(URL, BODY, format="json").json()["id"]
    for who in ("officer", "admin", "auditor"):
        client = as_user(getattr(world, who))
        assert client.get(f"{URL}/{request_id}").json()["status"] == "queued"
        assert [r["id"] for r in client.get(URL).json()] == [request_id]
        assert_error(client.get(f"{URL}/{request_id}/certificate"), 409, "erasure_not_completed")
    assert_error(as_user(world.owner).get(f"{URL}/{request_id}"), 403)


def test_a_foreign_tenants_request_is_404(world, as_user):
    request_id = as_user(world.officer).post(URL, BODY, format="json").json()["id"]
    foreign = as_user(f.member(world.other_tenant, Role.SECURITY_OFFICER))
    assert foreign.get(URL).json() == []
    assert_error(foreign.get(f"{URL}/{request_id}"), 404, "erasure_request_not_found")
    assert_error(foreign.get(f"{URL}/{request_id}/certificate"), 404)
    assert_error(foreign.get(f"{URL}/not-a-uuid"), 404)
