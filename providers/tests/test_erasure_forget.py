"""Erasure asks every engine that can forget, with one status per engine; holds stop it."""

from __future__ import annotations

import uuid

from governance.models import AuditEvent
from governance.services.audit import subject_hash
from governance.services.erasure import erasure_request_create, erasure_run
from governance.services.holds import legal_hold_place
from memory.tests.test_reliability_holds import canary_hits
from providers.models import ProviderWrite
from providers.tests.engines import custom_engine, declare

RECORDS = [
    {"id": "r1", "kind": "fact", "text": "Jane prefers morning calls"},
    {"id": "r2", "kind": "fact", "text": "Jane lives in Lisbon"},
]


def _erase(world, **fields):
    fields.setdefault("scope", "agent")
    fields.setdefault("agent", world.agent)
    request = erasure_request_create(
        tenant=world.tenant, actor=world.officer, subject="jane", reason="art. 17", **fields
    )
    return erasure_run(request_id=request.pk)


def _deletes(server) -> list[str]:
    return [r.path for r in server.requests if r.method == "DELETE"]


def test_each_engine_is_asked_to_forget_and_reports(world, local_server):
    server = custom_engine(RECORDS, server=local_server())
    declare("crm", server.url)
    gone = custom_engine(RECORDS, server=local_server())
    declare("gone", gone.url)
    gone.stop()
    certificate = _erase(world).certificate
    engines = {e["engine"]: e for e in certificate["engines"]}
    assert engines["crm"]["status"] == "forgotten" and engines["crm"]["forgotten"] == 2
    assert sorted(_deletes(server)) == ["/memories/r1", "/memories/r2"]
    assert engines["gone"]["status"] == "failed"


def test_a_hold_stops_provider_forget_and_is_audited(world, local_server):
    server = custom_engine(RECORDS, server=local_server())
    declare("crm", server.url)
    hold = legal_hold_place(
        tenant=world.tenant, actor=world.officer, target="subject", subject="jane", reason="r"
    )
    certificate = _erase(world).certificate
    assert certificate["engines"] == [
        {"engine": "crm", "provider": "custom", "status": "held", "forgotten": 0}
    ]
    assert _deletes(server) == []
    event = AuditEvent.objects.get(action="legal_hold.blocked", data__operation="provider_forget")
    assert event.data["holds"] == [str(hold.pk)]


def test_a_provider_that_forgets_in_the_background_is_waited_for(world, settings, monkeypatch):
    """Zep deletes a user (and its graph) with a task: the certificate records Zep's
    final answer, not the acknowledgement."""
    from providers.adapters.zep import ZepAdapter
    from providers.models import AccessControl, ProviderWrite
    from providers.services import operation_context
    from providers.tests.fakes.zep import API_KEY, ZepFake

    monkeypatch.setenv("FEDMEM_CRED_TEST_ZEP", API_KEY)
    zep = ZepFake().start()
    try:
        zep.settle_after_polls = 2  # Zep's worker finishes while we ask
        declare(
            "zep-main",
            zep.url,
            provider="zep",
            access_control=AccessControl.PLATFORM_KEY,
            credential_ref="env://FEDMEM_CRED_TEST_ZEP",
        )
        ctx = operation_context(tenant=world.tenant, operation="remember", agent=world.agent, user_id="jane")
        zep.add_user(ZepAdapter.user_key(ctx))
        certificate = _erase(world).certificate
        (engine,) = [e for e in certificate["engines"] if e["engine"] == "zep-main"]
        assert engine["status"] == "forgotten" and engine["forgotten"] == 1
        assert engine["writes"][0]["status"] == "settled"
        assert zep.users == {}
        forget = ProviderWrite.objects.get(pk=engine["writes"][0]["id"])
        assert forget.operation == "forget"
        # Settled: the subject stays only as its keyed hash, nowhere in clear.
        assert forget.scope["user_id"] is None and forget.scope["subject_hash"] == subject_hash("jane")
        assert canary_hits("jane") == {}
    finally:
        zep.stop()


def _write(world, engine, *, user_id: str, status: str = "queued") -> ProviderWrite:
    return ProviderWrite.objects.create(
        id=uuid.uuid4(),
        tenant=world.tenant,
        agent=world.agent,
        engine=engine,
        operation="remember",
        status=status,
        handle={"event_id": "ev-1"},
        scope={"user_id": user_id, "session_id": None},
    )


def test_the_subjects_followed_writes_are_closed_and_keep_only_the_hash(world, local_server):
    engine = declare("crm", custom_engine(RECORDS, server=local_server()).url)
    queued = _write(world, engine, user_id="jane")
    settled = _write(world, engine, user_id="jane", status="settled")
    other = _write(world, engine, user_id="john")
    certificate = _erase(world).certificate
    assert certificate["deleted"]["providers_providerwrite"] == 2
    queued.refresh_from_db()
    assert queued.status == "failed" and "erased" in queued.reason and queued.next_check_at is None
    for write in (queued, settled):
        write.refresh_from_db()
        assert write.scope == {"user_id": None, "session_id": None, "subject_hash": subject_hash("jane")}
    other.refresh_from_db()
    assert other.status == "queued" and other.scope["user_id"] == "john"
    assert canary_hits("jane") == {}


def test_a_hold_on_the_subject_keeps_its_followed_writes_as_they_are(world, local_server):
    engine = declare("crm", custom_engine(RECORDS, server=local_server()).url)
    queued = _write(world, engine, user_id="jane")
    hold = legal_hold_place(
        tenant=world.tenant, actor=world.officer, target="subject", subject="jane", reason="r"
    )
    certificate = _erase(world).certificate
    assert "providers_providerwrite" not in certificate["deleted"]
    (kept,) = [h for h in certificate["held"] if h["table"] == "providers_providerwrite"]
    assert kept["by_hold"] == {str(hold.pk): 1}
    queued.refresh_from_db()
    assert queued.status == "queued" and queued.scope["user_id"] == "jane"


def test_a_forget_the_provider_fails_is_issued_again_and_its_reason_recorded(world, settings, monkeypatch):
    from providers.adapters.zep import ZepAdapter
    from providers.models import AccessControl
    from providers.services import operation_context
    from providers.tests.fakes.zep import API_KEY, ZepFake

    settings.FEDMEM_ERASURE_PROVIDER_WAIT_SECONDS = 0
    monkeypatch.setenv("FEDMEM_CRED_TEST_ZEP", API_KEY)
    zep = ZepFake().start()
    try:
        zep.settle_after_polls = 1
        zep.fail_next = "graph locked by an import"
        declare(
            "zep-main",
            zep.url,
            provider="zep",
            access_control=AccessControl.PLATFORM_KEY,
            credential_ref="env://FEDMEM_CRED_TEST_ZEP",
        )
        ctx = operation_context(tenant=world.tenant, operation="remember", agent=world.agent, user_id="jane")
        zep.add_user(ZepAdapter.user_key(ctx))
        certificate = _erase(world).certificate
        (engine,) = [e for e in certificate["engines"] if e["engine"] == "zep-main"]
        # The first delete failed with Zep's reason; the second, issued by the erasure, settled.
        assert [w["status"] for w in engine["writes"]] == ["settled"]
        assert engine["status"] == "forgotten" and zep.users == {}
        delete_calls = [r for r in zep.server.requests if r.method == "DELETE"]
        assert len(delete_calls) == 2
    finally:
        zep.stop()
