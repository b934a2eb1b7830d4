"""Write services: dedup, policy enforcement, personal data, update/forget/purge, batch, idempotency."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from core.errors import ApiError, Conflict, InvalidInput, NotFound, Unprocessable
from governance.services.policies import policy_version_create
from memory.embeddings import check_dimension, embed_texts, packaged_model_path
from memory.enforcement import PolicyViolation, system_access
from memory.models import MemoryHistory, MemoryItem, SessionMessage
from memory.services.items import (
    MemoryDraft,
    memory_forget,
    memory_purge,
    memory_remember,
    memory_remember_batch,
    memory_update,
)
from memory.services.sessions import session_message_append
from memory.tests.conftest import remember


def _with_policy(world, **policy):
    policy_version_create(agent=world.agent, policy=policy)
    return system_access(world.agent)


# --- dedup --------------------------------------------------------------------------


def test_exact_duplicate_returns_the_existing_item_and_unions_scopes(access):
    first = remember(access, "Prefers  e-mail over phone calls", scope="user")
    again = remember(access, "prefers e-mail over PHONE calls", scope="agent")
    assert again.deduplicated and not again.created
    assert again.item.pk == first.item.pk
    assert MemoryItem.objects.get(pk=first.item.pk).scopes == ["user", "agent"]
    assert MemoryItem.objects.count() == 1
    events = list(MemoryHistory.objects.filter(item_id=first.item.pk).values_list("event", flat=True))
    assert events == ["created", "scope_added"]


def test_same_content_under_other_scope_keys_is_a_new_item(access):
    remember(access, "Prefers e-mail", user_id="cust-1")
    other = remember(access, "Prefers e-mail", user_id="cust-2")
    assert other.created
    assert MemoryItem.objects.count() == 2


def test_expired_or_retired_items_never_absorb_a_new_write(access):
    expired = remember(access, "Office closes at six").item
    MemoryItem.objects.filter(pk=expired.pk).update(retention_until=timezone.now() - timedelta(seconds=1))
    assert remember(access, "Office closes at six").created
    retired = remember(access, "Office opens at nine").item
    MemoryItem.objects.filter(pk=retired.pk).update(invalid_at=timezone.now() - timedelta(seconds=1))
    assert remember(access, "Office opens at nine").created


def test_near_duplicates_merge_only_when_enabled(access, settings):
    remember(access, "The customer prefers dark mode in the dashboard")
    settings.FEDMEM_DEDUP_NEAR_THRESHOLD = 0.0
    assert remember(access, "The customer likes dark mode in the dashboard").created
    settings.FEDMEM_DEDUP_NEAR_THRESHOLD = 0.9
    outcome = remember(access, "The customer really likes dark mode in the dashboard")
    assert outcome.deduplicated


def test_a_stricter_duplicate_raises_the_classification(access):
    first = remember(access, "Quarterly numbers are ready", classification="internal").item
    remember(access, "Quarterly numbers are ready", classification="confidential")
    assert MemoryItem.objects.get(pk=first.pk).classification == 2


# --- policy -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "draft", "rule"),
    [
        ({"write_scopes": ["agent"]}, {"scope": "user"}, "write_scopes"),
        ({"allowed_kinds": ["fact"]}, {"kind": "preference"}, "allowed_kinds"),
        ({"max_classification": "internal"}, {"classification": "restricted"}, "max_classification"),
        ({"retention_days": 30}, {"retention_days": 90}, "retention_days"),
        ({"write_scopes": ["global"]}, {"scope": "global"}, "global_access"),
        ({"write_scopes": ["team"], "teams": ["blue"]}, {"scope": "team", "team": "red"}, "teams"),
        ({"modes": {"session": False}}, {"scope": "session", "session_id": "s1"}, "modes.session"),
    ],
)
def test_a_write_that_breaks_the_policy_is_refused_and_nothing_is_stored(world, policy, draft, rule):
    access = _with_policy(world, **policy)
    with pytest.raises(PolicyViolation) as caught:
        remember(access, "Something worth remembering", **draft)
    assert caught.value.rule == rule
    assert caught.value.status_code == 403 and caught.value.code == "memory_policy_violation"
    assert rule in caught.value.message
    assert MemoryItem.objects.count() == 0
    assert MemoryHistory.objects.count() == 0


def test_personal_data_is_detected_and_flagged(access):
    item = remember(access, "Reach Dana at dana.whitfield@example.org or +1 415 555 0134").item
    assert item.personal_data
    assert "EMAIL_ADDRESS" in item.personal_data_types
    assert "dana" not in " ".join(item.personal_data_types).lower()  # types only, never the values
    assert not remember(access, "Prefers window seats on long flights").item.personal_data


def test_personal_data_is_refused_when_the_policy_forbids_it(world):
    access = _with_policy(world, allow_personal_data=False)
    with pytest.raises(PolicyViolation) as caught:
        remember(access, "Card on file: 4111 1111 1111 1111")
    assert caught.value.rule == "allow_personal_data"
    assert caught.value.details["personal_data_types"] == ["CREDIT_CARD"]
    assert MemoryItem.objects.count() == 0
    assert remember(access, "Prefers the annual plan").created


def test_policy_defaults_fill_retention_and_hold(world):
    access = _with_policy(world, retention_days=7, legal_hold=True)
    item = remember(access, "Ticket 5521 escalated to tier two").item
    assert item.legal_hold
    assert timedelta(days=6) < item.retention_until - timezone.now() <= timedelta(days=7)


@pytest.mark.parametrize(
    ("draft", "field"),
    [
        ({"content": "   "}, "content"),
        ({"content": "x" * (16 * 1024 + 1)}, "content"),
        ({"content": "é" * (8 * 1024 + 1)}, "content"),  # 16 KB is counted in UTF-8 bytes
        ({"content": "ok", "scope": "session"}, "session_id"),
        ({"content": "ok", "scope": "team"}, "team"),
        ({"content": "ok", "scope": "user", "user_id": ""}, "user_id"),
        ({"content": "ok", "scope": "galaxy"}, "scope"),
        ({"content": "ok", "kind": "rumour"}, "kind"),
        ({"content": "ok", "classification": "secret"}, "classification"),
        ({"content": "ok", "metadata": {"k": "a\x00b"}}, "metadata"),
    ],
)
def test_invalid_drafts_name_the_field(access, draft, field):
    draft.setdefault("user_id", "cust-1")
    with pytest.raises(InvalidInput) as caught:
        memory_remember(access=access, draft=MemoryDraft(**draft))
    assert field in caught.value.details["fields"]
    assert MemoryItem.objects.count() == 0


def test_content_of_exactly_16_kb_is_accepted(access):
    assert remember(access, "y" * 16 * 1024).created


# --- update, forget, purge ----------------------------------------------------------


def test_update_re_embeds_keeps_created_at_and_writes_history(access):
    item = remember(access, "The staging cluster runs on version 1.27").item
    before = MemoryItem.objects.get(pk=item.pk)
    updated = memory_update(
        access=access, item_id=item.pk, content="The staging cluster runs on version 1.29"
    )
    after = MemoryItem.objects.get(pk=item.pk)
    assert after.created_at == before.created_at
    assert after.updated_at > before.updated_at
    assert not np.allclose(after.embedding, before.embedding)
    assert np.allclose(after.embedding, embed_texts([updated.content])[0], atol=1e-5)
    history = MemoryHistory.objects.filter(item_id=item.pk, event="updated").get()
    assert (history.old_content, history.new_content) == (before.content, after.content)
    assert history.actor_type == "system"


def test_update_refuses_personal_data_when_the_policy_forbids_it(world):
    access = _with_policy(world, allow_personal_data=False)
    item = remember(access, "Customer asked about invoices").item
    with pytest.raises(PolicyViolation):
        memory_update(access=access, item_id=item.pk, content="Customer is Jane Doe, jane@example.com")
    assert MemoryItem.objects.get(pk=item.pk).content == "Customer asked about invoices"


def test_held_items_cannot_be_changed_or_forgotten(access):
    item = remember(access, "Contract dispute notes", legal_hold=True).item
    with pytest.raises(Conflict) as caught:
        memory_forget(access=access, item_id=item.pk)
    assert caught.value.code == "memory_legal_hold"
    with pytest.raises(Conflict):
        memory_update(access=access, item_id=item.pk, content="rewritten")
    assert MemoryItem.objects.get(pk=item.pk).content == "Contract dispute notes"


def test_another_agents_item_is_not_found(access, world):
    item = remember(access, "owned by support-bot").item
    sibling = system_access(world.sibling)
    with pytest.raises(NotFound):
        memory_forget(access=sibling, item_id=item.pk)
    with pytest.raises(NotFound):
        memory_forget(access=access, item_id="not-a-uuid")


def test_purge_needs_confirmation(access):
    remember(access, "kept")
    with pytest.raises(InvalidInput) as caught:
        memory_purge(access=access, scope="user", confirm=False)
    assert caught.value.code == "confirmation_required"
    assert MemoryItem.objects.count() == 1


def test_purge_reports_deleted_unscoped_and_held(access, world):
    remember(access, "one", scope="user")
    remember(access, "two", scope="user")
    remember(access, "held", scope="user", legal_hold=True)
    both = remember(access, "shared", scope="user").item
    remember(access, "shared", scope="agent")  # same keys: widens scopes
    remember(access, "agent only", scope="agent")
    other = remember(system_access(world.sibling), "sibling's", scope="user").item

    report = memory_purge(access=access, scope="user", confirm=True)

    assert (report.deleted, report.unscoped, report.kept_legal_hold) == (2, 1, 1)
    remaining = MemoryItem.objects.get(pk=both.pk)
    assert (remaining.scope, remaining.scopes) == ("agent", ["agent"])
    assert MemoryItem.objects.filter(pk=other.pk).exists()
    assert set(MemoryItem.objects.values_list("content", flat=True)) == {
        "held",
        "shared",
        "agent only",
        "sibling's",
    }
    assert MemoryHistory.objects.filter(event="purged").count() == 2
    assert MemoryHistory.objects.filter(event="scope_removed", item_id=both.pk).count() == 1


def test_purging_a_session_clears_its_messages_too(access):
    remember(access, "session fact", scope="session", session_id="s1")
    remember(access, "other session", scope="session", session_id="s2")
    session_message_append(access=access, session_id="s1", role="user", content="hello")
    session_message_append(access=access, session_id="s2", role="user", content="hi")
    report = memory_purge(access=access, scope="session", session_id="s1", confirm=True)
    assert (report.deleted, report.session_messages_deleted) == (1, 1)
    assert list(SessionMessage.objects.values_list("session_id", flat=True)) == ["s2"]


# --- batch ----------------------------------------------------------------------------


def test_batch_keeps_good_items_when_one_is_bad(access):
    drafts = [
        MemoryDraft(content="Deploy 88 rolled back", user_id="u"),
        MemoryDraft(content="", user_id="u"),
        MemoryDraft(content="Deploy 88 rolled back", user_id="u"),  # duplicate inside the batch
        MemoryDraft(content="Prefers Slack", user_id="u", kind="preference"),
        InvalidInput("bad item", details={"fields": {"scope": ["bad"]}}),
    ]
    results = memory_remember_batch(access=access, drafts=drafts)
    assert [r.status for r in results] == ["created", "error", "deduplicated", "created", "error"]
    assert results[2].outcome.item.pk == results[0].outcome.item.pk
    assert MemoryItem.objects.count() == 2
    assert "content" in results[1].error.details["fields"]


def test_batch_size_is_bounded(access):
    with pytest.raises(InvalidInput):
        memory_remember_batch(access=access, drafts=[])
    with pytest.raises(InvalidInput):
        memory_remember_batch(
            access=access, drafts=[MemoryDraft(content=f"m{i}", user_id="u") for i in range(101)]
        )


# --- idempotency ----------------------------------------------------------------------


def test_idempotency_key_replays_the_same_item(access):
    draft = MemoryDraft(content="Renewal due in March", user_id="cust-9")
    first = memory_remember(access=access, draft=draft, idempotency_key="k-1")
    again = memory_remember(access=access, draft=draft, idempotency_key="k-1")
    assert again.item.pk == first.item.pk
    assert again.replayed and again.created
    assert MemoryItem.objects.count() == 1


def test_idempotency_key_with_another_body_is_422(access):
    memory_remember(access=access, draft=MemoryDraft(content="A", user_id="u"), idempotency_key="k-2")
    with pytest.raises(Unprocessable) as caught:
        memory_remember(access=access, draft=MemoryDraft(content="B", user_id="u"), idempotency_key="k-2")
    assert caught.value.code == "idempotency_key_reused"
    assert MemoryItem.objects.count() == 1


def test_idempotency_keys_are_per_agent(access, world):
    memory_remember(access=access, draft=MemoryDraft(content="A", user_id="u"), idempotency_key="k")
    sibling = memory_remember(
        access=system_access(world.sibling), draft=MemoryDraft(content="A", user_id="u"), idempotency_key="k"
    )
    assert sibling.created and not sibling.replayed


def test_a_refused_write_does_not_burn_its_idempotency_key(world):
    access = _with_policy(world, allowed_kinds=["fact"])
    with pytest.raises(ApiError):
        memory_remember(
            access=access, draft=MemoryDraft(content="A", kind="preference", user_id="u"), idempotency_key="k"
        )
    access = _with_policy(world)
    assert memory_remember(
        access=access, draft=MemoryDraft(content="A", kind="preference", user_id="u"), idempotency_key="k"
    ).created


# --- embeddings -----------------------------------------------------------------------


def test_the_packaged_model_matches_the_column():
    check_dimension(packaged_model_path(), 384)
    assert embed_texts(["hello", "world"]).shape == (2, 384)


def test_a_model_of_another_dimension_is_refused(tmp_path):
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "modules.json").write_text(
        '[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},'
        ' {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]'
    )
    (tmp_path / "1_Pooling" / "config.json").write_text('{"word_embedding_dimension": 768}')
    with pytest.raises(ImproperlyConfigured, match="768"):
        check_dimension(tmp_path, 384)
    with pytest.raises(ImproperlyConfigured, match="not a directory"):
        check_dimension(tmp_path / "missing", 384)


def test_personal_data_detection_never_reaches_for_the_network():
    import tldextract.tldextract as tx

    from memory.pii import get_analyzer

    get_analyzer()
    assert tx.TLD_EXTRACTOR.suffix_list_urls == ()


def test_expired_items_cannot_be_changed_by_id(access):
    item = remember(access, "Old promo code SPRING").item
    MemoryItem.objects.filter(pk=item.pk).update(retention_until=timezone.now() - timedelta(seconds=1))
    with pytest.raises(NotFound):
        memory_update(access=access, item_id=item.pk, content="New promo code SUMMER")
    with pytest.raises(NotFound):
        memory_forget(access=access, item_id=item.pk)
