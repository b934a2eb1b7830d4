"""Browser flows for compliance and policy pages, in Debian's Chromium against a live server."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from conftest import screenshot
from governance.models import AgentPolicyVersion, Candidate, ErasureRequest, LegalHold, Role
from governance.services.candidates import candidate_import
from governance.tests import factories as f
from governance.tests.test_browser import log_in
from memory.models import MemoryItem
from memory.text import content_hash

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module", autouse=True)
def loaded_models() -> None:
    """Promotion writes memory (embedding, personal-data analysis): load the models
    once, before the live server's first write, so no click waits on a model load."""
    from memory.embeddings import get_embedder
    from memory.pii import get_analyzer

    get_embedder()
    get_analyzer()


def log_out(page) -> None:
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(re.compile(r"/login/"))


def test_approve_and_promote_a_candidate(page, world):
    for n, text in enumerate(["Prefers morning calls", "Lives in Lyon", "Asked for a refund"]):
        candidate_import(
            agent=world.agent,
            provider="mem0-shared",
            external_id=f"m-{n}",
            record_kind="fact",
            content=text,
            subject="jane",
            captured_at=timezone.now(),
            content_hash=content_hash(text),
        )
    target = Candidate.objects.get(external_id="m-0")
    log_in(page, "tadmin")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Candidates").click()
    page.get_by_label("Status").select_option("pending")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r"status=pending"))
    row = page.locator(f"#candidate-{target.pk}")
    row.get_by_label(re.compile("Reason for")).fill("confirmed with the customer")
    row.get_by_role("button", name="Approve").click()
    row.get_by_text("approved", exact=True).wait_for()
    row.get_by_role("button", name="Promote").click()
    row.get_by_text("Promoted to memory item").wait_for()
    target.refresh_from_db()
    assert target.status == "promoted"
    assert MemoryItem.objects.get(pk=target.promoted_item_id).content == "Prefers morning calls"
    # The other rows were not reloaded or touched.
    assert page.locator("tr.candidate-row").count() == 3
    screenshot(page, "candidates")


def test_place_and_release_a_legal_hold_with_two_officers(page, world):
    f.member(world.tenant, Role.SECURITY_OFFICER, username="officer2")
    log_in(page, "officer")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Holds & erasure").click()
    page.get_by_label("Target").select_option("subject")
    page.get_by_label("Subject (user id)").fill("jane")
    page.get_by_label("Reason", exact=True).fill("litigation 2026-17")
    page.get_by_role("button", name="Place hold").click()
    page.get_by_text("Legal hold placed on subject.").wait_for()
    hold = LegalHold.objects.get()
    row = page.locator(f"#hold-{hold.pk}")
    # The officer who placed it cannot release it.
    row.get_by_label("Release reason").fill("done")
    row.get_by_role("button", name="Release").click()
    page.get_by_role("alert").filter(has_text="second security officer").wait_for()
    hold.refresh_from_db()
    assert hold.released_at is None
    log_out(page)
    log_in(page, "officer2")
    page.goto("/holds/")
    row = page.locator(f"#hold-{hold.pk}")
    row.get_by_label("Release reason").fill("case closed")
    row.get_by_role("button", name="Release").click()
    page.get_by_text("Legal hold released.").wait_for()
    hold.refresh_from_db()
    assert hold.released_by.username == "officer2"
    page.get_by_label("Show").select_option("all")
    page.wait_for_url(re.compile(r"state=all"))
    page.locator(f"#hold-{hold.pk}").get_by_text("case closed").wait_for()
    screenshot(page, "legal-holds")


@pytest.mark.worker
def test_run_an_erasure_and_watch_it_complete(page, world, worker_factory):
    from memory.enforcement import system_access
    from memory.services.items import MemoryDraft, memory_remember

    for text in ("Jane's card ends 4242", "Jane moved to Lyon"):
        memory_remember(access=system_access(world.agent), draft=MemoryDraft(content=text, user_id="jane"))
    worker_factory()
    log_in(page, "officer")
    page.goto("/erasure/")
    page.get_by_label("Subject (user id)").fill("jane")
    page.get_by_label("Reason").fill("GDPR art. 17 request #88")
    page.get_by_role("button", name="Request erasure").click()
    page.get_by_role("link", name="Follow its progress").click()
    # The progress fragment polls until the worker has finished.
    page.locator("#erasure-progress").get_by_text("completed", exact=True).wait_for(timeout=120000)
    page.get_by_role("heading", name="Certificate").wait_for()
    request = ErasureRequest.objects.get()
    assert request.status == "completed" and request.subject == ""
    assert not MemoryItem.objects.filter(user_id="jane").exists()
    assert request.certificate["deleted"]["memory_item"] == 2
    with page.expect_download() as download:
        page.get_by_role("link", name="Download the certificate (JSON)").click()
    assert download.value.suggested_filename == f"erasure-certificate-{request.pk}.json"
    screenshot(page, "erasure")


def test_edit_a_policy_and_restore_an_old_version(page, world):
    log_in(page, "owner")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Policies").click()
    page.get_by_role("link", name="support-bot").click()
    page.get_by_label("Recall top k").fill("12")
    page.get_by_label("Change note").fill("wider recall")
    page.get_by_role("button", name="Save new version").click()
    page.get_by_text("Saved as version 1.").wait_for()
    page.get_by_label("Recall top k").fill("4")
    page.get_by_label("Retention (days)", exact=True).fill("30")
    page.get_by_label("Change note").fill("tighter, with retention")
    page.get_by_role("button", name="Save new version").click()
    page.get_by_text("Saved as version 2.").wait_for()
    page.get_by_label("From version").select_option("1")
    page.get_by_label("To version").select_option("2")
    page.get_by_role("button", name="Compare").click()
    diff = page.locator("#policy-diff")
    diff.get_by_text("recall_top_k").wait_for()
    assert diff.get_by_text("retention_days").is_visible()
    screenshot(page, "policy-editor")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Restore v1").click()
    page.get_by_text("Version 1 restored as version 3.").wait_for()
    latest = AgentPolicyVersion.objects.filter(agent=world.agent).order_by("-version").first()
    assert (
        latest.version == 3
        and latest.policy["recall_top_k"] == 12
        and latest.policy["retention_days"] is None
    )
    assert page.get_by_label("Recall top k").input_value() == "12"
