"""Console pages for engines: list, detail, health, declare / remove, the tenant's credential."""

from __future__ import annotations

import pytest

from governance.models import Role
from governance.tests import factories as f
from providers.models import AccessControl, EngineInstance, TenantEngineCredential
from providers.tests.engines import custom_engine, declare

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def engines(world, local_server):
    server = custom_engine(server=local_server())
    declare("shared-custom", server.url, access_control=AccessControl.TENANT_KEY)
    declare("globex-custom", server.url, tenant=world.other_tenant)
    return server


def test_engine_list_shows_builtin_and_visible_engines(client, world, engines):
    client.force_login(world.owner)
    page = client.get("/engines/").content.decode()
    assert "builtin" in page and "shared-custom" in page and "globex-custom" not in page
    assert "Declare an engine" not in page


def test_detail_and_health(client, world, engines):
    client.force_login(world.auditor)
    page = client.get("/engines/shared-custom/").content.decode()
    assert "Check health" in page and "recall" in page
    health = client.post("/engines/shared-custom/health/", **HX).content.decode()
    # tenant_key engine without the tenant's credential: reported, not raised
    assert "memory_engine_credential_missing" in health
    client.force_login(world.outsider)
    assert client.get("/engines/globex-custom/").status_code == 200
    client.force_login(world.owner)
    assert client.get("/engines/globex-custom/").status_code == 404
    assert client.post("/engines/globex-custom/health/").status_code == 404


def test_builtin_detail_and_isolation_refusals(client, world, engines):
    from governance.models import AgentPolicyVersion

    AgentPolicyVersion.objects.create(
        agent=world.agent, version=1, policy={"required_isolation": "dedicated"}
    )
    client.force_login(world.owner)
    page = client.get("/engines/shared-custom/").content.decode()
    assert "support-bot: its policy requires <strong>dedicated</strong> isolation" in page
    assert client.get("/engines/builtin/").status_code == 200


def test_tenant_admin_sets_rotates_removes_credential_never_shown(client, world, engines):
    client.force_login(world.admin)
    url = "/engines/shared-custom/credential/"
    response = client.post(url, {"credential_ref": "env://FEDMEM_CRED_ACME_KEY"}, **HX)
    assert response.status_code == 200 and b"FEDMEM_CRED_ACME_KEY" not in response.content
    assert b"<code>env</code> reference is set" in response.content
    stored = TenantEngineCredential.objects.get(engine_id="shared-custom", tenant=world.tenant)
    assert stored.credential_ref == "env://FEDMEM_CRED_ACME_KEY"
    bad = client.post(url, {"credential_ref": "env://DATABASE_URL"}, **HX)
    assert bad.status_code == 400 and b"DATABASE_URL" not in bad.content.split(b'role="alert"')[0]
    stored.refresh_from_db()
    assert stored.credential_ref == "env://FEDMEM_CRED_ACME_KEY"
    removed = client.post(url, {"action": "remove"}, **HX)
    assert removed.status_code == 200 and b"No tenant credential is set" in removed.content
    assert not TenantEngineCredential.objects.exists()


def test_credential_is_tenant_admin_only(client, world, engines):
    client.force_login(world.owner)
    assert (
        client.post(
            "/engines/shared-custom/credential/", {"credential_ref": "env://FEDMEM_CRED_X"}
        ).status_code
        == 403
    )
    assert not TenantEngineCredential.objects.exists()


def test_platform_admin_declares_and_removes(client, world, engines):
    padmin = f.member(world.tenant, Role.PLATFORM_ADMIN, username="padmin")
    client.force_login(padmin)
    assert "Declare an engine" in client.get("/engines/").content.decode()
    body = {
        "id": "new-mem0",
        "provider": "mem0",
        "base_url": "https://mem0.example.com",
        "access_control": "tenant_key",
        "timeout_seconds": "5",
    }
    response = client.post("/engines/", body)
    assert response.status_code == 302 and EngineInstance.objects.filter(pk="new-mem0").exists()
    bad = client.post("/engines/", {**body, "id": "other", "base_url": "https://10.0.0.1"}, **HX)
    assert bad.status_code == 400 and not EngineInstance.objects.filter(pk="other").exists()
    assert client.post("/engines/new-mem0/remove/").status_code == 302
    assert not EngineInstance.objects.filter(pk="new-mem0").exists()


def test_declare_and_remove_are_platform_admin_only(client, world, engines):
    client.force_login(world.admin)
    body = {
        "id": "x",
        "provider": "custom",
        "base_url": "https://x.example.com",
        "access_control": "none",
        "timeout_seconds": "5",
    }
    assert client.post("/engines/", body).status_code == 403
    assert client.post("/engines/shared-custom/remove/").status_code == 403
    assert EngineInstance.objects.filter(pk="shared-custom").exists()
    assert not EngineInstance.objects.filter(pk="x").exists()


def test_anonymous_is_sent_to_login(client, world, engines):
    assert client.get("/engines/").status_code == 302
    assert (
        client.post(
            "/engines/shared-custom/credential/", {"credential_ref": "env://FEDMEM_CRED_X"}
        ).status_code
        == 302
    )


def test_dashboard_engine_panel_checks_quickly_and_caches(client, world, engines, local_server):
    slow = custom_engine(delay=3.0, server=local_server())
    # The engine would answer within its own 10 s; the dashboard allows 2 s.
    declare("slow-custom", slow.url, timeout_seconds=10.0)
    assert client.get("/dashboard/engines/").status_code == 302  # anonymous: to the login page
    client.force_login(world.owner)
    panel = client.get("/dashboard/engines/", **HX).content.decode()
    assert "builtin" in panel and "shared-custom" in panel and "globex-custom" not in panel
    assert "credential_missing" in panel  # tenant_key engine without the tenant's credential
    slow_row = panel[panel.index("slow-custom") :].split("</tr>")[0]
    assert "unavailable" in slow_row and "(cached)" not in slow_row
    again = client.get("/dashboard/engines/", **HX).content.decode()
    assert "(cached)" in again[again.index("slow-custom") :].split("</tr>")[0]


def test_detail_shows_where_the_tenants_queued_writes_stand(client, world, engines):
    import uuid

    from providers.models import ProviderWrite

    engine = EngineInstance.objects.get(pk="shared-custom")
    for tenant, status, reason in (
        (world.tenant, "queued", ""),
        (world.tenant, "failed", "episode rejected by the content policy"),
        (world.other_tenant, "failed", "globex-only reason"),
    ):
        ProviderWrite.objects.create(
            id=uuid.uuid4(), tenant=tenant, engine=engine, operation="remember", status=status, reason=reason
        )
    client.force_login(world.owner)
    page = client.get("/engines/shared-custom/").content.decode()
    assert "Writes this engine was still processing" in page
    assert "episode rejected by the content policy" in page and ">queued<" in page
    assert "globex-only reason" not in page
