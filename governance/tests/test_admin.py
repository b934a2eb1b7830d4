"""The Django admin: platform staff only, memory content never shown, keys
read-only with revocation through the audited service, identity edits audited."""

from __future__ import annotations

import pytest

from governance.models import ApiKey, AuditEvent, Membership, Role
from governance.tests import factories as f
from memory.enforcement import system_access
from memory.models import MemoryHistory, SessionMessage
from memory.services.sessions import session_message_append
from memory.tests.conftest import remember

CANARY = "Canary-Marigold-7731 lives at 12 Harbour Lane"


@pytest.fixture
def platform(world):
    user = f.member(world.other_tenant, Role.PLATFORM_ADMIN, username="platform")
    user.is_staff = user.is_superuser = True  # as the demo's platform admin
    user.save()
    return user


@pytest.fixture
def content(world):
    item = remember(system_access(world.agent), CANARY, scope="user").item
    message = session_message_append(
        access=system_access(world.agent), session_id="chat-9", role="user", content=CANARY, user_id="cust-1"
    )
    return item, message


def test_staff_who_are_not_platform_admins_cannot_open_the_admin(world, client):
    world.admin.is_staff = True  # a tenant admin flagged staff by mistake
    world.admin.save()
    client.force_login(world.admin)
    response = client.get("/admin/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert client.get("/admin/memory/memoryitem/").status_code == 302


def test_platform_staff_never_see_memory_content_or_session_messages(world, client, platform, content):
    item, message = content
    client.force_login(platform)
    pages = [
        "/admin/memory/memoryitem/",
        f"/admin/memory/memoryitem/{item.pk}/change/",
        f"/admin/memory/memoryitem/{item.pk}/history/",
        "/admin/memory/sessionmessage/",
        f"/admin/memory/sessionmessage/{message.pk}/change/",
        "/admin/memory/memoryhistory/",
        f"/admin/memory/memoryhistory/{MemoryHistory.objects.filter(item_id=item.pk).first().pk}/change/",
    ]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        assert b"Marigold" not in response.content, url
        assert b"Harbour" not in response.content, url
    # Content is not searchable either (a search would reveal it one guess at a time).
    from django.contrib import admin

    for model in (type(item), type(message), MemoryHistory):
        assert admin.site._registry[model].get_search_fields(None) == []


def test_memory_rows_cannot_be_changed_or_deleted_in_the_admin(world, client, platform, content):
    item, message = content
    client.force_login(platform)
    url = f"/admin/memory/memoryitem/{item.pk}/change/"
    client.post(url, {"legal_hold": "on", "classification": 0})
    assert client.post(f"/admin/memory/memoryitem/{item.pk}/delete/", {"post": "yes"}).status_code == 403
    item.refresh_from_db()
    assert item.content == CANARY and not item.legal_hold
    assert SessionMessage.objects.filter(pk=message.pk).exists()


def test_clearing_revoked_at_in_the_admin_does_not_revive_a_key(world, client, platform, as_agent):
    from governance.services.agents import api_key_revoke

    secret = f.agent_key(world.agent)
    key = ApiKey.objects.get(agent=world.agent)
    api_key_revoke(key=key, actor=world.owner)
    client.force_login(platform)
    url = f"/admin/governance/apikey/{key.pk}/change/"
    response = client.post(url, {"name": key.name, "revoked_at_0": "", "revoked_at_1": ""})
    assert response.status_code in (302, 403)
    key.refresh_from_db()
    assert key.revoked_at is not None
    from conftest import bearer

    assert bearer(secret).get("/v1/me").status_code == 401
    assert client.post(f"/admin/governance/apikey/{key.pk}/delete/", {"post": "yes"}).status_code == 403


def test_revoking_from_the_admin_goes_through_the_audited_service(world, client, platform):
    f.agent_key(world.agent)
    key = ApiKey.objects.get(agent=world.agent)
    client.force_login(platform)
    response = client.post(
        "/admin/governance/apikey/", {"action": "revoke_keys", "_selected_action": [str(key.pk)]}
    )
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert AuditEvent.objects.filter(action="api_key.revoked", target_id=str(key.pk)).exists()


def test_a_role_change_in_the_admin_is_audited(world, client, platform):
    membership = Membership.objects.get(user=world.teammate, tenant=world.tenant)
    client.force_login(platform)
    response = client.post(
        f"/admin/governance/membership/{membership.pk}/change/",
        {"user": world.teammate.pk, "tenant": world.tenant.pk, "role": Role.TENANT_ADMIN},
    )
    assert response.status_code == 302, response.content[:2000]
    membership.refresh_from_db()
    assert membership.role == Role.TENANT_ADMIN
    event = AuditEvent.objects.get(action="admin.membership.changed")
    assert event.data == {"fields": ["role"], "via": "django_admin"}
    assert event.tenant_id == world.tenant.pk and event.actor_id == str(platform.pk)


def test_every_admin_list_and_page_renders_for_platform_staff(world, client, platform, content):
    from django.contrib import admin

    client.force_login(platform)
    for model, model_admin in admin.site._registry.items():
        opts = model._meta
        response = client.get(f"/admin/{opts.app_label}/{opts.model_name}/")
        assert response.status_code == 200, opts.label
        row = model_admin.get_queryset(None).first() if hasattr(model_admin, "get_queryset") else None
        if row is not None:
            page = client.get(f"/admin/{opts.app_label}/{opts.model_name}/{row.pk}/change/")
            assert page.status_code == 200, opts.label
            assert b"Marigold" not in page.content, opts.label
