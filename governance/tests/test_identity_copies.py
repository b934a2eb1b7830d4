"""A web process keeps copies of the identity rows every request needs (the key with
its agent, user and tenant; the agent's policy) and reads one generation number
instead (core.generations). Every governance change still takes effect on the very
next request, whoever made it and however."""

from __future__ import annotations

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from conftest import assert_error, bearer
from core import generations
from governance.models import ApiKey
from governance.services.agents import agent_update, api_key_create, api_key_revoke
from governance.services.policies import policy_version_create
from governance.tests import factories as f

GOVERNANCE = "governance"


def _tables_read(captured: CaptureQueriesContext) -> str:
    return " ".join(q["sql"] for q in captured.captured_queries)


def _memories(agent):
    return f"/v1/memory/agents/{agent.pk}/memories"


def test_a_warm_request_reads_the_generation_instead_of_the_key_and_the_policy(world):
    client = bearer(f.agent_key(world.agent))
    assert client.get(_memories(world.agent)).status_code == 200  # reads and copies
    with CaptureQueriesContext(connection) as captured:
        assert client.get(_memories(world.agent)).status_code == 200
    sql = _tables_read(captured)
    assert "core_generation" in sql
    assert "governance_apikey" not in sql and "governance_agentpolicyversion" not in sql


def test_a_revoked_key_is_refused_on_the_next_request(world):
    key, secret = api_key_create(tenant=world.tenant, agent=world.agent, name="k")
    client = bearer(secret)
    for _ in range(2):
        assert client.get("/v1/me").status_code == 200
    api_key_revoke(key=key, actor=world.owner)
    assert_error(client.get("/v1/me"), 401, "authentication_failed")


def test_a_change_written_in_raw_sql_takes_effect_too(world):
    """No service, signal or Python hook needed: the trigger sees every write (the
    admin, a shell, another process, a migration)."""
    key, secret = api_key_create(tenant=world.tenant, agent=world.agent, name="k")
    client = bearer(secret)
    assert client.get("/v1/me").status_code == 200
    with connection.cursor() as cursor:
        cursor.execute("UPDATE governance_apikey SET revoked_at = now() WHERE id = %s", [key.pk])
    assert_error(client.get("/v1/me"), 401, "authentication_failed")


def test_a_deactivated_agent_and_a_disabled_user_lose_their_keys_at_once(world, as_user):
    agent_client = bearer(f.agent_key(world.agent))
    user_client = as_user(world.owner)
    assert agent_client.get("/v1/me").status_code == 200
    assert user_client.get("/v1/me").status_code == 200
    agent_update(agent=world.agent, actor=world.admin, is_active=False)
    assert_error(agent_client.get("/v1/me"), 401, "authentication_failed")
    world.owner.is_active = False
    world.owner.save()
    assert_error(user_client.get("/v1/me"), 401, "authentication_failed")


def test_a_new_policy_holds_from_the_next_request(world):
    client = bearer(f.agent_key(world.agent))
    assert client.get(_memories(world.agent), {"scope": "agent"}).status_code == 200
    assert client.get(_memories(world.agent), {"scope": "agent"}).status_code == 200  # from the copy
    policy_version_create(agent=world.agent, policy={"read_scopes": ["user"]}, created_by=world.owner)
    assert_error(client.get(_memories(world.agent), {"scope": "agent"}), 403, "memory_policy_violation")


def test_a_key_last_use_keeps_the_copies_but_any_other_change_moves_the_generation(world):
    key, _ = api_key_create(tenant=world.tenant, agent=world.agent, name="k")
    before = generations.current(GOVERNANCE)
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=key.created_at)
    assert generations.current(GOVERNANCE) == before
    ApiKey.objects.filter(pk=key.pk).update(name="renamed")
    after = generations.current(GOVERNANCE)
    assert before is not None and after is not None and after > before


def test_the_generation_never_returns_to_a_value_of_a_rolled_back_change(world):
    """A copy made inside a transaction that rolled back carries a number no later
    state of the database can have."""
    start = generations.current(GOVERNANCE)
    with transaction.atomic():
        agent_update(agent=world.agent, actor=world.admin, description="first")
        rolled_back = generations.current(GOVERNANCE)
        transaction.set_rollback(True)
    assert generations.current(GOVERNANCE) == start
    agent_update(agent=world.agent, actor=world.admin, description="second")
    again = generations.current(GOVERNANCE)
    assert start is not None and rolled_back is not None and again is not None
    assert again > rolled_back > start


def test_a_copy_handed_to_one_request_is_not_the_next_requests():
    cache: generations.Cache[dict[str, list[int]]] = generations.Cache()
    cache.put("k", 7, {"seen": []})
    first = cache.get("k", 7)
    assert first is not None
    first["seen"].append(1)
    assert cache.get("k", 7) == {"seen": []}
    assert cache.get("k", 8) is None and cache.get("k", None) is None
