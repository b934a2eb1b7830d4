"""Console pages for compliance and policy: legal holds, erasure requests, retention,
the policy editor. Roles allowed and refused, foreign tenants, HTMX fragments,
and every action lands in the audit trail."""

from __future__ import annotations

import json

import pytest

from governance.models import AgentPolicyVersion, AuditEvent, ErasureRequest, LegalHold, Role
from governance.services.audit import subject_hash
from governance.services.erasure import erasure_request_create, erasure_run
from governance.services.holds import legal_hold_place
from governance.services.policies import policy_version_create
from governance.tests import factories as f
from governance.tests.test_console import nav_labels

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def officer2(world):
    return f.member(world.tenant, Role.SECURITY_OFFICER, username="officer2")


def actions(world) -> list[str]:
    return list(AuditEvent.objects.filter(chain=str(world.tenant.pk)).values_list("action", flat=True))


# --- navigation ---------------------------------------------------------------------


def test_navigation_offers_compliance_pages_by_role(client, world):
    client.force_login(world.officer)
    nav = client.get("/").content
    assert b'href="/holds/"' in nav and b'href="/policies/"' not in nav and b'href="/candidates/"' in nav
    client.force_login(world.owner)
    nav = client.get("/").content
    assert b'href="/holds/"' not in nav and b'href="/policies/"' in nav
    assert "Holds & erasure" not in nav_labels(nav)


# --- legal holds --------------------------------------------------------------------


def test_holds_page_roles(client, world):
    for user in (world.officer, world.auditor, world.admin):
        client.force_login(user)
        assert client.get("/holds/").status_code == 200
    client.force_login(world.owner)  # a developer is not offered the page
    assert client.get("/holds/").status_code == 404
    client.force_login(world.auditor)
    page = client.get("/holds/").content
    assert b"Place a legal hold" not in page
    response = client.post("/holds/", {"target": "subject", "subject": "jane", "reason": "x"})
    assert response.status_code == 403 and not LegalHold.objects.exists()


def test_place_and_release_a_hold_with_two_officers(client, world, officer2):
    client.force_login(world.officer)
    full = client.get("/holds/")
    assert b"<html" in full.content and b"Place a legal hold" in full.content
    placed = client.post("/holds/", {"target": "subject", "subject": "jane", "reason": "litigation 7"}, **HX)
    assert placed.status_code == 200 and b"<html" not in placed.content
    hold = LegalHold.objects.get()
    assert hold.subject == subject_hash("jane") and hold.placed_by == world.officer
    assert f'id="hold-{hold.pk}"'.encode() in placed.content
    # The placer cannot release: the refusal is shown, the hold stays.
    refused = client.post(f"/holds/{hold.pk}/release/", {"reason": "done"}, **HX)
    assert refused.status_code == 403 and b"second security officer" in refused.content
    hold.refresh_from_db()
    assert hold.released_at is None
    # A second officer releases.
    client.force_login(officer2)
    missing_reason = client.post(f"/holds/{hold.pk}/release/", {"reason": ""}, **HX)
    assert missing_reason.status_code == 400
    released = client.post(f"/holds/{hold.pk}/release/", {"reason": "case closed"}, **HX)
    assert released.status_code == 200 and b"Legal hold released." in released.content
    hold.refresh_from_db()
    assert hold.released_by == officer2
    assert {"legal_hold.place", "legal_hold.release"} <= set(actions(world))
    # Released holds are listed under their filter.
    assert b"case closed" in client.get("/holds/?state=released", **HX).content


def test_place_hold_bad_input_keeps_nothing(client, world):
    client.force_login(world.officer)
    response = client.post("/holds/", {"target": "subject", "subject": "", "reason": "x"}, **HX)
    assert response.status_code == 400 and b"required for a subject hold" in response.content
    response = client.post(
        "/holds/", {"target": "agent", "agent": str(world.foreign_agent.pk), "reason": "x"}, **HX
    )
    assert response.status_code == 400 and b"No such agent" in response.content
    assert not LegalHold.objects.exists()


def test_foreign_hold_is_404(client, world):
    other_officer = f.member(world.other_tenant, Role.SECURITY_OFFICER, username="globex-officer")
    hold = legal_hold_place(
        tenant=world.other_tenant, actor=other_officer, target="subject", subject="x", reason="r"
    )
    client.force_login(world.officer)
    assert client.post(f"/holds/{hold.pk}/release/", {"reason": "x"}).status_code == 404
    assert b"globex" not in client.get("/holds/").content
    hold.refresh_from_db()
    assert hold.released_at is None


def test_hold_list_is_paginated(client, world):
    for n in range(30):
        legal_hold_place(
            tenant=world.tenant, actor=world.officer, target="subject", subject=f"s{n}", reason="r"
        )
    client.force_login(world.auditor)
    first = client.get("/holds/", **HX).content
    assert first.count(b'<tr id="hold-') == 25 and b"Page 1 of 2" in first
    second = client.get("/holds/?state=active&page=2", **HX).content
    assert second.count(b'<tr id="hold-') == 5


# --- erasure ------------------------------------------------------------------------


def test_erasure_create_list_detail_and_certificate(client, world):
    client.force_login(world.admin)
    response = client.post("/erasure/", {"subject": "jane", "scope": "tenant", "reason": "art. 17"}, **HX)
    assert response.status_code == 200 and b"Erasure requested" in response.content
    request = ErasureRequest.objects.get()
    assert request.requested_by == world.admin and "erasure.requested" in actions(world)
    detail = client.get(f"/erasure/{request.pk}/", **HX)
    # Still queued: the fragment polls itself.
    assert b'hx-trigger="every 1s"' in detail.content and b"queued" in detail.content
    assert client.get(f"/erasure/{request.pk}/certificate.json").status_code == 409
    erasure_run(request_id=request.pk)
    done = client.get(f"/erasure/{request.pk}/", **HX)
    assert b"every 1s" not in done.content and b"Certificate" in done.content
    download = client.get(f"/erasure/{request.pk}/certificate.json")
    assert download["Content-Type"] == "application/json"
    assert "attachment" in download["Content-Disposition"]
    certificate = json.loads(download.content)
    assert certificate["request"] == str(request.pk) and "deleted" in certificate
    full = client.get(f"/erasure/{request.pk}/")
    assert b"<html" in full.content and request.subject_hash.encode() in full.content


def test_erasure_roles(client, world):
    client.force_login(world.auditor)  # reads, may not request
    assert client.get("/erasure/").status_code == 200
    assert b"Request an erasure" not in client.get("/erasure/").content
    response = client.post("/erasure/", {"subject": "jane", "scope": "tenant", "reason": "x"})
    assert response.status_code == 403
    client.force_login(world.owner)
    assert client.get("/erasure/").status_code == 404
    client.force_login(world.officer)
    bad = client.post("/erasure/", {"subject": "jane", "scope": "agent", "reason": "x"}, **HX)
    assert bad.status_code == 400 and b"required when scope is" in bad.content
    assert not ErasureRequest.objects.exists()


def test_foreign_erasure_request_is_404(client, world):
    other_officer = f.member(world.other_tenant, Role.SECURITY_OFFICER, username="globex-officer")
    foreign = erasure_request_create(
        tenant=world.other_tenant, actor=other_officer, subject="x", scope="tenant", reason="r"
    )
    client.force_login(world.officer)
    assert client.get(f"/erasure/{foreign.pk}/").status_code == 404
    assert client.get(f"/erasure/{foreign.pk}/certificate.json").status_code == 404


# --- retention ----------------------------------------------------------------------


def test_retention_page_sets_days_as_a_new_policy_version(client, world):
    policy_version_create(
        agent=world.agent, policy={"recall_top_k": 5, "infer": True}, created_by=world.owner
    )
    client.force_login(world.officer)
    page = client.get("/retention/")
    assert page.status_code == 200 and b"support-bot" in page.content
    response = client.post(f"/retention/{world.agent.pk}/", {"retention_days": "90", "idle_days": "30"}, **HX)
    assert response.status_code == 200 and b"Saved as a new policy version" in response.content
    latest = AgentPolicyVersion.objects.filter(agent=world.agent).order_by("-version").first()
    assert latest.version == 2 and latest.created_by == world.officer
    # Only retention changed; the rest of the policy is kept.
    assert latest.policy["retention_days"] == 90 and latest.policy["idle_days"] == 30
    assert latest.policy["recall_top_k"] == 5 and latest.policy["infer"] is True
    event = AuditEvent.objects.filter(action="memory.policy.change").order_by("-seq").first()
    assert event.data["changed"] == ["idle_days", "retention_days"]
    # Clearing the fields means "keep forever" / "no idle retention".
    client.post(f"/retention/{world.agent.pk}/", {"retention_days": "", "idle_days": ""}, **HX)
    latest = AgentPolicyVersion.objects.filter(agent=world.agent).order_by("-version").first()
    assert latest.policy["retention_days"] is None and latest.policy["idle_days"] is None


def test_retention_roles_and_bad_input(client, world):
    client.force_login(world.auditor)
    page = client.get("/retention/").content
    assert b"<button" not in page.split(b'id="retention-list"')[1]
    assert client.post(f"/retention/{world.agent.pk}/", {"retention_days": "9"}).status_code == 403
    client.force_login(world.owner)
    assert client.get("/retention/").status_code == 404
    client.force_login(world.officer)
    bad = client.post(f"/retention/{world.agent.pk}/", {"retention_days": "0"}, **HX)
    assert bad.status_code == 400 and b'role="alert"' in bad.content
    assert client.post(f"/retention/{world.foreign_agent.pk}/", {"retention_days": "9"}).status_code == 404
    assert not AgentPolicyVersion.objects.exists()


# --- policy editor ------------------------------------------------------------------


def _policy_post(**overrides):
    data = {
        "engine": "builtin",
        "modes": ["session", "long_term", "agent"],
        "write_scopes": ["session", "user", "agent"],
        "read_scopes": ["session", "user", "agent"],
        "default_scope": "user",
        "allowed_kinds": ["episodic", "semantic", "procedural", "preference", "fact"],
        "max_classification": "confidential",
        "allow_personal_data": "on",
        "required_isolation": "logical",
        "recall_top_k": "8",
        "note": "",
    }
    data.update(overrides)
    return data


def test_policy_editor_saves_diffs_and_restores(client, world):
    client.force_login(world.owner)
    listing = client.get("/policies/")
    assert b"support-bot" in listing.content and b"ops-agent" not in listing.content
    page = client.get(f"/policies/{world.agent.pk}/")
    assert page.status_code == 200 and b"Save new version" in page.content
    first = client.post(f"/policies/{world.agent.pk}/", _policy_post(recall_top_k="12", note="wider"), **HX)
    assert first.status_code == 200 and b"Saved as version 1" in first.content
    second = client.post(
        f"/policies/{world.agent.pk}/",
        _policy_post(recall_top_k="4", retention_days="30", teams="ops, billing"),
        **HX,
    )
    assert b"Saved as version 2" in second.content
    v2 = AgentPolicyVersion.objects.get(agent=world.agent, version=2)
    assert v2.policy["teams"] == ["ops", "billing"] and v2.policy["retention_days"] == 30
    diff = client.get(f"/policies/{world.agent.pk}/diff/?from=1&to=2", **HX)
    assert diff.status_code == 200
    body = diff.content.decode()
    assert (
        "recall_top_k" in body
        and "retention_days" in body
        and "teams" in body
        and "max_classification" not in body
    )
    assert client.get(f"/policies/{world.agent.pk}/diff/?from=1&to=9", **HX).status_code == 400
    restored = client.post(f"/policies/{world.agent.pk}/restore/1/", **HX)
    assert restored.status_code == 200 and b"Version 1 restored as version 3" in restored.content
    v3 = AgentPolicyVersion.objects.get(agent=world.agent, version=3)
    assert v3.policy == AgentPolicyVersion.objects.get(agent=world.agent, version=1).policy
    assert client.post(f"/policies/{world.agent.pk}/restore/42/").status_code == 404
    assert {"memory.policy.change", "memory.policy.restore", "memory.share"} <= set(actions(world))


def test_policy_editor_bad_input_names_the_field(client, world):
    client.force_login(world.owner)
    response = client.post(f"/policies/{world.agent.pk}/", _policy_post(engine="mem0"), **HX)
    assert response.status_code == 400 and b"required when engine is" in response.content
    response = client.post(f"/policies/{world.agent.pk}/", _policy_post(recall_top_k="1000"), **HX)
    assert response.status_code == 400
    assert not AgentPolicyVersion.objects.exists()


def test_policy_editor_roles(client, world):
    client.force_login(world.teammate)  # developer without a grant on the agent
    assert client.get(f"/policies/{world.agent.pk}/").status_code == 404
    client.force_login(world.admin)  # tenant admin edits every agent of the tenant
    assert b"Save new version" in client.get(f"/policies/{world.sibling.pk}/").content
    assert client.get(f"/policies/{world.foreign_agent.pk}/").status_code == 404
    client.force_login(world.auditor)  # not offered the page at all
    assert client.get("/policies/").status_code == 404
    assert client.post(f"/policies/{world.agent.pk}/", _policy_post()).status_code == 404
    # A viewer-only developer sees the policy read only and cannot change it.
    from guardian.shortcuts import assign_perm

    assign_perm("governance.viewer", world.teammate, world.agent)
    client.force_login(world.teammate)
    page = client.get(f"/policies/{world.agent.pk}/")
    assert (
        page.status_code == 200 and b"read only" in page.content and b"Save new version" not in page.content
    )
    assert client.post(f"/policies/{world.agent.pk}/", _policy_post()).status_code == 403
    assert client.post(f"/policies/{world.agent.pk}/restore/1/").status_code == 403
    assert not AgentPolicyVersion.objects.exists()


def test_hold_and_erasure_lists_query_count_does_not_grow_with_rows(client, world):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.force_login(world.officer)

    def queries(url: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(url, **HX).status_code == 200
        return len(ctx)

    def add(n: int) -> None:
        for i in range(n):
            legal_hold_place(
                tenant=world.tenant, actor=world.officer, target="agent", agent=world.agent, reason="r"
            )
            erasure_request_create(
                tenant=world.tenant, actor=world.officer, subject=f"s{i}", scope="tenant", reason="r"
            )

    add(2)
    holds, erasures = queries("/holds/?state=all"), queries("/erasure/")
    add(10)
    assert queries("/holds/?state=all") == holds and queries("/erasure/") == erasures
