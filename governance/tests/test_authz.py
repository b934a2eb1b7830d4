"""The capability table and the restrict() gates: every surface asks the same table."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from conftest import assert_error
from governance import authz
from governance.authz import ROLES, Capability
from governance.models import (
    Agent,
    AgentPolicyVersion,
    ApiKey,
    Candidate,
    ErasureRequest,
    Job,
    LegalHold,
    Role,
)
from governance.services.erasure import erasure_request_create
from governance.services.holds import legal_hold_place
from governance.services.jobs import self_check_start
from governance.tests import factories as f


def test_every_capability_has_a_row_of_real_roles():
    assert set(ROLES) == set(Capability)
    for roles in ROLES.values():
        assert roles and roles <= set(Role)


def test_an_agent_key_holds_no_capability(world):
    from governance.principals import AgentPrincipal

    key = ApiKey.objects.filter(agent=world.agent).first() or ApiKey(agent=world.agent, tenant=world.tenant)
    principal = AgentPrincipal(world.agent, key)
    assert authz.capabilities_in(principal, world.tenant) == set()
    assert not LegalHold.objects.restrict(principal).exists()


# --- personal keys are bound to the tenant they were created in (issue 15, finding 8) ---


@pytest.fixture
def dual(world):
    """An auditor of acme who is also tenant_admin of globex."""
    user = f.member(world.tenant, Role.AUDITOR, username="dual")
    f.MembershipFactory(user=user, tenant=world.other_tenant, role=Role.TENANT_ADMIN)
    return user


def test_a_personal_key_acts_only_in_its_own_tenant(world, dual, as_user):
    client = as_user(dual, world.tenant)  # the key was made in acme, where dual audits
    url = f"/v1/agents/{world.foreign_agent.pk}"
    assert_error(client.patch(url, {"description": "taken over"}, format="json"), 404, "agent_not_found")
    assert_error(client.get(url), 404, "agent_not_found")
    world.foreign_agent.refresh_from_db()
    assert world.foreign_agent.description != "taken over"
    listed = {a["id"] for a in client.get("/v1/agents").json()}
    assert str(world.foreign_agent.pk) not in listed and str(world.agent.pk) in listed


def test_the_same_user_with_a_key_of_the_other_tenant_acts_there(world, dual, as_user):
    client = as_user(dual, world.other_tenant)
    url = f"/v1/agents/{world.foreign_agent.pk}"
    assert client.patch(url, {"description": "managed"}, format="json").status_code == 200
    assert_error(client.get(f"/v1/agents/{world.agent.pk}"), 404, "agent_not_found")


def test_console_sessions_keep_switching_tenants(world, dual):
    client = Client()
    client.force_login(dual)
    client.post("/tenant/switch/", {"tenant_id": str(world.other_tenant.pk)})
    page = client.get(f"/agents/{world.foreign_agent.pk}/")
    assert page.status_code == 200


# --- jobs are readable by their creator and by the capability of their kind (finding 14) ---


def test_a_colleague_cannot_read_my_job(world, as_user):
    job = Job.objects.create(tenant=world.tenant, kind="report", created_by=world.owner)
    assert as_user(world.owner).get(f"/v1/jobs/{job.pk}").status_code == 200
    for user in (world.teammate, world.auditor, world.officer, world.admin):
        assert_error(as_user(user).get(f"/v1/jobs/{job.pk}"), 404, "job_not_found")


def test_a_self_check_job_is_readable_by_admins_not_by_every_member(world, as_user):
    job = self_check_start(tenant=world.tenant, requested_by=world.admin)
    assert as_user(world.admin).get(f"/v1/jobs/{job.pk}").status_code == 200
    for user in (world.owner, world.teammate, world.auditor, world.officer):
        assert_error(as_user(user).get(f"/v1/jobs/{job.pk}"), 404, "job_not_found")


def test_an_erasure_job_is_readable_by_erasure_readers(world, as_user):
    request = erasure_request_create(
        tenant=world.tenant, actor=world.officer, subject="jane", scope="tenant", reason="gdpr"
    )
    for user in (world.officer, world.auditor, world.admin):
        assert as_user(user).get(f"/v1/jobs/{request.job_id}").status_code == 200
    for user in (world.owner, world.teammate, world.outsider):
        assert_error(as_user(user).get(f"/v1/jobs/{request.job_id}"), 404, "job_not_found")


def test_a_job_about_an_agent_follows_the_agent(world, as_user):
    job = Job.objects.create(tenant=world.tenant, kind="knowledge_graph", agent=world.agent)
    assert as_user(world.owner).get(f"/v1/jobs/{job.pk}").status_code == 200
    assert as_user(world.auditor).get(f"/v1/jobs/{job.pk}").status_code == 200  # reads every agent
    assert_error(as_user(world.teammate).get(f"/v1/jobs/{job.pk}"), 404, "job_not_found")


def test_an_agent_key_follows_its_own_ingests_and_graph_builds_only(world, as_agent):
    agent = as_agent(world.agent)
    for kind in ("knowledge_ingest", "knowledge_graph"):
        own = Job.objects.create(tenant=world.tenant, kind=kind, agent=world.agent)
        assert agent.get(f"/v1/jobs/{own.pk}").status_code == 200, kind
        sibling = Job.objects.create(tenant=world.tenant, kind=kind, agent=world.sibling)
        assert_error(agent.get(f"/v1/jobs/{sibling.pk}"), 404, "job_not_found")
        foreign = Job.objects.create(tenant=world.other_tenant, kind=kind, agent=world.foreign_agent)
        assert_error(agent.get(f"/v1/jobs/{foreign.pk}"), 404, "job_not_found")
        assert_error(as_agent(world.foreign_agent).get(f"/v1/jobs/{own.pk}"), 404, "job_not_found")
    # Work a person runs about the agent, and tenant-wide work, stay the people's.
    for kind, about in (("candidates_import", world.agent), ("erasure", None), ("self_check", None)):
        job = Job.objects.create(tenant=world.tenant, kind=kind, agent=about)
        assert_error(agent.get(f"/v1/jobs/{job.pk}"), 404, "job_not_found")
    assert_error(APIClient().get(f"/v1/jobs/{own.pk}"), 401)


def test_the_dashboard_lists_only_jobs_the_user_may_follow(world):
    mine = Job.objects.create(tenant=world.tenant, kind="report", created_by=world.owner)
    theirs = Job.objects.create(tenant=world.tenant, kind="report", created_by=world.teammate)
    client = Client()
    client.force_login(world.owner)
    page = client.get("/").content.decode()
    assert f"job-{mine.pk}" in page and f"job-{theirs.pk}" not in page


# --- the platform admin is not compliance staff: console and API agree ---


@pytest.fixture
def padmin(world):
    return f.member(world.tenant, Role.PLATFORM_ADMIN, username="padmin")


def test_platform_admin_reads_no_holds_or_erasures_anywhere(world, padmin, as_user):
    legal_hold_place(tenant=world.tenant, actor=world.officer, target="subject", subject="jane", reason="x")
    api = as_user(padmin)
    for url in ("/v1/memory/legal-holds", "/v1/memory/erasure-requests"):
        assert_error(api.get(url), 403)
    console = Client()
    console.force_login(padmin)
    for url in ("/holds/", "/erasure/"):
        assert console.get(url).status_code == 404
    assert console.get("/retention/").status_code == 200  # retention is a policy field admins edit
    nav = console.get("/retention/").content.decode()
    assert 'href="/holds/"' not in nav and 'href="/retention/"' in nav


# --- restrict(): one gate per tenant-owned model ---


def test_restrict_confines_each_model_to_its_capability(world, as_user):
    hold = legal_hold_place(
        tenant=world.tenant, actor=world.officer, target="agent", agent=world.agent, reason="x"
    )
    erasure = erasure_request_create(
        tenant=world.tenant, actor=world.admin, subject="jane", scope="tenant", reason="x"
    )
    assert list(LegalHold.objects.restrict(world.auditor)) == [hold]
    assert not LegalHold.objects.restrict(world.owner).exists()
    assert not LegalHold.objects.restrict(world.outsider).exists()
    assert not LegalHold.objects.restrict(world.auditor, "change").exists()
    assert list(LegalHold.objects.restrict(world.officer, "change")) == [hold]
    assert list(ErasureRequest.objects.restrict(world.auditor)) == [erasure]
    assert not ErasureRequest.objects.restrict(world.auditor, "change").exists()
    assert not ErasureRequest.objects.restrict(world.owner).exists()
    # Rows of one agent follow the agent's object permissions.
    AgentPolicyVersion.objects.create(agent=world.agent, version=1, policy={})
    assert AgentPolicyVersion.objects.restrict(world.owner).count() == 1
    assert not AgentPolicyVersion.objects.restrict(world.teammate).exists()
    assert not Candidate.objects.restrict(world.outsider).exists()
    f.agent_key(world.agent)
    assert ApiKey.objects.restrict(world.owner, "change").filter(agent=world.agent).exists()
    assert not ApiKey.objects.restrict(world.teammate, "change").filter(agent=world.agent).exists()
    assert set(Agent.objects.restrict(world.auditor, "view")) == {world.agent, world.sibling}
