"""Browser flows for identity pages, in Debian's Chromium against a live server."""

from __future__ import annotations

import re

import pytest

from conftest import screenshot
from governance.models import ApiKey, AuditEvent

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def log_in(page, username: str) -> None:
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("pw-for-tests")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/$"))


def test_log_in_and_out(page, world):
    page.goto("/")
    assert "/login/" in page.url
    page.get_by_label("Username").fill("owner")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Log in").click()
    assert page.get_by_role("alert").is_visible()
    log_in(page, "owner")
    assert page.get_by_role("heading", name="Dashboard · Acme").is_visible()
    page.locator("#dashboard-memory").wait_for()  # panels load after the page
    page.locator("#dashboard-engines").wait_for()
    screenshot(page, "dashboard")
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(re.compile(r"/login/"))


def test_create_and_revoke_an_api_key(page, world):
    log_in(page, "owner")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Agents & keys").click()
    page.get_by_role("link", name="support-bot").click()
    page.get_by_label("Key name").fill("ci-key")
    page.get_by_role("button", name="Create key").click()
    secret = page.locator("#new-secret").inner_text()
    key = ApiKey.objects.get(agent=world.agent, name="ci-key")
    assert secret.startswith(f"fm_{key.prefix}_")
    screenshot(page, "agent-keys")
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(f"#key-{key.pk}").get_by_role("button", name="Revoke").click()
    page.locator(f"#key-{key.pk}").get_by_text("revoked").wait_for()
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert page.locator("#new-secret").count() == 0  # the secret is gone after the swap


def test_keyboard_only_agent_creation(page, world):
    log_in(page, "owner")
    page.goto("/agents/")
    page.get_by_label("Agent name").focus()
    page.keyboard.type("kbd-agent")
    page.keyboard.press("Enter")
    page.get_by_role("link", name="kbd-agent").wait_for()


def test_auditor_reads_the_verified_trail(page, world):
    log_in(page, "auditor")
    page.get_by_role("link", name="Audit").click()
    page.get_by_text("chain verified").wait_for()
    page.get_by_label("Action (prefix)").fill("agent.")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r"action=agent"))
    assert (
        page.locator("#audit-list tbody tr").count()
        == AuditEvent.objects.filter(chain=str(world.tenant.pk), action__startswith="agent.").count()
    )
    screenshot(page, "audit")
