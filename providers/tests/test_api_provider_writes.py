"""GET /v1/provider-writes[/{id}]: where a write an engine queued stands, for the caller
who may read it (its agent's viewers, the agent's own key, admins and compliance staff of
the tenant); anything else is the same 404 as an unknown id."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from conftest import assert_error
from governance.models import Role
from governance.tests import factories as f
from providers.adapters.base import NewRecord
from providers.models import AccessControl, ProviderWrite
from providers.services import adapter_for, operation_context
from providers.settlement import write_reconcile, write_track
from providers.tests.engines import declare
from providers.tests.fakes import mem0 as mem0_fake

URL = "/v1/provider-writes"


def _write(tenant, agent, engine, **fields) -> ProviderWrite:
    fields.setdefault("handle", {"event_id": uuid.uuid4().hex})
    fields.setdefault("operation", "remember")
    return ProviderWrite.objects.create(id=uuid.uuid4(), tenant=tenant, agent=agent, engine=engine, **fields)


@pytest.fixture
def writes(world):
    engine = declare("mem0-shared", "http://127.0.0.1:9", provider="mem0")
    return {
        "own": _write(world.tenant, world.agent, engine),
        "sibling": _write(world.tenant, world.sibling, engine, status=ProviderWrite.Status.FAILED),
        "tenant": _write(world.tenant, None, engine, operation="forget"),  # an erasure's forget
        "foreign": _write(world.other_tenant, world.foreign_agent, engine),
    }


def test_anonymous_callers_are_refused(writes, client):
    assert_error(client.get(URL), 401)
    assert_error(client.get(f"{URL}/{writes['own'].pk}"), 401)


def test_the_owner_reads_the_writes_of_the_agents_it_may_view(world, writes, as_user):
    owner = as_user(world.owner)
    body = owner.get(f"{URL}/{writes['own'].pk}").json()
    assert body["id"] == str(writes["own"].pk) and body["status"] == "queued"
    assert body["agent_id"] == str(world.agent.pk) and body["engine_id"] == "mem0-shared"
    # Ids and statuses only: never the provider's handle or the scope it was written in.
    assert "handle" not in body and "scope" not in body
    listed = owner.get(URL).json()["results"]
    assert [w["id"] for w in listed] == [str(writes["own"].pk)]
    # The sibling's write and the tenant-wide one answer like an unknown id.
    for name in ("sibling", "tenant"):
        assert_error(owner.get(f"{URL}/{writes[name].pk}"), 404, "provider_write_not_found")


def test_a_teammate_without_a_grant_sees_no_write(world, writes, as_user):
    teammate = as_user(world.teammate)
    assert teammate.get(URL).json()["results"] == []
    for name in ("own", "sibling", "tenant"):
        assert_error(teammate.get(f"{URL}/{writes[name].pk}"), 404, "provider_write_not_found")


def test_an_agent_key_reads_only_its_own_writes(world, writes, as_agent):
    agent = as_agent(world.agent)
    assert agent.get(f"{URL}/{writes['own'].pk}").status_code == 200
    assert [w["id"] for w in agent.get(URL).json()["results"]] == [str(writes["own"].pk)]
    for name in ("sibling", "tenant", "foreign"):
        assert_error(agent.get(f"{URL}/{writes[name].pk}"), 404, "provider_write_not_found")


@pytest.mark.parametrize("role", ["admin", "officer", "auditor"])
def test_admins_and_compliance_staff_read_every_write_of_the_tenant(world, writes, as_user, role):
    caller = as_user(getattr(world, role))
    listed = {w["id"] for w in caller.get(URL).json()["results"]}
    assert listed == {str(writes[name].pk) for name in ("own", "sibling", "tenant")}
    failed = caller.get(URL, {"status": "failed"}).json()["results"]
    assert [w["id"] for w in failed] == [str(writes["sibling"].pk)]
    assert caller.get(f"{URL}/{writes['tenant'].pk}").json()["operation"] == "forget"


def test_another_tenants_write_and_unknown_ids_are_404(world, writes, as_user):
    for user in (world.admin, world.owner, world.auditor):
        caller = as_user(user)
        for write_id in (writes["foreign"].pk, uuid.uuid4(), "not-a-uuid"):
            assert_error(caller.get(f"{URL}/{write_id}"), 404, "provider_write_not_found")
        assert str(writes["foreign"].pk) not in caller.get(URL).content.decode()
    # A platform admin of acme holds no right in globex either.
    padmin = f.member(world.tenant, Role.PLATFORM_ADMIN, username="padmin")
    assert_error(as_user(padmin).get(f"{URL}/{writes['foreign'].pk}"), 404, "provider_write_not_found")


def test_bad_filters_are_400(world, writes, as_user):
    admin = as_user(world.admin)
    assert "status" in assert_error(admin.get(URL, {"status": "done"}), 400)["details"]["fields"]
    assert "limit" in assert_error(admin.get(URL, {"limit": "many"}), 400)["details"]["fields"]
    assert admin.get(URL, {"engine_id": "no-such-engine"}).json()["results"] == []


def test_list_query_count_is_pinned(world, writes, as_user, django_assert_num_queries):
    admin = as_user(world.admin)
    admin.get(URL)  # warm the key's caches
    for _ in range(5):
        _write(world.tenant, world.agent, writes["own"].engine)
    # The key (with its user and tenant), then one statement for the page: the gate is subqueries.
    with django_assert_num_queries(2):
        assert len(admin.get(URL).json()["results"]) == 8


def test_a_routed_write_is_followed_until_the_provider_settles_it(world, as_agent, monkeypatch):
    """The write_id a queued Mem0 add answers with reads queued, then settled once
    Mem0's workers ran and the reconcile step asked Mem0 again."""
    monkeypatch.setenv("FEDMEM_CRED_TEST_MEM0", mem0_fake.API_KEY)
    fake = mem0_fake.Mem0Platform().start()
    try:
        engine = declare(
            "mem0-main",
            fake.url,
            provider="mem0",
            access_control=AccessControl.PLATFORM_KEY,
            credential_ref="env://FEDMEM_CRED_TEST_MEM0",
        )
        ctx = operation_context(tenant=world.tenant, operation="remember", agent=world.agent, user_id="alice")
        result = adapter_for(engine, world.tenant).perform(
            "remember", ctx, record=NewRecord("Alice prefers green tea")
        )
        write = write_track(
            engine=engine,
            tenant=world.tenant,
            agent=world.agent,
            ctx=ctx,
            operation="remember",
            result=result,
            enqueue=False,
        )
        assert write is not None
        agent = as_agent(world.agent)
        assert agent.get(f"{URL}/{write.pk}").json()["status"] == "queued"
        fake.process()
        ProviderWrite.objects.filter(pk=write.pk).update(next_check_at=timezone.now())
        write_reconcile(write_id=str(write.pk))
        body = agent.get(f"{URL}/{write.pk}").json()
        assert body["status"] == "settled" and body["settled_at"]
        assert body["external_ids"] and body["external_ids"][0] in fake.memories
    finally:
        fake.stop()
