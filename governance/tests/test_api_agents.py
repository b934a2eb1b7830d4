"""Agents, keys and grants over the API: happy paths, bad input, roles, tenants."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from conftest import assert_error, bearer
from governance.models import Agent, ApiKey, Role
from governance.tests import factories as f


def test_list_agents_shows_only_what_the_caller_may_view(world, as_user, as_agent):
    assert [a["name"] for a in as_user(world.admin).get("/v1/agents").json()] == ["ops-agent", "support-bot"]
    assert [a["name"] for a in as_user(world.owner).get("/v1/agents").json()] == ["support-bot"]
    assert as_user(world.teammate).get("/v1/agents").json() == []
    assert [a["name"] for a in as_agent(world.sibling).get("/v1/agents").json()] == ["ops-agent"]


def test_list_agents_query_count_is_pinned(world, as_user, django_assert_num_queries):
    client = as_user(world.admin)
    f.agent(world.tenant, world.admin)
    f.agent(world.tenant, world.admin)
    # key lookup, last_used update, memberships (roles), agent list
    with django_assert_num_queries(3):
        response = client.get("/v1/agents")
    assert len(response.json()) == 4


@pytest.mark.parametrize("role", [Role.DEVELOPER, Role.TENANT_ADMIN, Role.PLATFORM_ADMIN])
def test_creators_can_create_agents(world, as_user, role):
    user = f.member(world.tenant, role)
    response = as_user(user).post("/v1/agents", {"name": "new-agent", "description": "d"}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["tenant"]["slug"] == "acme"
    assert Agent.objects.restrict(user, "editor").filter(name="new-agent").exists()


@pytest.mark.parametrize("role", [Role.SECURITY_OFFICER, Role.AUDITOR])
def test_compliance_roles_cannot_create_agents(world, as_user, role):
    user = f.member(world.tenant, role)
    assert_error(as_user(user).post("/v1/agents", {"name": "x"}, format="json"), 403, "permission_denied")
    assert not Agent.objects.filter(name="x").exists()


def test_agent_key_cannot_create_agents(world, as_agent):
    assert_error(as_agent(world.agent).post("/v1/agents", {"name": "x"}, format="json"), 403)


def test_create_agent_bad_input(world, as_user):
    client = as_user(world.owner)
    before = Agent.objects.count()
    error = assert_error(client.post("/v1/agents", {}, format="json"), 400, "validation_error")
    assert "name" in error["details"]["fields"]
    assert_error(client.post("/v1/agents", {"name": "x" * 101}, format="json"), 400, "validation_error")
    assert_error(client.post("/v1/agents", {"name": "   "}, format="json"), 400)
    assert_error(client.post("/v1/agents", "not json", content_type="application/json"), 400, "parse_error")
    assert_error(client.post("/v1/agents", {"name": "support-bot"}, format="json"), 409, "agent_exists")
    assert Agent.objects.count() == before


def test_patch_agent(world, as_user):
    response = as_user(world.owner).patch(
        f"/v1/agents/{world.agent.pk}", {"description": "new"}, format="json"
    )
    assert response.status_code == 200 and response.json()["description"] == "new"
    assert_error(
        as_user(world.owner).patch(f"/v1/agents/{world.agent.pk}", {"name": "ops-agent"}, format="json"), 409
    )
    assert_error(
        as_user(world.auditor).patch(f"/v1/agents/{world.agent.pk}", {"description": "z"}, format="json"), 404
    )
    assert_error(
        as_user(world.outsider).patch(f"/v1/agents/{world.agent.pk}", {"description": "z"}, format="json"),
        404,
    )
    world.agent.refresh_from_db()
    assert world.agent.description == "new"


def test_key_lifecycle(world, as_user):
    client = as_user(world.owner)
    created = client.post(f"/v1/agents/{world.agent.pk}/keys", {"name": "prod"}, format="json")
    assert created.status_code == 201
    body = created.json()
    secret = body["secret"]
    assert secret.startswith(body["display_prefix"] + "_")
    # The secret works, and is never shown again.
    assert bearer(secret).get("/v1/me").json()["principal"]["name"] == "support-bot"
    listed = client.get(f"/v1/agents/{world.agent.pk}/keys").json()
    assert all("secret" not in k for k in listed)
    assert secret not in str(listed)
    revoked = client.delete(f"/v1/agents/{world.agent.pk}/keys/{body['id']}")
    assert revoked.status_code == 200 and revoked.json()["is_active"] is False
    assert_error(bearer(secret).get("/v1/me"), 401)


def test_keys_are_editor_only(world, as_user, as_agent):
    url = f"/v1/agents/{world.agent.pk}/keys"
    assert_error(as_user(world.teammate).get(url), 404)
    assert_error(as_user(world.auditor).post(url, {"name": "k"}, format="json"), 404)
    assert_error(as_user(world.outsider).post(url, {"name": "k"}, format="json"), 404)
    assert_error(as_agent(world.agent).post(url, {"name": "k"}, format="json"), 403)
    assert_error(APIClient().post(url, {"name": "k"}, format="json"), 401)
    assert not ApiKey.objects.filter(agent=world.agent, name="k").exists()


def test_key_bad_input_and_unknown_key(world, as_user):
    client = as_user(world.owner)
    assert_error(client.post(f"/v1/agents/{world.agent.pk}/keys", {"name": ""}, format="json"), 400)
    assert_error(client.delete(f"/v1/agents/{world.agent.pk}/keys/not-a-uuid"), 404, "api_key_not_found")
    other_key = ApiKey.objects.create(
        tenant=world.tenant, agent=world.sibling, name="x", prefix="q" * 12, key_hash="h"
    )
    # A key of another agent cannot be revoked through this agent's URL.
    assert_error(client.delete(f"/v1/agents/{world.agent.pk}/keys/{other_key.pk}"), 404)
    other_key.refresh_from_db()
    assert other_key.revoked_at is None


def test_grants(world, as_user):
    url = f"/v1/agents/{world.agent.pk}/grants"
    client = as_user(world.owner)
    response = client.put(
        url, {"user_id": world.teammate.pk, "permissions": ["viewer", "can_invoke"]}, format="json"
    )
    assert response.status_code == 200
    by_user = {g["username"]: g["permissions"] for g in response.json()}
    assert by_user["teammate"] == ["can_invoke", "viewer"]
    assert as_user(world.teammate).get(f"/v1/agents/{world.agent.pk}").status_code == 200
    client.put(url, {"user_id": world.teammate.pk, "permissions": []}, format="json")
    assert_error(as_user(world.teammate).get(f"/v1/agents/{world.agent.pk}"), 404)


def test_grants_bad_input_and_outsiders(world, as_user):
    url = f"/v1/agents/{world.agent.pk}/grants"
    client = as_user(world.owner)
    assert_error(
        client.put(url, {"user_id": world.outsider.pk, "permissions": ["viewer"]}, format="json"), 400
    )
    assert_error(client.put(url, {"user_id": world.teammate.pk, "permissions": ["root"]}, format="json"), 400)
    assert_error(
        as_user(world.teammate).put(
            url, {"user_id": world.teammate.pk, "permissions": ["editor"]}, format="json"
        ),
        404,
    )


def test_personal_keys(world, as_user):
    client = as_user(world.auditor)
    created = client.post("/v1/me/keys", {"name": "laptop"}, format="json").json()
    assert bearer(created["secret"]).get("/v1/me").json()["roles"] == ["auditor"]
    assert [k["name"] for k in client.get("/v1/me/keys").json()] == ["laptop", "test"]
    # Somebody else's key is a 404.
    assert_error(as_user(world.owner).delete(f"/v1/me/keys/{created['id']}"), 404)
    assert client.delete(f"/v1/me/keys/{created['id']}").json()["is_active"] is False


def test_unknown_api_path_answers_uniform_404():
    response = APIClient().get("/v1/does-not-exist")
    assert_error(response, 404, "not_found")


def test_wrong_method_is_405(world, as_user):
    assert_error(as_user(world.owner).delete("/v1/agents"), 405, "method_not_allowed")
