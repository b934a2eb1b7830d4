"""Console pages: login, role-aware navigation, agents & keys with HTMX fragments."""

from __future__ import annotations

import re

import pytest

from governance.models import Agent, ApiKey, Job
from governance.tests import factories as f

HX = {"HTTP_HX_REQUEST": "true"}


def test_login_required_redirects(client):
    response = client.get("/agents/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


@pytest.mark.django_db
def test_login_and_logout(client, world):
    page = client.get("/login/")
    assert page.status_code == 200 and b'name="username"' in page.content
    bad = client.post("/login/", {"username": "owner", "password": "wrong"})
    assert bad.status_code == 200 and b'role="alert"' in bad.content
    good = client.post("/login/", {"username": "owner", "password": "pw-for-tests"})
    assert good.status_code == 302 and good["Location"] == "/"
    assert client.get("/").status_code == 200
    assert client.post("/logout/").status_code == 302
    assert client.get("/").status_code == 302


def nav_labels(html: bytes) -> list[str]:
    nav = re.search(rb'<nav aria-label="Main">(.*?)</nav>', html, re.S).group(1).decode()
    return re.findall(r">([^<>]+)</(?:a|span)>", nav)


def test_navigation_is_role_aware(client, world):
    client.force_login(world.owner)
    developer_nav = nav_labels(client.get("/").content)
    assert "Policies" in developer_nav and "Audit" not in developer_nav and "Engines" in developer_nav
    client.force_login(world.auditor)
    auditor_nav = nav_labels(client.get("/").content)
    assert "Audit" in auditor_nav and "Policies" not in auditor_nav


def test_tenant_switcher(client, world):
    f.MembershipFactory(user=world.owner, tenant=world.other_tenant)
    client.force_login(world.owner)
    page = client.get("/").content
    assert b'id="tenant-select"' in page and b"Dashboard \xc2\xb7 Acme" in page
    client.post("/tenant/switch/", {"tenant_id": str(world.other_tenant.pk)})
    assert b"Dashboard \xc2\xb7 Globex" in client.get("/").content
    # A tenant the user does not belong to is ignored.
    third = f.TenantFactory()
    client.post("/tenant/switch/", {"tenant_id": str(third.pk)})
    assert b"Dashboard \xc2\xb7 Globex" in client.get("/").content


def test_agents_page_full_and_fragment(client, world):
    client.force_login(world.owner)
    full = client.get("/agents/")
    assert b"<html" in full.content and b"support-bot" in full.content and b"ops-agent" not in full.content
    fragment = client.get("/agents/", **HX)
    assert b"<html" not in fragment.content and b'id="agent-list"' in fragment.content


def test_create_agent_with_htmx(client, world):
    client.force_login(world.owner)
    response = client.post("/agents/", {"name": "new-bot", "description": "x"}, **HX)
    assert response.status_code == 200 and b"new-bot" in response.content and b"<html" not in response.content
    assert Agent.objects.filter(name="new-bot", tenant=world.tenant).exists()
    dup = client.post("/agents/", {"name": "new-bot"}, **HX)
    assert dup.status_code == 400 and b"already exists" in dup.content
    empty = client.post("/agents/", {"name": ""}, **HX)
    assert empty.status_code == 400
    assert Agent.objects.filter(tenant=world.tenant).count() == 3


def test_auditor_cannot_create_agents_in_console(client, world):
    client.force_login(world.auditor)
    assert b"New agent" not in client.get("/agents/").content
    assert client.post("/agents/", {"name": "sneaky"}).status_code == 403
    assert not Agent.objects.filter(name="sneaky").exists()


def test_key_create_shows_secret_once_and_revoke(client, world):
    client.force_login(world.owner)
    url = f"/agents/{world.agent.pk}/keys/"
    created = client.post(url, {"name": "laptop"}, **HX)
    secret = re.search(rb'id="new-secret">([^<]+)<', created.content).group(1).decode()
    key = ApiKey.objects.get(agent=world.agent, name="laptop")
    assert secret.startswith(f"fm_{key.prefix}_")
    detail = client.get(f"/agents/{world.agent.pk}/")
    assert secret.encode() not in detail.content and f"fm_{key.prefix}".encode() in detail.content
    revoked = client.post(f"/agents/{world.agent.pk}/keys/{key.pk}/revoke/", **HX)
    assert revoked.status_code == 200 and b"revoked" in revoked.content
    key.refresh_from_db()
    assert key.revoked_at is not None


def test_console_agent_pages_hide_foreign_and_ungranted_agents(client, world):
    client.force_login(world.teammate)
    assert client.get(f"/agents/{world.agent.pk}/").status_code == 404
    assert client.post(f"/agents/{world.agent.pk}/keys/", {"name": "x"}).status_code == 404
    client.force_login(world.outsider)
    assert client.get(f"/agents/{world.agent.pk}/").status_code == 404
    client.force_login(world.auditor)  # may view, may not manage keys
    page = client.get(f"/agents/{world.agent.pk}/")
    assert page.status_code == 200 and b"API keys" not in page.content
    assert client.post(f"/agents/{world.agent.pk}/keys/", {"name": "x"}).status_code == 404
    assert not ApiKey.objects.filter(name="x").exists()


def test_self_check_from_dashboard(client, world):
    client.force_login(world.admin)
    assert b"Run worker self-check" in client.get("/").content
    response = client.post("/system/self-check/", **HX)
    assert response.status_code == 200 and b'id="jobs"' in response.content
    job = Job.objects.get(tenant=world.tenant)
    row = client.get(f"/jobs/{job.pk}/", **HX)
    assert b"queued" in row.content and b'hx-trigger="every 1s"' in row.content
    client.force_login(world.owner)
    assert client.post("/system/self-check/").status_code == 403
    client.force_login(world.outsider)
    assert client.get(f"/jobs/{job.pk}/").status_code == 404


def test_console_404_is_html_and_api_404_is_json(client, world):
    client.force_login(world.owner)
    page = client.get("/no-such-page/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")
    api = client.get("/v1/no-such-route")
    assert api.status_code == 404 and api.json()["error"]["code"] == "not_found"


def test_admin_registers_every_model():
    from django.apps import apps
    from django.contrib import admin

    ours = [
        m
        for app in ("core", "governance", "memory", "providers")
        for m in apps.get_app_config(app).get_models()
    ]
    missing = [m.__name__ for m in ours if not admin.site.is_registered(m)]
    assert ours and not missing, missing
