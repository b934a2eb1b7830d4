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
    ("body", "field", "code"),
    [
        ({"scope": "tenant", "reason": "r"}, "subject", "erasure_target_required"),
        ({**BODY, "subject": ""}, "subject", "erasure_target_required"),
        ({**BODY, "subject": "   "}, "subject", "erasure_target_required"),
        ({**BODY, "subject": "", "datasets": []}, "datasets", "erasure_target_required"),
        ({**BODY, "scope": "planet"}, "scope", "validation_error"),
        ({**BODY, "scope": "agent"}, "agent", "validation_error"),
        ({**BODY, "agent": "nope"}, "agent", "validation_error"),
        ({"subject": "cust-9", "scope": "tenant"}, "reason", "validation_error"),
        ({**BODY, "datasets": "leases"}, "datasets", "validation_error"),
        ({**BODY, "datasets": None}, "datasets", "validation_error"),
        ({**BODY, "datasets": [""]}, "datasets", "validation_error"),
        ({**BODY, "datasets": ["  "]}, "datasets", "validation_error"),
        ({**BODY, "datasets": [{"name": "x"}]}, "datasets", "validation_error"),
        ({**BODY, "datasets": ["x" * 101]}, "datasets", "validation_error"),
        ({**BODY, "datasets": ["a\u0000b"]}, "datasets", "validation_error"),
        ({**BODY, "datasets": [f"d{i}" for i in range(51)]}, "datasets", "validation_error"),
        # Unknown in the tenant: a typo must not certify an erasure of nothing.
        ({**BODY, "subject": "", "datasets": ["no-such-set"]}, "datasets", "validation_error"),
    ],
)
def test_bad_input_names_the_field_and_stores_nothing(world, as_user, body, field, code):
    error = assert_error(as_user(world.officer).post(URL, body, format="json"), 400, code)
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


# --- retrying a failed erasure --------------------------------------------------------


@pytest.fixture
def failed(world):
    """An erasure that failed (a deleter broke), with the subject's memory intact."""
    from governance.services import erasure as erasure_service
    from memory.enforcement import system_access
    from memory.models import MemoryItem
    from memory.tests.conftest import remember

    remember(system_access(world.agent), "Prefers the aisle seat", user_id="cust-9")

    def broken(target):
        raise RuntimeError("disk full")

    erasure_service.register_subject_deleter("zz-broken", broken)
    try:
        request = erasure_service.erasure_request_create(
            tenant=world.tenant, actor=world.officer, subject="cust-9", scope="tenant", reason="r"
        )
        with pytest.raises(RuntimeError):
            erasure_service.erasure_run(request_id=request.pk)
    finally:
        erasure_service._DELETERS.pop("zz-broken")
    request.refresh_from_db()
    assert request.status == "failed" and MemoryItem.objects.filter(user_id="cust-9").count() == 1
    return request


def test_a_failed_erasure_is_retried_once_audited_and_completes(world, as_user, failed):
    from governance.services.erasure import erasure_run
    from memory.models import MemoryItem

    client = as_user(world.officer)
    url = f"{URL}/{failed.pk}/retry"
    first = client.post(url)
    assert first.status_code == 202, first.content
    assert first.json()["status"] == "queued" and first.json()["progress"] == 0
    # Idempotent while it is on its way: no second job, no second message, no second event.
    again = client.post(url)
    assert again.status_code == 202 and again.json()["status"] == "queued"
    failed.refresh_from_db()
    assert (
        OutboxMessage.objects.filter(task_name="governance.run_erasure", args=[str(failed.pk)]).count() == 2
    )
    retried = AuditEvent.objects.filter(action="erasure.retried")
    assert retried.count() == 1 and "cust-9" not in str(retried.get().data)
    assert retried.get().data["job"] == str(failed.job_id)
    erasure_run(request_id=failed.pk)  # what the worker does with the message
    failed.refresh_from_db()
    assert failed.status == "completed" and failed.subject == ""
    assert MemoryItem.objects.filter(user_id="cust-9").count() == 0
    assert_error(client.post(url), 409, "erasure_completed")


def test_who_may_retry_an_erasure(world, as_user, failed):
    url = f"{URL}/{failed.pk}/retry"
    assert_error(APIClient().post(url), 401)
    for who in ("owner", "auditor"):  # a developer; a reader of erasures
        assert_error(as_user(getattr(world, who)).post(url), 403, "permission_denied")
    foreign_officer = f.member(world.other_tenant, Role.SECURITY_OFFICER, username="globex-officer")
    assert_error(as_user(foreign_officer).post(url), 404)
    assert_error(as_user(world.officer).post(f"{URL}/not-a-uuid/retry"), 404)
    failed.refresh_from_db()
    assert failed.status == "failed" and not AuditEvent.objects.filter(action="erasure.retried").exists()
    assert as_user(world.admin).post(url).status_code == 202  # a tenant admin may


def test_the_console_retries_a_failed_erasure(world, client, failed):
    page = f"/erasure/{failed.pk}/"
    client.force_login(world.auditor)
    assert b"Run the erasure again" not in client.get(page).content
    assert client.post(page + "retry/").status_code == 404  # reads, may not retry
    client.force_login(f.member(world.other_tenant, Role.SECURITY_OFFICER, username="globex-officer"))
    assert client.post(page + "retry/").status_code == 404
    client.force_login(world.officer)
    assert b"Run the erasure again" in client.get(page).content
    response = client.post(page + "retry/", HTTP_HX_REQUEST="true")
    assert response.status_code == 202 and b"queued" in response.content
    failed.refresh_from_db()
    assert failed.status == "queued" and AuditEvent.objects.filter(action="erasure.retried").count() == 1
