"""Rewriting the audit trail through the database, as someone with the database
credentials but not the audit key would: every rewrite is caught by
``fedmem_audit_verify`` and by the console's audit page."""

from __future__ import annotations

import hashlib
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from governance.models import AuditChainHead, AuditEvent
from governance.services.agents import api_key_create
from governance.services.audit import _canonical, audit_anchor_export, audit_verify


@pytest.fixture
def trail(world, settings, tmp_path):
    settings.FEDMEM_AUDIT_ANCHOR_DIR = str(tmp_path / "anchors")
    for i in range(4):
        api_key_create(tenant=world.tenant, agent=world.agent, name=f"k{i}")
    chain = str(world.tenant.pk)
    assert audit_verify(chain=chain).ok
    return chain


def _raw(sql: str, params: list) -> None:
    # The trigger stands in the way of the app; a database superuser (or the table
    # owner) switches it off for the session, exactly the bypass the key defeats.
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute(sql, params)
        cursor.execute("SET LOCAL session_replication_role = origin")


def _unkeyed(event: AuditEvent) -> str:
    return hashlib.sha256(_canonical(event)).hexdigest()


def _verify_command(chain: str) -> str:
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("fedmem_audit_verify", "--chain", chain, stdout=out)
    return out.getvalue()


def test_an_edited_event_with_recomputed_hashes_is_caught(world, trail, client):
    events = list(AuditEvent.objects.filter(chain=trail).order_by("seq"))
    target = events[2]
    target.data = {**target.data, "prefix": "forged"}
    # Recompute the hash of the edited event and of every later one, and the head,
    # as the unkeyed chain allowed.
    prev = target.prev_hash
    for event in events[2:]:
        if event.pk == target.pk:
            event.data = target.data
        event.prev_hash = prev
        event.hash = _unkeyed(event)
        _raw(
            "UPDATE governance_auditevent SET data = %s, prev_hash = %s, hash = %s WHERE id = %s",
            [json.dumps(event.data), event.prev_hash, event.hash, event.pk],
        )
        prev = event.hash
    _raw("UPDATE governance_auditchainhead SET hash = %s WHERE chain = %s", [prev, trail])

    result = audit_verify(chain=trail)
    assert not result.ok and result.broken_at == target.seq
    assert "not keyed" in result.reason
    assert "BROKEN at event" in _verify_command(trail)
    client.force_login(world.auditor)
    page = client.get("/audit/")
    assert page.status_code == 200 and b"not keyed" in page.content


def test_a_deleted_tail_with_a_moved_head_is_caught(world, trail):
    events = list(AuditEvent.objects.filter(chain=trail).order_by("seq"))
    keep = events[-3]
    _raw("DELETE FROM governance_auditevent WHERE chain = %s AND seq > %s", [trail, keep.seq])
    _raw(
        "UPDATE governance_auditchainhead SET seq = %s, hash = %s WHERE chain = %s",
        [keep.seq, keep.hash, trail],
    )
    result = audit_verify(chain=trail)
    assert not result.ok and "moved without the audit key" in result.reason
    assert "BROKEN" in _verify_command(trail)


def test_a_deleted_tail_behind_an_anchor_is_caught_even_with_the_head_gone(world, trail):
    audit_anchor_export()
    events = list(AuditEvent.objects.filter(chain=trail).order_by("seq"))
    _raw("DELETE FROM governance_auditevent WHERE chain = %s AND seq > %s", [trail, events[-3].seq])
    _raw("DELETE FROM governance_auditchainhead WHERE chain = %s", [trail])
    result = audit_verify(chain=trail)
    assert not result.ok and "head is missing" in result.reason
    # A whole chain dropped from the database is still listed, through its anchor.
    _raw("DELETE FROM governance_auditevent WHERE chain = %s", [trail])
    assert not audit_verify(chain=trail).ok
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("fedmem_audit_verify", stdout=out)
    assert f"{trail}: BROKEN" in out.getvalue()


def test_an_untouched_trail_verifies_and_anchors(world, trail):
    out = io.StringIO()
    call_command("fedmem_audit_verify", "--anchor", stdout=out)
    assert f"{trail}: ok" in out.getvalue() and "Anchored" in out.getvalue()
    assert audit_verify(chain=trail).ok
    assert AuditChainHead.objects.get(pk=trail).mac
