"""Candidate review queue in the console, and the candidate import route."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from guardian.shortcuts import assign_perm

from conftest import assert_error
from core.models import OutboxMessage
from governance.models import AuditEvent, Candidate, Job, Role
from governance.services.candidates import candidate_import
from governance.services.erasure import erasure_request_create, erasure_run
from governance.tests import factories as f
from memory.models import MemoryItem
from memory.text import content_hash
from providers.tests.engines import custom_engine, declare

HX = {"HTTP_HX_REQUEST": "true"}


def _import(world, content="Prefers morning calls", subject="jane", agent=None, **fields):
    fields.setdefault("record_kind", "fact")
    fields.setdefault("captured_at", timezone.now())
    return candidate_import(
        agent=agent or world.agent,
        provider=fields.pop("provider", "mem0-shared"),
        external_id=f"ext-{content_hash(content)[:8]}",
        content=content,
        subject=subject,
        content_hash=content_hash(content),
        **fields,
    )


def actions(world):
    return set(AuditEvent.objects.filter(chain=str(world.tenant.pk)).values_list("action", flat=True))


def test_queue_lists_visible_candidates_with_filters(client, world):
    _import(world, "A fact about jane")
    _import(world, "An episode about joe", subject="joe", record_kind="episode", provider="zep-1")
    _import(world, "Sibling's record", agent=world.sibling)
    client.force_login(world.owner)  # sees only the candidates of agents they may view
    full = client.get("/candidates/")
    assert full.status_code == 200 and b"<html" in full.content
    assert b"A fact about jane" in full.content and b"Sibling&#x27;s record" not in full.content
    fragment = client.get("/candidates/", {"kind": "episode"}, **HX)
    assert b"<html" not in fragment.content and b"An episode about joe" in fragment.content
    assert b"A fact about jane" not in fragment.content
    assert b"A fact about jane" in client.get("/candidates/", {"subject": "jane"}, **HX).content
    assert (
        b"joe" not in client.get("/candidates/", {"provider": "mem0-shared", "subject": "jane"}, **HX).content
    )
    assert b"No candidates match" in client.get("/candidates/", {"status": "promoted"}, **HX).content
    assert b"No candidates match" in client.get("/candidates/", {"status": "bogus"}, **HX).content
    client.force_login(world.outsider)
    assert b"A fact about jane" not in client.get("/candidates/").content


def test_queue_is_paginated(client, world):
    for n in range(30):
        _import(world, f"Record number {n}")
    client.force_login(world.admin)
    first = client.get("/candidates/", **HX).content
    assert first.count(b'<tr id="candidate-') == 25 and b"Page 1 of 2" in first
    assert client.get("/candidates/?page=2", **HX).content.count(b'<tr id="candidate-') == 5


def test_admin_approves_and_promotes_inline(client, world):
    candidate = _import(world)
    client.force_login(world.admin)
    page = client.get("/candidates/").content
    assert b"Approve" in page and b"Promote" not in page
    missing = client.post(f"/candidates/{candidate.pk}/review/", {"decision": "approve", "reason": ""}, **HX)
    assert missing.status_code == 400 and b"Give a reason" in missing.content
    approved = client.post(
        f"/candidates/{candidate.pk}/review/", {"decision": "approve", "reason": "ok"}, **HX
    )
    assert approved.status_code == 200 and approved.content.startswith(
        f'<tr id="candidate-{candidate.pk}"'.encode()
    )
    assert b"Promote" in approved.content
    promoted = client.post(f"/candidates/{candidate.pk}/promote/", **HX)
    assert promoted.status_code == 200 and b"Promoted to memory item" in promoted.content
    candidate.refresh_from_db()
    assert candidate.status == "promoted" and candidate.reviewed_as == "tenant_admin"
    item = MemoryItem.objects.get(pk=candidate.promoted_item_id)
    assert item.provenance["promoted_from"]["reviewer"] == str(world.admin.pk)
    assert {"candidate.review", "candidate.promote"} <= actions(world)
    again = client.post(f"/candidates/{candidate.pk}/promote/", **HX)
    assert again.status_code == 409 and b"already promoted" in again.content


def test_reject_with_reason_and_the_subject_reviews_their_own(client, world):
    jane = f.member(world.tenant, Role.DEVELOPER, username="jane")
    assign_perm("governance.viewer", jane, world.agent)
    mine = _import(world, subject=str(jane.pk))
    someone_elses = _import(world, "About joe", subject="joe")
    client.force_login(jane)
    page = client.get("/candidates/").content.decode()
    mine_row = page.split(f'id="candidate-{mine.pk}"')[1].split("</tr>")[0]
    other_row = page.split(f'id="candidate-{someone_elses.pk}"')[1].split("</tr>")[0]
    assert "Approve" in mine_row and "Approve" not in other_row
    rejected = client.post(
        f"/candidates/{mine.pk}/review/", {"decision": "reject", "reason": "not true"}, **HX
    )
    assert rejected.status_code == 200 and b"not true" in rejected.content
    mine.refresh_from_db()
    assert mine.status == "rejected" and mine.reviewed_as == "subject"
    refused = client.post(
        f"/candidates/{someone_elses.pk}/review/", {"decision": "approve", "reason": "x"}, **HX
    )
    assert refused.status_code == 403 and b"Only the person the record is about" in refused.content
    someone_elses.refresh_from_db()
    assert someone_elses.status == "pending"


def test_promotion_refused_for_unapproved_fenced_and_foreign(client, world):
    candidate = _import(world, captured_at=timezone.now() - timedelta(days=1))
    client.force_login(world.owner)  # editor of the agent: may promote, but only once approved
    refused = client.post(f"/candidates/{candidate.pk}/promote/", **HX)
    assert refused.status_code == 409 and b"approved review" in refused.content
    client.force_login(world.teammate)  # cannot view the agent at all
    assert client.post(f"/candidates/{candidate.pk}/promote/").status_code == 404
    client.force_login(world.outsider)
    assert (
        client.post(f"/candidates/{candidate.pk}/review/", {"decision": "approve", "reason": "x"}).status_code
        == 404
    )
    # An approved copy captured before an erasure of its subject stays fenced.
    client.force_login(world.admin)
    client.post(f"/candidates/{candidate.pk}/review/", {"decision": "approve", "reason": "ok"}, **HX)
    request = erasure_request_create(
        tenant=world.tenant, actor=world.officer, subject="jane", scope="tenant", reason="r"
    )
    erasure_run(request_id=request.pk)
    stale = Candidate.objects.create(
        tenant=world.tenant,
        agent=world.agent,
        provider="mem0-shared",
        external_id="stale",
        record_kind="fact",
        content="Prefers morning calls",
        content_hash=content_hash("Prefers morning calls"),
        subject="jane",
        captured_at=timezone.now() - timedelta(days=1),
        status="approved",
        reviewed_by=world.admin,
        reviewed_as="tenant_admin",
        reviewed_at=timezone.now(),
    )
    fenced = client.post(f"/candidates/{stale.pk}/promote/", **HX)
    assert fenced.status_code == 409 and b"erasure" in fenced.content
    assert not MemoryItem.objects.exists()


RECORDS = [
    {"id": "r1", "kind": "fact", "text": "Jane prefers morning calls"},
    {"id": "r2", "kind": "episode", "text": "Jane called about invoice 42"},
]
URL = "/v1/memory/candidates/imports"


@pytest.fixture
def crm(local_server):
    server = custom_engine(RECORDS, server=local_server())
    declare("crm-engine", server.url)
    return server


def test_import_route_queues_a_job(world, as_user, crm):
    from providers.imports import candidates_import_run

    client = as_user(world.owner)
    body = {"agent_id": str(world.agent.pk), "engine_id": "crm-engine", "subject": "jane", "limit": 10}
    response = client.post(URL, body, format="json")
    assert response.status_code == 202, response.content
    job = Job.objects.get(pk=response.json()["id"])
    assert job.kind == "candidates_import" and job.status == "queued"
    message = OutboxMessage.objects.get(task_name="providers.import_candidates", args__0=str(job.pk))
    assert message.args[1:] == [str(world.agent.pk), "crm-engine", "jane", 10]
    event = AuditEvent.objects.get(action="candidate.import")
    assert event.data["engine"] == "crm-engine" and "jane" not in str(event.data)
    candidates_import_run(
        job_id=job.pk, agent_id=world.agent.pk, engine_id="crm-engine", subject="jane", limit=10
    )
    progress = client.get(f"/v1/jobs/{job.pk}").json()
    assert progress["status"] == "succeeded" and progress["result"]["imported"] == 2
    assert Candidate.objects.filter(subject="jane").count() == 2


def test_import_route_bad_input_and_roles(world, as_user, as_agent, crm):
    from rest_framework.test import APIClient

    body = {"agent_id": str(world.agent.pk), "engine_id": "crm-engine", "subject": "jane"}
    error = assert_error(as_user(world.owner).post(URL, {**body, "engine_id": "nope"}, format="json"), 400)
    assert "engine_id" in error["details"]["fields"]
    error = assert_error(as_user(world.owner).post(URL, {"agent_id": "x", "limit": 0}, format="json"), 400)
    assert {"agent_id", "engine_id", "subject", "limit"} <= set(error["details"]["fields"])
    assert_error(APIClient().post(URL, body, format="json"), 401)
    assert_error(as_agent(world.agent).post(URL, body, format="json"), 403)
    assert_error(as_user(world.auditor).post(URL, body, format="json"), 403)  # viewer, not editor
    assert_error(as_user(world.teammate).post(URL, body, format="json"), 404)  # no grant on the agent
    assert_error(as_user(world.outsider).post(URL, body, format="json"), 404)  # foreign tenant
    assert not Job.objects.filter(kind="candidates_import").exists()
    assert not OutboxMessage.objects.filter(task_name="providers.import_candidates").exists()


def test_console_import_button(client, world, crm):
    client.force_login(world.owner)
    page = client.get("/candidates/").content
    assert b"Import records from an engine" in page and b"crm-engine" in page
    response = client.post(
        "/candidates/import/",
        {"agent": str(world.agent.pk), "engine": "crm-engine", "subject": "jane", "limit": "5"},
        **HX,
    )
    assert response.status_code == 202 and b"candidates_import" in response.content
    assert Job.objects.filter(kind="candidates_import").count() == 1
    bad = client.post(
        "/candidates/import/", {"agent": str(world.agent.pk), "engine": "nope", "subject": "jane"}, **HX
    )
    assert bad.status_code == 400 and b"Engine not found" in bad.content
    client.force_login(world.auditor)  # may view, may not import: no button, and refused
    assert b"Import records from an engine" not in client.get("/candidates/").content
    refused = client.post(
        "/candidates/import/", {"agent": str(world.agent.pk), "engine": "crm-engine", "subject": "jane"}, **HX
    )
    assert refused.status_code == 400 and Job.objects.filter(kind="candidates_import").count() == 1


def test_queue_query_count_does_not_grow_with_rows(client, world):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.force_login(world.admin)
    client.get("/candidates/", **HX)  # session and roles warm

    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get("/candidates/", **HX).status_code == 200
        return len(ctx)

    for n in range(3):
        _import(world, f"First batch {n}")
    few = queries()
    for n in range(20):
        _import(world, f"Second batch {n}", agent=world.sibling if n % 2 else None)
    assert queries() == few
