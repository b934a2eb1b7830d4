"""Rewriting the audit trail through the database.

The app connects as the role ``fedmem`` (core.database), which may only SELECT and
INSERT audit events: its rewrites are refused by PostgreSQL, and what it can still
do (append a forged event, move the head) is caught by the keyed chain. The
database superuser can rewrite anything, recomputing the hashes; the audit key is
not in the database, so ``fedmem_audit_verify`` and the console's audit page catch
that too. The superuser rewrites run on a connection of their own, so these tests
commit their data (``transaction=True``)."""

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

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def trail(world, settings, tmp_path):
    settings.FEDMEM_AUDIT_ANCHOR_DIR = str(tmp_path / "anchors")
    for i in range(4):
        api_key_create(tenant=world.tenant, agent=world.agent, name=f"k{i}")
    chain = str(world.tenant.pk)
    assert audit_verify(chain=chain).ok
    return chain


def _raw(sql: str, params: list) -> None:
    """As the database superuser, on its own connection: switch the append-only
    trigger off for the transaction and rewrite, the bypass the key defeats."""
    from core.database import superuser_connection

    with superuser_connection(connection.settings_dict) as su, su.transaction():
        su.execute("SET LOCAL session_replication_role = replica")
        su.execute(sql, params)


def _unkeyed(event: AuditEvent) -> str:
    return hashlib.sha256(_canonical(event)).hexdigest()


def _verify_command(chain: str) -> str:
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("fedmem_audit_verify", "--chain", chain, stdout=out)
    return out.getvalue()


def test_an_event_edited_by_the_superuser_with_recomputed_hashes_is_caught(world, trail, client):
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


def test_a_tail_deleted_by_the_superuser_with_a_moved_head_is_caught(world, trail):
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


def _as_app(statement: str, params: list | None = None) -> str:
    """Run ``statement`` on the app's own connection (role ``fedmem``); the error
    PostgreSQL answers, or '' when it ran."""
    from django.db import DatabaseError, transaction

    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, params)
    except DatabaseError as exc:
        return str(exc)
    return ""


def test_the_app_role_can_neither_rewrite_the_trail_nor_switch_its_trigger_off(world, trail):
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user")
        assert cursor.fetchone() == ("fedmem", False)
    event = AuditEvent.objects.filter(chain=trail).order_by("seq")[1]
    refused = {
        "replica": _as_app("SET LOCAL session_replication_role = replica"),
        "update": _as_app("UPDATE governance_auditevent SET data = '{}' WHERE id = %s", [event.pk]),
        "delete": _as_app("DELETE FROM governance_auditevent WHERE id = %s", [event.pk]),
        "disable": _as_app("ALTER TABLE governance_auditevent DISABLE TRIGGER audit_event_append_only"),
        "drop": _as_app("DROP TRIGGER audit_event_append_only ON governance_auditevent"),
        "replace": _as_app(
            "CREATE OR REPLACE FUNCTION fedmem_audit_refuse_change() RETURNS trigger "
            "AS $$ BEGIN RETURN NEW; END; $$ LANGUAGE plpgsql"
        ),
        "owner": _as_app("ALTER TABLE governance_auditevent OWNER TO fedmem"),
    }
    assert refused["replica"].startswith('permission denied to set parameter "session_replication_role"')
    assert all("permission denied" in why or "must be owner" in why for why in refused.values()), refused
    assert AuditEvent.objects.get(pk=event.pk).data == event.data
    assert audit_verify(chain=trail).ok


def test_what_the_app_role_can_still_do_is_caught_by_the_key(world, trail):
    """It owns the chain head and may insert: a forged event appended with an unkeyed
    hash, and the head moved onto it, are detected."""
    last = AuditEvent.objects.filter(chain=trail).order_by("-seq").first()
    forged = AuditEvent(
        chain=trail,
        seq=last.seq + 1,
        tenant_id=last.tenant_id,
        actor_type="system",
        actor_label="system",
        action="legal_hold.released",
        data={"forged": True},
        created_at=last.created_at,
        prev_hash=last.hash,
    )
    forged.hash = _unkeyed(forged)
    assert not _as_app(
        "INSERT INTO governance_auditevent (chain, seq, tenant_id, actor_type, actor_id, actor_label, action,"
        " target_type, target_id, data, created_at, prev_hash, hash)"
        " VALUES (%s, %s, %s, 'system', '', 'system', %s, '', '', %s, %s, %s, %s)",
        [
            trail,
            forged.seq,
            forged.tenant_id,
            forged.action,
            json.dumps(forged.data),
            forged.created_at,
            forged.prev_hash,
            forged.hash,
        ],
    )
    assert not _as_app(
        "UPDATE governance_auditchainhead SET seq = %s, hash = %s WHERE chain = %s",
        [forged.seq, forged.hash, trail],
    )
    result = audit_verify(chain=trail)
    assert not result.ok and result.broken_at == forged.seq and "not keyed" in result.reason


def test_the_production_seal_also_refuses_truncate(db):
    """The test database grants TRUNCATE for the flush between transactional tests;
    the production seal does not. Checked on a scratch database with the real
    trigger migration, sealed as in production."""
    import importlib
    import uuid

    import psycopg
    from psycopg import sql

    from core.database import APP_ROLE, seal, superuser_connection

    params = connection.settings_dict
    name = f"seal_{uuid.uuid4().hex[:12]}"
    trigger = importlib.import_module("governance.migrations.0003_audit_append_only").FORWARD
    app = {"host": params["HOST"], "port": params["PORT"] or None, "user": APP_ROLE}
    with psycopg.connect(dbname=params["NAME"], autocommit=True, **app) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        with psycopg.connect(dbname=name, autocommit=True, **app) as conn:
            conn.execute("CREATE TABLE governance_auditevent (id bigint PRIMARY KEY, data text)")
            conn.execute(trigger)
        with superuser_connection({**params, "NAME": name}) as su:
            assert seal(su, truncate=False)
        with psycopg.connect(dbname=name, autocommit=True, **app) as conn:
            conn.execute("INSERT INTO governance_auditevent VALUES (1, 'x')")
            for statement in (
                "TRUNCATE governance_auditevent",
                "UPDATE governance_auditevent SET data = 'y'",
                "DELETE FROM governance_auditevent",
                "ALTER TABLE governance_auditevent DISABLE TRIGGER ALL",
                "SET session_replication_role = replica",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(statement)
            assert conn.execute("SELECT data FROM governance_auditevent").fetchall() == [("x",)]
    finally:
        with psycopg.connect(dbname=params["NAME"], autocommit=True, **app) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
