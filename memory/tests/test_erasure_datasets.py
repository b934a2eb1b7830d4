"""Erasure requests that name datasets: knowledge chunks ingested without a subject
go with everything derived from them, within the request's scope, in the one plan;
holds keep what they cover and the certificate says which kept what."""

from __future__ import annotations

import uuid

import pytest
from rest_framework.test import APIClient

from conftest import assert_error
from core.errors import InvalidInput
from core.models import OutboxMessage
from governance.models import AuditEvent, ErasureRequest, Role
from governance.services.audit import subject_hash
from governance.services.erasure import erasure_request_create, erasure_run
from governance.services.holds import legal_hold_place
from governance.tests import factories as f
from memory.enforcement import system_access
from memory.extraction.pipeline import extract_item
from memory.models import Dataset, MemoryHistory, MemoryItem
from memory.models.graph import CausalEdge, Entity, Mention
from memory.services.knowledge import knowledge_ingest
from memory.tests.conftest import remember

URL = "/v1/memory/erasure-requests"
LEASE = "Zorblax Industries signed the lease because the rent in Springfield fell."
OTHER = "Quentin Ortelius approved the budget for the Springfield plant."


def _ingest(access, name: str, texts: list[str], **fields) -> list[uuid.UUID]:
    outcome = knowledge_ingest(access=access, texts=texts, dataset_name=name, **fields)
    for chunk_id in outcome.item_ids:
        extract_item(chunk_id)
    return [uuid.UUID(str(pk)) for pk in outcome.item_ids]


def _request(world, **fields) -> ErasureRequest:
    fields.setdefault("scope", "tenant")
    fields.setdefault("reason", "contract ended")
    return erasure_request_create(tenant=world.tenant, actor=world.officer, **fields)


def _run(request: ErasureRequest) -> ErasureRequest:
    done = erasure_run(request_id=request.pk)
    assert done is not None
    return done


def test_a_dataset_erasure_takes_the_chunks_and_everything_derived_from_them(world, access):
    ids = _ingest(access, "leases", [LEASE])
    kept = remember(access, OTHER, user_id="cust-keep").item.pk
    extract_item(kept)
    assert MemoryItem.objects.get(pk=ids[0]).user_id in ("", None)  # no subject reaches it
    assert Mention.objects.filter(item_id__in=ids).exists()
    assert MemoryHistory.objects.filter(item_id__in=ids).exists()
    entities = set(Mention.objects.filter(item_id__in=ids).values_list("entity_id", flat=True))
    shared = set(Mention.objects.filter(item_id=kept).values_list("entity_id", flat=True))

    request = _request(world, datasets=["leases"])
    assert request.subject == "" and request.subject_hash == "" and request.datasets == ["leases"]
    done = _run(request)

    assert done.status == "completed"
    assert not MemoryItem.objects.filter(pk__in=ids).exists()
    assert not Mention.objects.filter(item_id__in=ids).exists()
    assert not CausalEdge.objects.filter(item_id__in=ids).exists()
    assert not MemoryHistory.objects.filter(item_id__in=ids).exists()
    # Entities only the chunk named go; one another item names stays, without the
    # chunk's spellings it alone contributed.
    assert set(Entity.objects.filter(pk__in=entities).values_list("pk", flat=True)) == entities & shared
    assert not Dataset.objects.filter(tenant=world.tenant, name="leases").exists()
    assert MemoryItem.objects.filter(pk=kept).exists()
    assert done.certificate["datasets"] == [
        {"name": "leases", "deleted": 1, "held": 0, "dataset_deleted": True, "legal_hold_flag": False}
    ]
    assert done.certificate["deleted"]["memory_item"] == 1
    assert done.certificate["deleted"]["memory_dataset"] == 1
    assert done.certificate["subject_hash"] == "" and done.certificate["held"] == []
    event = AuditEvent.objects.get(action="erasure.completed")
    assert event.data["datasets"] == ["leases"]


def test_a_dataset_erasure_erases_no_subjects_memory(world, access):
    """An empty subject is nobody: items with an empty or no user_id elsewhere stay."""
    _ingest(access, "leases", [LEASE])
    _ingest(access, "manuals", ["The pump manual says to bleed the valve first."])
    loose = remember(access, "A note with no subject.", user_id="", scope="agent").item.pk
    done = _run(_request(world, datasets=["leases"]))
    assert done.certificate["deleted"]["memory_item"] == 1
    assert MemoryItem.objects.filter(pk=loose).exists()
    assert MemoryItem.objects.filter(dataset__name="manuals").count() == 1
    assert done.certificate["engines"] == []


def test_subject_and_datasets_in_one_request_count_each_row_once(world, access):
    subject = "cust-both"
    mine = _ingest(access, "cases", ["Case file: refund promised by phone."], user_id=subject)
    loose = _ingest(access, "cases", ["Refund policy: thirty days."])
    fact = remember(access, "The customer prefers email.", user_id=subject).item.pk
    done = _run(_request(world, subject=subject, datasets=["cases"]))
    assert not MemoryItem.objects.filter(pk__in=[*mine, *loose, fact]).exists()
    assert done.certificate["deleted"]["memory_item"] == 3
    assert done.certificate["subject_hash"] == subject_hash(subject)
    assert done.certificate["datasets"][0]["deleted"] == 2
    assert ErasureRequest.objects.get(pk=done.pk).subject == ""


def test_agent_scope_erases_only_the_agents_own_dataset(world):
    mine = system_access(world.agent)
    theirs = system_access(world.sibling)
    _ingest(mine, "leases", [LEASE])
    _ingest(theirs, "ops-runbook", ["Restart the queue before the database."])
    with pytest.raises(InvalidInput) as refused:
        _request(world, scope="agent", agent=world.agent, datasets=["ops-runbook"])
    assert "another agent" in refused.value.details["fields"]["datasets"][0]
    done = _run(_request(world, scope="agent", agent=world.agent, datasets=["leases"]))
    assert done.certificate["datasets"][0]["deleted"] == 1
    assert MemoryItem.objects.filter(dataset__name="ops-runbook").count() == 1


@pytest.mark.parametrize("target", ["dataset", "item", "agent", "flag"])
def test_holds_keep_what_they_cover_and_the_certificate_names_them(world, access, target):
    ids = _ingest(access, "leases", [LEASE, "The lease ends in 2031 at the latest."])
    first = MemoryItem.objects.get(pk=ids[0])
    snapshot = list(MemoryItem.objects.filter(pk__in=ids).order_by("pk").values())
    hold = None
    if target == "flag":
        Dataset.objects.filter(tenant=world.tenant, name="leases").update(legal_hold=True)
    else:
        fields = {
            "dataset": {"dataset": "leases"},
            "item": {"item_id": first.pk},
            "agent": {"agent": world.agent},
        }
        hold = legal_hold_place(
            tenant=world.tenant, actor=world.officer, target=target, reason="litigation", **fields[target]
        )
    done = _run(_request(world, datasets=["leases"]))

    assert done.status == "completed"
    covered = [first.pk] if target == "item" else ids
    still = list(MemoryItem.objects.filter(pk__in=covered).order_by("pk").values())
    assert still == [row for row in snapshot if row["id"] in covered]  # byte-identical
    [entry] = done.certificate["datasets"]
    assert entry["held"] == len(covered) and entry["deleted"] == len(ids) - len(covered)
    assert entry["dataset_deleted"] is False  # a dataset with held chunks stays with them
    assert Dataset.objects.filter(tenant=world.tenant, name="leases").exists()
    if hold is not None:
        [summary] = done.certificate["holds"]
        assert summary["hold"] == str(hold.pk) and summary["rows"] == {"memory_item": len(covered)}
        blocked = AuditEvent.objects.get(action="legal_hold.blocked", data__operation="dataset_erasure")
        assert blocked.data["holds"] == [str(hold.pk)]
    else:
        assert entry["legal_hold_flag"] is True


# --- over the API -------------------------------------------------------------------


def test_officer_requests_a_dataset_erasure_over_the_api(world, access, as_user):
    _ingest(access, "leases", [LEASE])
    response = as_user(world.officer).post(
        URL, {"datasets": ["leases"], "scope": "tenant", "reason": "contract ended"}, format="json"
    )
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["datasets"] == ["leases"] and body["subject_hash"] == ""
    request = ErasureRequest.objects.get(pk=body["id"])
    requested = AuditEvent.objects.get(action="erasure.requested", target_id=str(request.pk))
    assert requested.data["datasets"] == ["leases"]
    assert OutboxMessage.objects.filter(task_name="governance.run_erasure", args=[body["id"]]).exists()


def test_who_may_request_a_dataset_erasure(world, access, as_user, as_agent):
    _ingest(access, "leases", [LEASE])
    body = {"datasets": ["leases"], "scope": "tenant", "reason": "r"}
    assert_error(APIClient().post(URL, body, format="json"), 401)
    assert_error(as_agent(world.agent).post(URL, body, format="json"), 403)
    for who in ("owner", "auditor"):
        assert_error(as_user(getattr(world, who)).post(URL, body, format="json"), 403)
    # Another tenant's officer: our dataset is unknown there (no existence leak beyond it).
    foreign = as_user(f.member(world.other_tenant, Role.SECURITY_OFFICER))
    error = assert_error(foreign.post(URL, body, format="json"), 400, "validation_error")
    assert "no such dataset" in error["details"]["fields"]["datasets"][0]
    assert not ErasureRequest.objects.exists()
    assert not AuditEvent.objects.filter(action="erasure.requested").exists()
    assert MemoryItem.objects.filter(dataset__name="leases").count() == 1


def test_duplicates_and_engine_datasets_are_refused(world, access, as_user):
    _ingest(access, "leases", [LEASE])
    Dataset.objects.create(tenant=world.tenant, agent=world.agent, name="remote-docs", engine="cognee-1")
    client = as_user(world.officer)
    twice = client.post(URL, {"datasets": ["leases", "leases"], "reason": "r"}, format="json")
    assert "named twice" in assert_error(twice, 400, "validation_error")["details"]["fields"]["datasets"][0]
    remote = client.post(URL, {"datasets": ["remote-docs"], "reason": "r"}, format="json")
    assert "cognee-1" in assert_error(remote, 400, "validation_error")["details"]["fields"]["datasets"][0]
    assert not ErasureRequest.objects.exists()


# --- console ------------------------------------------------------------------------


HX = {"HTTP_HX_REQUEST": "true"}


def test_the_console_requests_a_dataset_erasure(world, access, client):
    _ingest(access, "leases", [LEASE])
    client.force_login(world.officer)
    page = client.get("/erasure/")
    assert 'name="datasets"' in page.content.decode()
    neither = client.post("/erasure/", {"scope": "tenant", "reason": "r"}, **HX)
    assert neither.status_code == 400
    assert "name a subject or datasets" in neither.content.decode()
    unknown = client.post("/erasure/", {"datasets": "leases, nope", "scope": "tenant", "reason": "r"}, **HX)
    assert unknown.status_code == 400 and "nope: no such dataset" in unknown.content.decode()
    assert not ErasureRequest.objects.exists()
    created = client.post("/erasure/", {"datasets": "leases", "scope": "tenant", "reason": "r"}, **HX)
    assert created.status_code == 200, created.content
    assert ErasureRequest.objects.get().datasets == ["leases"]
    assert "leases" in created.content.decode()


def test_the_schema_describes_the_datasets_field(db):
    import io
    import json

    from django.core.management import call_command

    out = io.StringIO()
    call_command("spectacular", "--format", "openapi-json", stdout=out)
    components = json.loads(out.getvalue())["components"]["schemas"]
    datasets = components["ErasureRequestCreateRequest"]["properties"]["datasets"]
    assert datasets["type"] == "array" and datasets["maxItems"] == 50
    assert datasets["items"]["maxLength"] == 100
    assert "subject" not in components["ErasureRequestCreateRequest"].get("required", [])
    assert "datasets" in components["ErasureRequest"]["properties"]
