"""/v1/memory/engines: list, declare, remove, capabilities, health, tenant credentials."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from conftest import assert_error
from governance.models import AuditEvent, Role
from governance.services.audit import audit_verify
from governance.tests import factories as f
from providers import contracts
from providers.models import AccessControl, EngineInstance, TenantEngineCredential
from providers.tests.engines import custom_engine, declare

ENGINES = "/v1/memory/engines"


@pytest.fixture
def platform_admin(world):
    return f.member(world.tenant, Role.PLATFORM_ADMIN, username="padmin")


@pytest.fixture
def engines(world, local_server):
    server = custom_engine(server=local_server())
    shared = declare("shared-custom", server.url)
    own = declare("acme-custom", server.url, tenant=world.tenant)
    foreign = declare("globex-custom", server.url, tenant=world.other_tenant)
    return server, shared, own, foreign


def _ids(response) -> list[str]:
    return [row["id"] for row in response.json()]


# --- list ----------------------------------------------------------------------------


def test_list_requires_authentication(world):
    assert_error(APIClient().get(ENGINES), 401, "not_authenticated")


def test_list_shows_builtin_shared_and_own_dedicated_only(world, engines, as_user, as_agent):
    for client in (as_user(world.owner), as_user(world.auditor), as_agent(world.agent)):
        response = client.get(ENGINES)
        assert response.status_code == 200
        assert _ids(response) == ["builtin", "acme-custom", "shared-custom"]
    assert _ids(as_user(world.outsider).get(ENGINES)) == [
        "builtin",
        "globex-custom",
        "shared-custom",
    ]


def test_platform_admin_sees_every_instance(world, engines, platform_admin, as_user):
    assert _ids(as_user(platform_admin).get(ENGINES)) == [
        "builtin",
        "acme-custom",
        "globex-custom",
        "shared-custom",
    ]


def test_list_never_shows_a_credential_reference(world, engines, as_user, platform_admin):
    EngineInstance.objects.filter(pk="shared-custom").update(
        credential_ref="env://FEDMEM_CRED_SHARED", access_control=AccessControl.PLATFORM_KEY
    )
    TenantEngineCredential.objects.create(
        engine_id="shared-custom", tenant=world.tenant, credential_ref="env://FEDMEM_CRED_ACME"
    )
    for user in (world.admin, platform_admin):
        body = as_user(user).get(ENGINES).content.decode()
        assert "FEDMEM_CRED" not in body and "credential_ref" not in body
    row = next(r for r in as_user(world.admin).get(ENGINES).json() if r["id"] == "shared-custom")
    assert row["has_platform_credential"] is True and row["tenant_credential_set"] is True


def test_list_query_count_is_pinned(world, engines, as_user, django_assert_max_num_queries):
    client = as_user(world.owner)
    client.get(ENGINES)
    for index in range(5):
        declare(f"more-{index}", "http://127.0.0.1:9")
    with django_assert_max_num_queries(6):
        response = client.get(ENGINES)
    assert len(response.json()) == 8


def test_engine_detail(world, engines, as_user, as_agent):
    assert_error(APIClient().get(f"{ENGINES}/shared-custom"), 401)
    assert as_agent(world.agent).get(f"{ENGINES}/acme-custom").json()["tenant"] == "acme"
    assert as_user(world.auditor).get(f"{ENGINES}/builtin").json()["provider"] == "builtin"
    assert_error(as_user(world.owner).get(f"{ENGINES}/globex-custom"), 404, "engine_not_found")
    assert_error(as_user(world.owner).get(f"{ENGINES}/{'x' * 200}"), 404, "engine_not_found")


# --- declare -------------------------------------------------------------------------


def _new(**fields):
    body = {
        "id": "mem0-prod",
        "provider": "mem0",
        "base_url": "https://api.mem0.example",
        "credential_ref": "env://FEDMEM_CRED_MEM0",
        "access_control": "platform_key",
        "options": {},
    }
    body.update(fields)
    return body


def test_declare_requires_platform_admin(world, as_user, as_agent):
    assert_error(APIClient().post(ENGINES, _new(), format="json"), 401)
    for client in (
        as_user(world.admin),
        as_user(world.owner),
        as_user(world.auditor),
        as_agent(world.agent),
    ):
        assert_error(client.post(ENGINES, _new(), format="json"), 403, "permission_denied")
    assert not EngineInstance.objects.exists()


def test_platform_admin_declares_shared_and_dedicated_instances(world, platform_admin, as_user):
    client = as_user(platform_admin)
    response = client.post(ENGINES, _new(), format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["id"] == "mem0-prod" and body["shared"] is True and body["tenant"] is None
    assert "credential_ref" not in body and "FEDMEM_CRED" not in response.content.decode()
    response = client.post(
        ENGINES, _new(id="zep-globex", provider="zep", tenant="globex", options={}), format="json"
    )
    assert response.status_code == 201, response.content
    assert EngineInstance.objects.get(pk="zep-globex").tenant == world.other_tenant


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"provider": "nope"}, "provider"),
        ({"id": "builtin"}, "id"),
        ({"id": "Not A Slug"}, "id"),
        ({"id": "Mem0"}, "id"),
        ({"base_url": "ftp://x.example"}, "base_url"),
        ({"base_url": "https://user:pw@x.example"}, "base_url"),
        ({"base_url": "https://10.0.0.5"}, "base_url"),
        ({"base_url": "https://169.254.169.254/latest"}, "base_url"),
        ({"credential_ref": "env://DATABASE_URL"}, "credential_ref"),
        ({"credential_ref": "plain-secret-value"}, "credential_ref"),
        ({"credential_ref": ""}, "credential_ref"),
        ({"access_control": "none"}, "credential_ref"),
        ({"options": {"nope": 1}}, "options"),
        ({"tls_verify": False}, "tls_verify"),
        ({"timeout_seconds": 0}, "timeout_seconds"),
        ({"tenant": "no-such-tenant"}, "tenant"),
    ],
)
def test_declare_refuses_bad_input(world, platform_admin, as_user, fields, field):
    error = assert_error(as_user(platform_admin).post(ENGINES, _new(**fields), format="json"), 400)
    assert field in error["details"]["fields"]
    assert "plain-secret-value" not in str(error)


def test_plain_http_engines_need_the_switch(world, platform_admin, as_user, settings):
    settings.FEDMEM_ENGINES_ALLOW_HTTP = False
    settings.DEBUG = False
    error = assert_error(
        as_user(platform_admin).post(ENGINES, _new(base_url="http://api.example"), format="json"),
        400,
    )
    assert "FEDMEM_ENGINES_ALLOW_HTTP" in error["message"]


def test_development_instances_may_use_loopback(world, platform_admin, as_user):
    response = as_user(platform_admin).post(
        ENGINES,
        _new(base_url="http://127.0.0.1:8000", allow_development_hosts=True, tls_verify=False),
        format="json",
    )
    assert response.status_code == 201, response.content


def test_declaring_twice_is_a_conflict(world, platform_admin, as_user):
    client = as_user(platform_admin)
    client.post(ENGINES, _new(), format="json")
    assert_error(client.post(ENGINES, _new(), format="json"), 409, "engine_exists")


# --- remove --------------------------------------------------------------------------


def test_remove_requires_platform_admin(world, engines, platform_admin, as_user):
    assert_error(APIClient().delete(f"{ENGINES}/shared-custom"), 401)
    assert_error(as_user(world.admin).delete(f"{ENGINES}/shared-custom"), 403)
    assert_error(as_user(world.admin).delete(f"{ENGINES}/globex-custom"), 404, "engine_not_found")
    assert as_user(platform_admin).delete(f"{ENGINES}/globex-custom").status_code == 204
    assert not EngineInstance.objects.filter(pk="globex-custom").exists()
    assert_error(as_user(platform_admin).delete(f"{ENGINES}/builtin"), 422, "memory_engine_builtin")
    assert_error(as_user(platform_admin).delete(f"{ENGINES}/nope"), 404, "engine_not_found")


# --- capabilities --------------------------------------------------------------------


def test_capabilities_are_readable_without_credential_or_call(world, engines, as_user, as_agent):
    server = engines[0]
    EngineInstance.objects.filter(pk="acme-custom").update(
        access_control=AccessControl.TENANT_KEY, credential_ref=""
    )
    for client in (as_user(world.owner), as_agent(world.agent)):
        for engine_id in ("builtin", "shared-custom", "acme-custom"):
            response = client.get(f"{ENGINES}/{engine_id}/capabilities")
            assert response.status_code == 200
            assert contracts.errors("capability_announcement", response.json()) == []
    assert server.connections == 0
    acme = as_user(world.owner).get(f"{ENGINES}/acme-custom/capabilities").json()
    assert acme["isolation"] == "dedicated"
    assert as_user(world.owner).get(f"{ENGINES}/shared-custom/capabilities").json()["isolation"] == "none"


def test_capabilities_of_a_foreign_dedicated_engine_are_404(world, engines, as_user):
    assert_error(as_user(world.owner).get(f"{ENGINES}/globex-custom/capabilities"), 404, "engine_not_found")
    assert_error(APIClient().get(f"{ENGINES}/shared-custom/capabilities"), 401)


# --- health --------------------------------------------------------------------------


def test_health_for_the_allowed_roles(world, engines, as_user):
    for user in (world.admin, world.owner, world.officer, world.auditor):
        response = as_user(user).get(f"{ENGINES}/shared-custom/health")
        assert response.status_code == 200, response.content
        assert response.json()["status"] == "ok"
    assert as_user(world.owner).get(f"{ENGINES}/builtin/health").json()["status"] == "ok"


def test_health_refuses_other_callers(world, engines, platform_admin, as_user, as_agent):
    assert_error(APIClient().get(f"{ENGINES}/shared-custom/health"), 401)
    assert_error(as_agent(world.agent).get(f"{ENGINES}/shared-custom/health"), 403)
    only_platform = f.member(f.TenantFactory(slug="ops"), Role.PLATFORM_ADMIN, username="ops-admin")
    assert_error(as_user(only_platform).get(f"{ENGINES}/shared-custom/health"), 403)
    assert_error(as_user(world.owner).get(f"{ENGINES}/globex-custom/health"), 404, "engine_not_found")


def test_health_with_an_unresolvable_credential_is_502(world, local_server, as_user):
    server = custom_engine(server=local_server())
    declare(
        "keyed-unset",
        server.url,
        access_control=AccessControl.PLATFORM_KEY,
        credential_ref="env://FEDMEM_CRED_NEVER_SET",
    )
    error = assert_error(
        as_user(world.owner).get(f"{ENGINES}/keyed-unset/health"), 502, "memory_engine_unavailable"
    )
    assert error["details"]["reason"] == "credential_unavailable" and error["details"]["retryable"]
    assert server.connections == 0


def test_health_of_an_unreachable_engine_is_502(world, engines, as_user):
    server = engines[0]
    server.stop()
    error = assert_error(
        as_user(world.owner).get(f"{ENGINES}/shared-custom/health"),
        502,
        "memory_engine_unavailable",
    )
    assert error["details"]["retryable"] is True


def test_health_of_a_failing_engine_is_502(world, local_server, as_user):
    server = custom_engine(server=local_server(), status=503)
    declare("broken", server.url)
    assert_error(as_user(world.owner).get(f"{ENGINES}/broken/health"), 502, "memory_engine_unavailable")


def test_health_carries_the_tenants_own_credential(world, local_server, as_user, monkeypatch):
    server = custom_engine(server=local_server())
    declare(
        "keyed",
        server.url,
        access_control=AccessControl.PLATFORM_KEY,
        credential_ref="env://FEDMEM_CRED_PLATFORM",
    )
    monkeypatch.setenv("FEDMEM_CRED_PLATFORM", "platform-secret")
    monkeypatch.setenv("FEDMEM_CRED_ACME", "acme-secret")
    as_user(world.owner).get(f"{ENGINES}/keyed/health")
    assert server.requests[-1].headers["authorization"] == "Bearer platform-secret"
    as_user(world.admin).put(
        f"{ENGINES}/keyed/credential", {"credential_ref": "env://FEDMEM_CRED_ACME"}, format="json"
    )
    as_user(world.owner).get(f"{ENGINES}/keyed/health")
    assert server.requests[-1].headers["authorization"] == "Bearer acme-secret"
    assert "traceparent" in server.requests[-1].headers


def test_health_of_a_tenant_key_engine_without_credential_is_422(world, local_server, as_user):
    server = custom_engine(server=local_server())
    declare("byok", server.url, access_control=AccessControl.TENANT_KEY)
    error = assert_error(
        as_user(world.owner).get(f"{ENGINES}/byok/health"), 422, "memory_engine_credential_missing"
    )
    assert error["details"]["engine_id"] == "byok"
    assert server.connections == 0


def test_health_of_an_engine_not_announcing_it_is_422(world, local_server, as_user):
    server = custom_engine(server=local_server())
    declare("recall-only", server.url, options={"capabilities": ["recall"]})
    error = assert_error(
        as_user(world.owner).get(f"{ENGINES}/recall-only/health"),
        422,
        "memory_capability_unsupported",
    )
    assert error["details"] == {"engine_id": "recall-only", "operation": "get_health"}
    assert server.connections == 0


# --- tenant credential ---------------------------------------------------------------


def test_tenant_admin_sets_rotates_and_removes_the_credential(world, engines, as_user):
    client = as_user(world.admin)
    url = f"{ENGINES}/shared-custom/credential"
    EngineInstance.objects.filter(pk="shared-custom").update(access_control=AccessControl.TENANT_KEY)
    response = client.put(url, {"credential_ref": "env://FEDMEM_CRED_ACME"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["has_credential"] is True and response.json()["scheme"] == "env"
    assert "FEDMEM_CRED_ACME" not in response.content.decode()
    response = client.put(
        url, {"credential_ref": "openbao://secret/fedmem/tenants/acme/custom#key"}, format="json"
    )
    assert response.json()["scheme"] == "openbao"
    assert TenantEngineCredential.objects.get(
        engine_id="shared-custom", tenant=world.tenant
    ).credential_ref.startswith("openbao://")
    assert client.delete(url).status_code == 204
    assert_error(client.delete(url), 404, "engine_credential_not_found")
    # Each change is in the tenant's audit chain, naming the engine, never the reference.
    events = AuditEvent.objects.filter(chain=str(world.tenant.pk), target_id="shared-custom").order_by("seq")
    assert [e.action for e in events] == [
        "memory.engine.credential.set",
        "memory.engine.credential.rotate",
        "memory.engine.credential.remove",
    ]
    assert all("FEDMEM_CRED" not in str(e.data) and "openbao" not in str(e.data) for e in events)
    assert audit_verify(chain=str(world.tenant.pk)).ok


def test_credential_routes_refuse_other_callers(world, engines, platform_admin, as_user, as_agent):
    url = f"{ENGINES}/shared-custom/credential"
    body = {"credential_ref": "env://FEDMEM_CRED_ACME"}
    assert_error(APIClient().put(url, body, format="json"), 401)
    assert_error(as_agent(world.agent).put(url, body, format="json"), 403)
    for user in (world.owner, world.auditor, world.officer, platform_admin):
        assert_error(as_user(user).put(url, body, format="json"), 403)
    assert_error(as_user(world.admin).put(f"{ENGINES}/globex-custom/credential", body, format="json"), 404)
    assert_error(as_user(world.admin).put(f"{ENGINES}/builtin/credential", body, format="json"), 422)


def test_credential_refuses_bad_and_foreign_references(world, engines, as_user):
    url = f"{ENGINES}/shared-custom/credential"
    EngineInstance.objects.filter(pk="shared-custom").update(access_control=AccessControl.TENANT_KEY)
    client = as_user(world.admin)
    for ref in [
        "openbao://secret/fedmem/tenants/globex/custom#key",
        "env://DATABASE_URL",
        "sk-live-123",
        "",
    ]:
        error = assert_error(client.put(url, {"credential_ref": ref}, format="json"), 400)
        if ref:
            assert ref not in error["message"]
    assert not TenantEngineCredential.objects.exists()


def test_credential_on_an_engine_without_access_control_is_422(world, engines, as_user):
    error = assert_error(
        as_user(world.admin).put(
            f"{ENGINES}/shared-custom/credential",
            {"credential_ref": "env://FEDMEM_CRED_X"},
            format="json",
        ),
        422,
    )
    assert error["code"] == "memory_engine_no_credential"


def test_the_openapi_schema_describes_the_routes(world, as_user):
    response = as_user(world.owner).get("/v1/schema", HTTP_ACCEPT="application/json")
    text = response.content.decode()
    for path in (
        "/v1/memory/engines",
        "/v1/memory/engines/{engine_id}/health",
        "/v1/memory/agents/{agent_id}/federated/recall",
    ):
        assert path in text


def test_a_credential_never_reaches_logs_or_answers(world, local_server, as_user, monkeypatch, caplog):
    import logging

    server = custom_engine(server=local_server(), status=401)
    declare(
        "leaky",
        server.url,
        access_control=AccessControl.PLATFORM_KEY,
        credential_ref="env://FEDMEM_CRED_LEAK",
    )
    monkeypatch.setenv("FEDMEM_CRED_LEAK", "sk-very-secret-value")
    with caplog.at_level(logging.DEBUG):
        response = as_user(world.owner).get(f"{ENGINES}/leaky/health")
        listing = as_user(world.owner).get(ENGINES)
    assert response.status_code == 502
    assert server.requests[-1].headers["authorization"] == "Bearer sk-very-secret-value"  # it was sent...
    for text in (caplog.text, response.content.decode(), listing.content.decode()):
        assert "sk-very-secret-value" not in text  # ...and shown nowhere


def test_engines_restrict_to_shared_and_own_tenant(world, engines, platform_admin):
    from providers.models import EngineInstance

    visible = set(EngineInstance.objects.restrict(world.owner).values_list("tenant_id", flat=True))
    assert visible <= {None, world.tenant.pk}
    assert not EngineInstance.objects.restrict(world.owner, "change").exists()
    assert EngineInstance.objects.restrict(platform_admin).count() == EngineInstance.objects.count()
    assert not EngineInstance.objects.restrict(None).exists()
