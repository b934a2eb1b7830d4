"""Authentication and the uniform error body: 401 / 403 / 404 as documented."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from rest_framework.test import APIClient

from conftest import assert_error, bearer
from governance.models import ApiKey
from governance.services.agents import api_key_create, api_key_revoke


def test_anonymous_gets_401_with_bearer_challenge(world):
    response = APIClient().get("/v1/agents")
    assert_error(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_unknown_key_is_401(world):
    assert_error(bearer("fm_000000000000_" + "x" * 40).get("/v1/me"), 401, "authentication_failed")


def test_malformed_keys_are_401(world):
    for raw in ["nonsense", "fm_short_x", "fm_000000000000_tooshort", "a b"]:
        assert_error(bearer(raw).get("/v1/me"), 401, "authentication_failed")


def test_right_prefix_wrong_secret_is_401(world, as_agent):
    _, secret = api_key_create(tenant=world.tenant, agent=world.agent, name="k")
    forged = secret[:-4] + ("AAAA" if not secret.endswith("AAAA") else "BBBB")
    assert_error(bearer(forged).get("/v1/me"), 401, "authentication_failed")


def test_revoked_key_is_401(world):
    key, secret = api_key_create(tenant=world.tenant, agent=world.agent, name="k")
    assert bearer(secret).get("/v1/me").status_code == 200
    api_key_revoke(key=key, actor=None)
    error = assert_error(bearer(secret).get("/v1/me"), 401, "authentication_failed")
    assert "revoked" in error["message"]


def test_disabled_agent_key_is_401(world):
    _, secret = api_key_create(tenant=world.tenant, agent=world.agent, name="k")
    world.agent.is_active = False
    world.agent.save()
    assert_error(bearer(secret).get("/v1/me"), 401, "authentication_failed")


def test_wrong_role_is_403(world, as_user):
    response = as_user(world.auditor).post("/v1/agents", {"name": "x"}, format="json")
    assert_error(response, 403, "permission_denied")


def test_foreign_tenant_object_is_404(world, as_user):
    response = as_user(world.owner).get(f"/v1/agents/{world.foreign_agent.pk}")
    assert_error(response, 404, "agent_not_found")


def test_unknown_and_malformed_ids_are_the_same_404(world, as_user):
    client = as_user(world.owner)
    for agent_id in ["00000000-0000-0000-0000-000000000000", "not-a-uuid"]:
        assert_error(client.get(f"/v1/agents/{agent_id}"), 404, "agent_not_found")


def test_agent_key_identifies_agent_and_tenant(world, as_agent):
    body = as_agent(world.agent).get("/v1/me").json()
    assert body["principal"] == {"type": "agent", "id": str(world.agent.pk), "name": "support-bot"}
    assert body["tenant"]["slug"] == "acme"
    assert body["roles"] == []


def test_user_key_carries_roles(world, as_user):
    body = as_user(world.admin).get("/v1/me").json()
    assert body["principal"]["type"] == "user"
    assert body["roles"] == ["tenant_admin"]


def test_last_used_is_recorded_at_most_once_a_minute(world, monkeypatch):
    key, secret = api_key_create(tenant=world.tenant, agent=world.agent, name="k")
    assert key.last_used_at is None
    bearer(secret).get("/v1/me")
    first = ApiKey.objects.get(pk=key.pk).last_used_at
    assert first is not None
    bearer(secret).get("/v1/me")
    assert ApiKey.objects.get(pk=key.pk).last_used_at == first
    # Five minutes later (the key as this process last read it, its copy included).
    later = timezone.now() + timedelta(minutes=5)
    monkeypatch.setattr("governance.authentication.timezone.now", lambda: later)
    bearer(secret).get("/v1/me")
    assert ApiKey.objects.get(pk=key.pk).last_used_at == later


def test_secret_is_stored_hashed(world):
    key, secret = api_key_create(tenant=world.tenant, agent=world.agent, name="k")
    stored = ApiKey.objects.get(pk=key.pk)
    assert secret not in (stored.key_hash, stored.prefix)
    assert secret.startswith(f"fm_{stored.prefix}_")


def test_session_login_works_for_api(world, client):
    client.force_login(world.owner)
    assert client.get("/v1/me").json()["principal"]["name"] == "owner"
