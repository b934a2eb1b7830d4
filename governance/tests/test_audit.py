"""The audit trail: append-only in the database, hash-chained, verifiable, auditor-only."""

from __future__ import annotations

import io
import threading

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction
from rest_framework.test import APIClient

from conftest import assert_error
from governance.models import AuditEvent
from governance.services.agents import api_key_create, api_key_revoke
from governance.services.audit import audit_record, audit_verify


def chain(world) -> str:
    return str(world.tenant.pk)


def actions(world) -> list[str]:
    return list(
        AuditEvent.objects.filter(chain=chain(world)).order_by("seq").values_list("action", flat=True)
    )


def test_identity_actions_are_audited(world, as_user):
    client = as_user(world.owner)
    key = client.post(f"/v1/agents/{world.agent.pk}/keys", {"name": "k"}, format="json").json()
    client.delete(f"/v1/agents/{world.agent.pk}/keys/{key['id']}")
    client.put(
        f"/v1/agents/{world.agent.pk}/grants",
        {"user_id": world.teammate.pk, "permissions": ["viewer"]},
        format="json",
    )
    trail = actions(world)
    assert trail[:2] == ["agent.created", "agent.created"]  # world's two agents
    assert trail[-4:] == ["api_key.created", "api_key.created", "api_key.revoked", "agent.permission.granted"]
    revoked = AuditEvent.objects.get(chain=chain(world), action="api_key.revoked")
    assert revoked.actor_label == "owner" and revoked.data == {"prefix": key["display_prefix"][3:]}
    # The secret never reaches the trail.
    assert all(key["secret"] not in str(e.data) for e in AuditEvent.objects.all())
    assert audit_verify(chain=chain(world)).ok


def test_a_failed_action_leaves_no_event(world, as_user):
    before = AuditEvent.objects.count()
    as_user(world.owner).post("/v1/agents", {"name": "support-bot"}, format="json")  # 409
    assert AuditEvent.objects.count() == before + 1  # only the key of as_user itself


def test_database_refuses_update_and_delete(world):
    event = AuditEvent.objects.filter(chain=chain(world)).first()
    # The app role holds only SELECT and INSERT; the append-only trigger refuses the rest
    # to anyone else (the superuser's own rewrites: test_audit_rewrite.py).
    refused = "append-only|permission denied"
    with pytest.raises(DatabaseError, match=refused), transaction.atomic():
        AuditEvent.objects.filter(pk=event.pk).update(action="tampered")
    with pytest.raises(DatabaseError, match=refused), transaction.atomic():
        AuditEvent.objects.filter(pk=event.pk).delete()
    with pytest.raises(DatabaseError, match=refused), transaction.atomic(), connection.cursor() as c:
        c.execute("DELETE FROM governance_auditevent")
    assert audit_verify(chain=chain(world)).ok


def _bypass(sql: str, params: list) -> None:
    """What the database superuser could do: switch the trigger off and rewrite. It
    runs on its own connection, so the tests that use it commit their rows."""
    from core.database import superuser_connection

    with superuser_connection(connection.settings_dict) as su, su.transaction():
        su.execute("SET LOCAL session_replication_role = replica")
        su.execute(sql, params)


def _trail(world, n: int = 5) -> None:
    for i in range(n):
        with transaction.atomic():
            audit_record(tenant=world.tenant, actor=world.admin, action="test.event", data={"i": i})


@pytest.mark.django_db(transaction=True)
def test_tampered_content_is_detected_and_located(world):
    _trail(world)
    victim = AuditEvent.objects.get(chain=chain(world), action="test.event", data__i=2)
    _bypass("UPDATE governance_auditevent SET data = %s WHERE id = %s", ['{"i": 99}', victim.pk])
    result = audit_verify(chain=chain(world))
    assert not result.ok and result.broken_at == victim.seq and "hash" in result.reason


@pytest.mark.django_db(transaction=True)
def test_removed_row_in_the_middle_is_detected(world):
    _trail(world)
    victim = AuditEvent.objects.get(chain=chain(world), action="test.event", data__i=1)
    _bypass("DELETE FROM governance_auditevent WHERE id = %s", [victim.pk])
    result = audit_verify(chain=chain(world))
    assert not result.ok and "missing" in result.reason


@pytest.mark.django_db(transaction=True)
def test_removed_rows_at_the_end_are_detected(world):
    _trail(world)
    last = AuditEvent.objects.filter(chain=chain(world)).order_by("-seq").first()
    _bypass("DELETE FROM governance_auditevent WHERE id = %s", [last.pk])
    result = audit_verify(chain=chain(world))
    assert not result.ok and "end of the chain" in result.reason


@pytest.mark.django_db(transaction=True)
def test_rehashed_forgery_breaks_the_next_link(world):
    """Recomputing a tampered row's own hash is not enough: the next row no longer links."""
    _trail(world)
    from governance.services.audit import event_hash

    victim = AuditEvent.objects.get(chain=chain(world), action="test.event", data__i=2)
    victim.data = {"i": 42}
    forged = event_hash(victim)
    _bypass(
        "UPDATE governance_auditevent SET data = %s, hash = %s WHERE id = %s",
        ['{"i": 42}', forged, victim.pk],
    )
    result = audit_verify(chain=chain(world))
    assert not result.ok and result.broken_at == victim.seq + 1


@pytest.mark.django_db(transaction=True)
def test_audit_record_outside_a_transaction_is_refused(world):
    with pytest.raises(RuntimeError, match="inside the transaction"):
        audit_record(tenant=world.tenant, actor=None, action="x")


@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_keep_one_valid_chain(world):
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(10):
                with transaction.atomic():
                    audit_record(
                        tenant=world.tenant, actor=None, action="test.parallel", data={"w": n, "i": i}
                    )
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert AuditEvent.objects.filter(chain=chain(world), action="test.parallel").count() == 40
    result = audit_verify(chain=chain(world))
    assert result.ok, result


@pytest.mark.django_db(transaction=True)
def test_verify_command(world):
    out = io.StringIO()
    call_command("fedmem_audit_verify", stdout=out)
    assert f"{chain(world)}: ok" in out.getvalue()
    _trail(world, 2)
    last = AuditEvent.objects.filter(chain=chain(world)).order_by("-seq").first()
    _bypass("UPDATE governance_auditevent SET action = 'x' WHERE id = %s", [last.pk])
    with pytest.raises(CommandError):
        call_command("fedmem_audit_verify", stdout=io.StringIO())


def test_audit_api_is_auditor_only(world, as_user, as_agent):
    for user in (world.owner, world.admin, world.officer):
        assert_error(as_user(user).get("/v1/audit/events"), 403)
        assert_error(as_user(user).get("/v1/audit/verify"), 403)
    assert_error(as_agent(world.agent).get("/v1/audit/events"), 403)
    assert_error(APIClient().get("/v1/audit/events"), 401)
    body = as_user(world.auditor).get("/v1/audit/events").json()
    assert {e["action"] for e in body["results"]} >= {"agent.created"}
    assert as_user(world.auditor).get("/v1/audit/verify").json()["ok"] is True


def test_audit_api_filters_and_tenant_boundary(world, as_user):
    client = as_user(world.auditor)
    created = client.get("/v1/audit/events", {"action": "agent."}).json()["results"]
    assert created and all(e["action"].startswith("agent.") for e in created)
    names = {e["data"].get("name") for e in created}
    assert "globex-bot" not in names  # another tenant's chain
    by_actor = client.get("/v1/audit/events", {"actor": "tadmin"}).json()["results"]
    assert {e["actor"]["label"] for e in by_actor} == {"tadmin"}
    assert_error(client.get("/v1/audit/events", {"since": "yesterday"}), 400, "validation_error")
    assert_error(client.get("/v1/audit/events", {"actor_type": "robot"}), 400, "validation_error")


def test_audit_list_query_count_is_pinned(world, as_user, django_assert_num_queries):
    client = as_user(world.auditor)
    _trail(world, 30)
    with django_assert_num_queries(4):  # key, last_used, roles, page
        response = client.get("/v1/audit/events", {"limit": 20})
    assert len(response.json()["results"]) == 20


def test_audit_console_page(client, world):
    client.force_login(world.auditor)
    page = client.get("/audit/")
    assert page.status_code == 200 and b"chain verified" in page.content and b"agent.created" in page.content
    fragment = client.get("/audit/", {"action": "api_key"}, HTTP_HX_REQUEST="true")
    assert b"<html" not in fragment.content
    client.force_login(world.owner)
    assert client.get("/audit/").status_code == 404


def test_api_key_revoke_twice_records_once(world):
    key, _ = api_key_create(tenant=world.tenant, agent=world.agent, name="k")
    api_key_revoke(key=key, actor=None)
    api_key_revoke(key=key, actor=None)
    assert actions(world).count("api_key.revoked") == 1
