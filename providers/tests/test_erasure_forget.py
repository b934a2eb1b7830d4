"""Erasure asks every engine that can forget, with one status per engine; holds stop it."""

from __future__ import annotations

from governance.models import AuditEvent
from governance.services.erasure import erasure_request_create, erasure_run
from governance.services.holds import legal_hold_place
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
