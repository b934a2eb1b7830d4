"""Contradiction check on write: the rule resolver on known sentence pairs, retirement
and revival through the write path, the decision record, and its review API (list,
undo) with permissions, bad input and audit."""

from __future__ import annotations

import pytest

from conftest import assert_error
from governance.models import AuditEvent
from governance.services.policies import policy_version_create
from memory.contradictions import RuleResolver, get_resolver
from memory.models import ContradictionDecision, MemoryHistory, MemoryItem, Supersession
from memory.tests.conftest import remember

DETECTED = [
    ("Acme's billing service runs on PostgreSQL.", "Acme's billing service runs on MySQL."),
    ("The capital of Australia is Sydney.", "The capital of Australia is Canberra."),
    ("The API limit is 100 requests per minute.", "The API limit is 500 requests per minute."),
    ("Lena's account manager is Tom.", "Lena's account manager is Sarah."),
    ("The checkout service depends on Redis.", "The checkout service now depends on Memcached."),
    ("Kenji uses Slack.", "Kenji does not use Slack."),
    ("Kenji lives in Osaka.", "Kenji moved to Tokyo."),
]
NOT_DETECTED = [
    # another subject
    ("The billing service runs on PostgreSQL.", "The search service runs on Elasticsearch."),
    # an added value, not a replaced one
    ("Maria likes tea.", "Maria also likes coffee."),
    # a relation that holds several values at once
    ("Maria likes tea.", "Maria likes coffee."),
    ("The checkout service depends on Redis.", "The checkout service depends on Memcached."),
    # the same claim
    ("The deploy window is Tuesday.", "The deploy window is Tuesday."),
    # no claim to compare
    ("Heavy fog.", "Light rain."),
]


@pytest.mark.parametrize(("old", "new"), DETECTED)
def test_rules_detect_same_subject_and_relation_with_another_value(old, new):
    verdict = RuleResolver().check(new, old)
    assert verdict is not None and verdict.reason
    assert verdict.details["subject"] and verdict.details["relation"]


@pytest.mark.parametrize(("old", "new"), NOT_DETECTED)
def test_rules_do_not_report(old, new):
    assert RuleResolver().check(new, old) is None


def test_unknown_resolver_is_a_configuration_error(settings):
    from django.core.exceptions import ImproperlyConfigured

    settings.FEDMEM_CONTRADICTION_RESOLVER = "oracle"
    with pytest.raises(ImproperlyConfigured):
        get_resolver()
    settings.FEDMEM_CONTRADICTION_RESOLVER = "nli"
    settings.FEDMEM_NLI_MODEL = None
    with pytest.raises(ImproperlyConfigured):
        get_resolver()


def url(agent, suffix: str = "") -> str:
    return f"/v1/memory/agents/{agent.pk}/contradictions{suffix}"


def write(client, agent, content: str, **extra):
    body = {"content": content, "scope": "agent", **extra}
    return client.post(f"/v1/memory/agents/{agent.pk}/memories", body, format="json")


def test_write_with_check_retires_the_contradicted_fact(world, as_agent):
    client = as_agent(world.agent)
    old = write(client, world.agent, "Acme's billing service runs on PostgreSQL.").json()
    unrelated = write(client, world.agent, "The search service runs on Elasticsearch.").json()
    response = write(client, world.agent, "Acme's billing service runs on MySQL.", check_contradictions=True)
    assert response.status_code == 201, response.content
    body = response.json()
    assert [c["old_item_id"] for c in body["contradictions"]] == [old["id"]]
    retired = MemoryItem.objects.get(pk=old["id"])
    assert retired.invalid_at == MemoryItem.objects.get(pk=body["id"]).valid_from
    assert MemoryItem.objects.get(pk=unrelated["id"]).invalid_at is None
    decision = ContradictionDecision.objects.get()
    assert (decision.resolver, decision.status, str(decision.new_item_id)) == ("rules", "applied", body["id"])
    assert "postgresql" in decision.reason and "mysql" in decision.reason
    assert decision.supersession == Supersession.objects.get(old_item_id=old["id"])
    # Without the flag (and with the default policy) nothing is checked.
    plain = write(client, world.agent, "Acme's billing service runs on Oracle.").json()
    assert "contradictions" not in plain
    assert MemoryItem.objects.get(pk=body["id"]).invalid_at is None


def test_policy_turns_the_check_on_and_the_request_can_turn_it_off(world, access):
    policy_version_create(agent=world.agent, policy={"check_contradictions": True})
    from memory.enforcement import system_access

    access = system_access(world.agent)
    first = remember(access, "The deploy window is Tuesday.", scope="agent").item
    second = remember(access, "The deploy window is Thursday.", scope="agent")
    assert [d.old_item_id for d in second.contradictions] == [first.pk]
    third = remember(access, "The deploy window is Friday.", scope="agent", check_contradictions=False)
    assert third.contradictions is None
    assert MemoryItem.objects.get(pk=second.item.pk).invalid_at is None


def test_reasserting_the_old_fact_revives_it(world, access):
    old = remember(access, "The billing service runs on PostgreSQL.", scope="agent").item
    new = remember(
        access, "The billing service runs on MySQL.", scope="agent", check_contradictions=True
    ).item
    again = remember(
        access, "The billing service runs on PostgreSQL.", scope="agent", check_contradictions=True
    )
    assert again.created and [d.old_item_id for d in again.contradictions] == [new.pk]
    assert again.contradictions[0].details["revives"] == [str(old.pk)]
    # The first retirement is reverted; what is current is the re-asserted text.
    assert Supersession.objects.get(old_item=old).reverted_at is not None
    current = MemoryItem.objects.current().filter(tenant=world.tenant)
    assert [i.content for i in current] == ["The billing service runs on PostgreSQL."]
    assert MemoryHistory.objects.filter(item_id=old.pk, event="revived").exists()


def _decision(world, access) -> ContradictionDecision:
    remember(access, "The checkout service depends on Redis.", scope="agent")
    out = remember(
        access, "The checkout service now depends on Memcached.", scope="agent", check_contradictions=True
    )
    return out.contradictions[0]


def test_list_and_undo(world, as_user, access):
    decision = _decision(world, access)
    client = as_user(world.owner)
    listed = client.get(url(world.agent))
    assert listed.status_code == 200, listed.content
    [row] = listed.json()["results"]
    assert row["id"] == decision.pk and row["status"] == "applied"
    assert row["old_content"] == "The checkout service depends on Redis."
    assert client.get(url(world.agent), {"status": "undone"}).json()["results"] == []

    response = client.post(url(world.agent, f"/{decision.pk}/undo"))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "undone" and body["undone_by"]["type"] == "user"
    restored = MemoryItem.objects.get(pk=body["details"]["restored_item"])
    assert restored.content == "The checkout service depends on Redis." and restored.invalid_at is None
    # The new fact stays; the retirement is marked reverted; the retired row keeps its interval.
    assert MemoryItem.objects.get(pk=decision.new_item_id).invalid_at is None
    assert Supersession.objects.get(pk=decision.supersession_id).reverted_at is not None
    assert MemoryItem.objects.get(pk=decision.old_item_id).invalid_at is not None
    event = AuditEvent.objects.get(action="memory.contradiction.undo")
    assert event.target_id == str(decision.pk) and event.actor_id == str(world.owner.pk)
    # Twice: 409, nothing changes.
    count = MemoryItem.objects.count()
    assert_error(client.post(url(world.agent, f"/{decision.pk}/undo")), 409, "contradiction_undone")
    assert MemoryItem.objects.count() == count


def test_bad_input(world, as_user, access):
    decision = _decision(world, access)
    client = as_user(world.owner)
    assert_error(client.get(url(world.agent), {"status": "maybe"}), 400, "validation_error")
    for bad in ("999999", "not-a-number"):
        assert_error(client.post(url(world.agent, f"/{bad}/undo")), 404, "contradiction_not_found")
    assert ContradictionDecision.objects.get(pk=decision.pk).status == "applied"


def test_permissions(world, as_user, as_agent, access, client):
    decision = _decision(world, access)
    undo = url(world.agent, f"/{decision.pk}/undo")
    assert client.get(url(world.agent)).status_code == 401
    assert client.post(undo).status_code == 401
    # An auditor may view the agent but is not its editor; the agent's own key is no user.
    for caller in (as_user(world.auditor), as_agent(world.agent)):
        assert caller.get(url(world.agent)).status_code == 403
        assert caller.post(undo).status_code == 403
    # Another tenant, or a member without a grant: the agent does not exist for them.
    for caller in (as_user(world.outsider), as_user(world.teammate)):
        assert_error(caller.get(url(world.agent)), 404)
        assert_error(caller.post(undo), 404)
    # A foreign tenant's editor cannot reach this decision through their own agent.
    assert_error(as_user(world.outsider).post(url(world.foreign_agent, f"/{decision.pk}/undo")), 404)
    assert ContradictionDecision.objects.get(pk=decision.pk).status == "applied"


@pytest.fixture(scope="module")
def tiny_nli(tmp_path_factory):
    """An NLI cross-encoder built here on the packaged MiniLM encoder (untrained
    three-label head), saved to a local folder: the real loading and prediction
    code, offline."""
    import torch
    from sentence_transformers import CrossEncoder

    from memory.embeddings import packaged_model_path

    torch.manual_seed(0)
    model = CrossEncoder(str(packaged_model_path()), num_labels=3, device="cpu", local_files_only=True)
    model.model.config.id2label = {0: "contradiction", 1: "entailment", 2: "neutral"}
    model.model.config.label2id = {"contradiction": 0, "entailment": 1, "neutral": 2}
    folder = tmp_path_factory.mktemp("nli")
    model.save(str(folder))
    return folder


def test_nli_resolver_loads_a_local_cross_encoder(settings, tiny_nli):
    settings.FEDMEM_CONTRADICTION_RESOLVER = "nli"
    settings.FEDMEM_NLI_MODEL = str(tiny_nli)
    settings.FEDMEM_NLI_THRESHOLD = 0.0
    resolver = get_resolver()
    verdict = resolver.check("The deploy window is Thursday.", "The deploy window is Tuesday.")
    assert resolver.name == "nli" and verdict is not None
    assert 0.0 < verdict.details["score"] < 1.0 and "NLI contradiction probability" in verdict.reason
    settings.FEDMEM_NLI_THRESHOLD = 1.0
    assert get_resolver().check("The deploy window is Thursday.", "The deploy window is Tuesday.") is None


def test_update_wording_supersedes_and_a_complement_does_not(world, as_agent):
    client = as_agent(world.agent)
    route = write(
        client, world.agent, "The retailer routes its northern orders through the Leeds depot."
    ).json()
    staff = write(client, world.agent, "The retailer employs forty drivers in Leeds.").json()
    moved = write(
        client,
        world.agent,
        "On May 2 the retailer moved its northern orders from the Leeds depot to the York depot.",
        check_contradictions=True,
    )
    assert moved.status_code == 201, moved.content
    assert [c["old_item_id"] for c in moved.json()["contradictions"]] == [route["id"]]
    assert MemoryItem.objects.get(pk=route["id"]).invalid_at is not None
    decision = ContradictionDecision.objects.get(old_item_id=route["id"])
    assert decision.details["rule"] == "change" and decision.details["old_value"] == "leeds depot"
    # A compatible addition about the same subject retires nothing.
    added = write(
        client, world.agent, "The retailer opened a returns desk in York.", check_contradictions=True
    )
    assert added.status_code == 201, added.content
    assert added.json()["contradictions"] == []
    current = MemoryItem.objects.current().filter(tenant=world.tenant).values_list("pk", flat=True)
    assert {str(pk) for pk in current} == {staff["id"], moved.json()["id"], added.json()["id"]}
