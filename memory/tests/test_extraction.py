"""Extraction on write, on the real packaged spaCy model: entities, causal edges in
both directions of wording, idempotency, status and the worker path."""

from __future__ import annotations

import pytest
from django.test import override_settings

from memory.extraction.causal import rule_relations
from memory.extraction.entities import normalize, spacy_entities
from memory.extraction.nlp import parse, split_sentences
from memory.models import CausalEdge, Entity, MemoryItem, Mention
from memory.tasks import extract_items
from memory.tests.conftest import remember, settled
from memory.tests.graph_helpers import fact


def relations(text: str) -> list[tuple[str, str, str]]:
    return [(r.cause, r.effect, r.cue) for r in rule_relations(parse([text])[0])]


@pytest.mark.parametrize(
    ("text", "cause", "effect"),
    [
        # cause first
        ("Verbose debug logging caused a full disk.", "Verbose debug logging", "a full disk"),
        ("The memory leak led to repeated restarts.", "The memory leak", "repeated restarts"),
        ("The expired certificate results in failed logins.", "The expired certificate", "failed logins"),
        ("A config push triggers a cache flush.", "A config push", "a cache flush"),
        ("That bug caused an outage.", "That bug", "an outage"),  # "that" as a determiner stays
        ("The outage was caused by a faulty router.", "a faulty router", "The outage"),
        ("The vendor raised prices, so the team cancelled the contract.",
         "The vendor raised prices", "the team cancelled the contract"),
        ("When the queue backs up, the workers time out.", "the queue backs up", "the workers time out"),
        # effect first
        ("Checkout failed because of the database crash.", "the database crash", "Checkout failed"),
        ("The flight was delayed due to heavy fog.", "heavy fog", "The flight was delayed"),
        ("Sales dropped as a result of the price increase.", "the price increase", "Sales dropped"),
        ("The build broke because the lockfile was stale.", "the lockfile was stale", "The build broke"),
        ("The outage resulted from a misconfigured router.", "a misconfigured router", "The outage"),
        ("The delay stemmed from a customs inspection.", "a customs inspection", "The delay"),
        ("The fire arose from faulty wiring.", "faulty wiring", "The fire"),
        # more cause-first verbs
        ("The price cut sparked a surge in orders.", "The price cut", "a surge in orders"),
        ("The outage prompted a full review of the network.", "The outage", "a full review of the network"),
        ("The merger brought about major layoffs.", "The merger", "major layoffs"),
    ],
)  # fmt: skip
def test_rules_read_cause_and_effect_in_both_directions(text, cause, effect):
    found = relations(text)
    assert (cause, effect) in [(c, e) for c, e, _ in found], found


SPAN_TEXTS = [
    # "affects" is tagged AUX or VERB by the attribute ruler from its dependency label
    "I need to understand how completing homework affects student grades",
    "the checkout service slowed to a crawl in incident 4",
    "Angry support tickets from Alice Smith in Berlin",
    "A missing database index",
    "the workers time out",
    "The outage was caused by a faulty router",
]


def test_span_terms_skip_entity_recognition_and_keep_the_full_parse_lemmas():
    from memory.extraction import nlp
    from memory.extraction.pipeline import span_terms

    nlp._docs.clear()
    light = nlp.lemma_docs(SPAN_TEXTS)
    assert not any(doc.has_annotation("ENT_IOB") for doc in light)  # no entity recognition ran
    terms = span_terms(SPAN_TEXTS)
    full = parse(SPAN_TEXTS)
    assert all(doc.has_annotation("ENT_IOB") and doc.has_annotation("DEP") for doc in full)  # not cached
    assert [[t.lemma_ for t in doc] for doc in light] == [[t.lemma_ for t in doc] for doc in full]
    assert [[t.pos_ for t in doc] for doc in light] == [[t.pos_ for t in doc] for doc in full]
    assert span_terms(SPAN_TEXTS) == terms  # now from the cached full parses


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a relative pronoun stands for the noun it follows...
        ("The outage caused delays, which led to customer complaints.",
         {("The outage", "delays"), ("delays", "customer complaints")}),
        ("Heavy rain caused flooding that led to road closures.",
         {("Heavy rain", "flooding"), ("flooding", "road closures")}),
        # ... or for the clause before it when no causal verb governs that noun
        ("The server crashed, which caused an outage.", {("The server crashed", "an outage")}),
        ("The fire damaged the warehouse, which resulted in a two-week closure.",
         {("The fire damaged the warehouse", "a two-week closure")}),
        ("When the queue backs up, the workers time out, which causes failed checkouts.",
         {("the queue backs up", "the workers time out"), ("the workers time out", "failed checkouts")}),
        # effect clauses one after the other
        ("A power cut stopped the pumps, so the basement flooded, so the tenants left.",
         {("A power cut stopped the pumps", "the basement flooded"),
          ("the basement flooded", "the tenants left")}),
        ("Because the supplier was late, production stopped, and as a result orders were cancelled.",
         {("the supplier was late", "production stopped"), ("production stopped", "orders were cancelled")}),
        ("Due to heavy fog, flights were delayed, which led to missed connections.",
         {("heavy fog", "flights were delayed"), ("flights were delayed", "missed connections")}),
        ("The outage caused delays, and the delays led to refunds.",
         {("The outage", "delays"), ("the delays", "refunds")}),
        # a bare demonstrative stands for the clause, or the sentence, before it
        ("The disk filled up, and this caused the service to crash.",
         {("The disk filled up", "the service to crash")}),
        ("Prices rose. This led to fewer orders, which caused layoffs.",
         {("Prices rose", "fewer orders"), ("fewer orders", "layoffs")}),
        ("This caused the service to crash.", {("This", "the service to crash")}),
        ("It rained all week. Hopefully, this leads to a good harvest.",
         {("It rained all week", "a good harvest")}),
    ],
)  # fmt: skip
def test_chained_connectives_give_one_relation_per_link(text, expected):
    assert {(c, e) for c, e, _ in relations(text)} == expected


def test_a_cue_inside_a_clause_of_its_own_does_not_cut_it():
    # "create" is a causal verb inside the when-clause, not the next link of a chain
    found = relations("It's an amazing feeling when you create something and it resonates with people.")
    assert ("you create something", "It's an amazing feeling", "when") in found
    # nor is "so"'s cause cut after it: the when-clause holding it is the last link
    found = relations("It feels great when you create something, so I keep painting.")
    assert ("It feels great when you create something", "I keep painting", "so") in found
    # a further cue no boundary word sets off stays inside the span
    found = relations("The strike caused shortages in stores where panic buying created empty shelves.")
    assert ("The strike", "shortages in stores where panic buying created empty shelves", "cause") in found


def test_so_of_degree_is_no_connective():
    for text in (
        "I was so embarrassed when I saw the photos.",
        "It was so fun!",
        "Aww, they're so cute!",
        "There are so many types and flavors to try.",
        "You must have been so pumped when it happened!",
    ):
        assert [r for r in relations(text) if r[2] == "so"] == [], text
    assert relations("Congrats, Nate! So proud of you for winning.") == []
    assert relations("I was so tired, so I went home.") == [("I was so tired", "I went home", "so")]
    assert relations("The road was closed. So we took the ferry.") == [
        ("The road was closed", "we took the ferry", "so")
    ]
    assert relations("Those nights were worth it - so take some time to savor it.") == [
        ("Those nights were worth it", "take some time to savor it", "so")
    ]


def test_the_effect_of_a_subordinate_cause_is_the_clause_it_hangs_on():
    # not the longest run of what is left ("so I know all about them")
    assert ("I was a boy", "I've always liked turtles", "since") in relations(
        "I've always liked turtles since I was a boy, so I know all about them!"
    )
    assert ("we live far apart", "Me and my siblings don't hang out much", "since") in relations(
        "Me and my siblings don't hang out much since we live far apart, but when we do we plan a game night."
    )


def test_no_connective_no_edge():
    assert relations("The disk filled up. The service stopped.") == []
    assert relations("She arrived after the meeting.") == []
    assert relations("She brought her laptop.") == []  # "bring" only with "about"
    # a question names no cause
    assert relations("What caused the outage?") == []
    assert relations("Who caused the delay?") == []


def test_a_subjects_relative_clause_stating_a_link_is_a_link_of_its_own():
    assert {
        (c, e) for c, e, _ in relations("The layoffs, which stemmed from the merger, caused protests.")
    } == {
        ("the merger", "The layoffs"),
        ("The layoffs", "protests"),
    }
    assert relations("The team, who caused the delay, apologized.") == [("The team", "the delay", "cause")]


def test_entities_are_named_entities_and_noun_chunks_normalized():
    doc = parse(["Acme's payments API called Stripe from Berlin."])[0]
    found = {e.normalized: e.label for e in spacy_entities(doc)}
    assert found.get("acme") in ("ORG", "NOUN_CHUNK", "PERSON", "GPE")
    assert "berlin" in found
    assert normalize("The Payments-API's") == normalize("payments-api") == "payments-api"
    assert normalize("  THE   Acme, Inc. ") == "acme inc"


def test_sentence_split():
    assert split_sentences("The disk filled up. Then the service stopped!") == [
        "The disk filled up.",
        "Then the service stopped!",
    ]


def test_write_answers_pending_and_extraction_settles_it(world, access):
    item = remember(access, "Verbose debug logging caused a full disk on db-1.", scope="agent").item
    assert item.extraction_status == "pending"
    extract_items([str(item.pk)])
    item.refresh_from_db()
    assert item.extraction_status == "done" and item.extraction_error == ""
    edge = CausalEdge.objects.get(item=item)
    assert (edge.cause, edge.effect, edge.cue) == ("Verbose debug logging", "a full disk on db-1", "cause")
    assert edge.tenant_id == world.tenant.pk
    assert "disk" in edge.effect_terms and "db-1" in edge.effect_terms
    assert Mention.objects.filter(item=item).exists()


def test_extraction_is_idempotent(world, access):
    item = fact(access, "Acme's outage was caused by a faulty router in Berlin.")
    before = (
        sorted(Mention.objects.filter(item=item).values_list("entity__normalized", "start")),
        list(CausalEdge.objects.filter(item=item).values_list("cause", "effect")),
        Entity.objects.count(),
    )
    extract_items([str(item.pk)])
    after = (
        sorted(Mention.objects.filter(item=item).values_list("entity__normalized", "start")),
        list(CausalEdge.objects.filter(item=item).values_list("cause", "effect")),
        Entity.objects.count(),
    )
    assert before == after and before[1]


def test_spellings_merge_into_one_entity_per_tenant(world, access):
    # Possessive, determiner and case differ; the entity is one.
    fact(access, "The Payments-API crashed at noon.")
    fact(access, "The Payments-API's latency doubled.")
    fact(access, "Acme's billing service failed.")
    fact(access, "ACME's engineers restarted the database.")
    for name in ("payments-api", "acme"):
        entity = Entity.objects.get(tenant=world.tenant, normalized=name)
        assert entity.mentions.count() == 2


def test_same_name_in_two_tenants_is_two_entities(world):
    from memory.enforcement import system_access

    fact(system_access(world.agent), "Berlin hosts the primary database.")
    fact(system_access(world.foreign_agent), "Berlin hosts the primary database.", user_id="x")
    assert Entity.objects.filter(normalized="berlin").count() == 2
    for entity in Entity.objects.filter(normalized="berlin"):
        assert {m.tenant_id for m in entity.mentions.all()} == {entity.tenant_id}


def test_update_resets_status_and_replaces_edges(world, access):
    from memory.services.items import memory_update

    item = fact(access, "The memory leak led to repeated restarts.")
    item = memory_update(access=access, item_id=item.pk, content="Heavy fog caused the flight delay.")
    assert item.extraction_status == "pending"
    extract_items([str(item.pk)])
    assert list(CausalEdge.objects.filter(item=item).values_list("cause", flat=True)) == ["Heavy fog"]


@override_settings(FEDMEM_CAUSAL_EXTRACTORS=["no-such-extractor"])
def test_failure_is_recorded_retried_and_finally_failed(world, access):
    item = remember(access, "Heavy fog caused the flight delay.", scope="agent").item
    # apply() runs in this process; each retry re-runs at once (no countdown locally).
    # Earlier attempts leave the item pending with the error: only the last attempt
    # (after MAX_RETRIES retries) marks it failed, so "failed" proves the retries ran.
    extract_items.apply(args=[[str(item.pk)]])
    item.refresh_from_db()
    assert item.extraction_status == "failed"
    assert "no-such-extractor" in item.extraction_error
    assert not CausalEdge.objects.filter(item=item).exists()


def test_write_enqueues_extraction_in_the_outbox(world, access, django_capture_on_commit_callbacks):
    from core.models import OutboxMessage

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        item = remember(access, "A config push triggers a cache flush.", scope="agent").item
    message = OutboxMessage.objects.get(task_name="memory.extract_items")
    assert message.args == [[str(item.pk)]]
    assert callbacks and message.sent_at is None  # published only after commit


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_worker_extracts_after_commit(world, worker_factory, as_agent):
    worker_factory()
    response = as_agent(world.agent).post(
        f"/v1/memory/agents/{world.agent.pk}/memories",
        {"content": "The expired certificate results in failed logins.", "scope": "agent"},
        format="json",
    )
    assert response.status_code == 201
    assert response.json()["extraction_status"] == "pending"
    item = settled(MemoryItem.objects.get(pk=response.json()["id"]))
    assert item.extraction_status == "done", item.extraction_error
    assert CausalEdge.objects.get(item=item).cause == "The expired certificate"


def test_split_stores_one_fact_per_sentence_with_shared_provenance(world, as_agent):
    client = as_agent(world.agent)
    paragraph = "Heavy fog caused the flight delay. The flight delay led to a missed connection."
    response = client.post(
        f"/v1/memory/agents/{world.agent.pk}/memories",
        {"content": paragraph, "scope": "agent", "split": True},
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["created"] == 2
    items = [MemoryItem.objects.get(pk=r["item"]["id"]) for r in body["results"]]
    assert [i.content for i in items] == [
        "Heavy fog caused the flight delay.",
        "The flight delay led to a missed connection.",
    ]
    assert items[0].provenance == items[1].provenance and items[0].provenance["via"] == "split"
    assert [i.metadata["split"]["index"] for i in items] == [0, 1]
    assert items[0].metadata["split"]["paragraph"] == items[1].metadata["split"]["paragraph"]
    assert all(r["item"]["extraction_status"] == "pending" for r in body["results"])


def test_split_bad_input_stores_nothing(world, as_agent):
    client = as_agent(world.agent)
    base = f"/v1/memory/agents/{world.agent.pk}/memories"
    response = client.post(base, {"content": "A. B.", "split": "perhaps"}, format="json")
    assert response.status_code == 400 and "split" in response.json()["error"]["details"]["fields"]
    batch = client.post(
        base + "/batch", {"items": [{"content": "A. B.", "scope": "agent", "split": True}]}, format="json"
    ).json()
    assert batch["failed"] == 1 and "split" in batch["results"][0]["error"]["details"]["fields"]
    assert not MemoryItem.objects.exists()


def test_forgetting_the_last_mention_deletes_the_entity(world, access):
    from memory.services.items import memory_forget

    first = fact(access, "Priya Raman approved the Falcon budget.")
    second = fact(access, "The Falcon budget doubled.")
    memory_forget(access=access, item_id=first.pk)
    # A person's name must not outlive the last memory that said it.
    assert not Entity.objects.filter(normalized="priya raman").exists()
    assert Entity.objects.filter(mentions__item=second).exists()
    assert not CausalEdge.objects.filter(item_id=first.pk).exists()


def test_purge_counts_items_not_derived_rows(world, access):
    from memory.services.items import memory_purge

    fact(access, "Heavy fog caused the flight delay.", scope="agent")
    report = memory_purge(access=access, scope="agent", confirm=True)
    assert report.deleted == 1
    assert not Entity.objects.filter(tenant=world.tenant).exists()


@pytest.fixture(scope="module")
def tiny_gliner(tmp_path_factory):
    """A GLiNER model built here on the packaged MiniLM encoder (untrained span head),
    saved to a local folder: exercises the real loading and prediction code offline."""
    import torch
    from gliner import GLiNER, GLiNERConfig

    from memory.embeddings import packaged_model_path

    torch.manual_seed(0)
    config = GLiNERConfig(model_name=str(packaged_model_path()), max_width=8, hidden_size=384, max_len=128)
    folder = tmp_path_factory.mktemp("gliner")
    GLiNER.from_config(config, backbone_from_pretrained=True).save_pretrained(folder)
    return folder


def test_gliner_from_a_local_folder_replaces_spacy_entities(world, access, tiny_gliner, monkeypatch):
    from memory.extraction import entities
    from memory.extraction.entities import GLINER_LABELS

    monkeypatch.setattr(entities, "_gliner", None)  # drop any model cached by another test
    text = "Acme hired Priya Raman in Berlin."
    with override_settings(FEDMEM_GLINER_MODEL=str(tiny_gliner), FEDMEM_GLINER_THRESHOLD=0.0):
        item = fact(access, text)
    monkeypatch.setattr(entities, "_gliner", None)
    mentions = list(Mention.objects.filter(item=item).select_related("entity"))
    assert mentions and item.extraction_status == "done"
    labels = {label.upper() for label in GLINER_LABELS}
    for mention in mentions:
        assert mention.entity.label in labels  # GLiNER's labels, not spaCy's
        assert text[mention.start : mention.end] == mention.text


def test_a_long_batch_is_handed_on_in_slices(world, access, django_capture_on_commit_callbacks):
    from core.models import OutboxMessage

    first = remember(access, "Heavy fog caused the flight delay.", scope="agent").item
    second = remember(access, "The memory leak led to repeated restarts.", scope="agent").item
    OutboxMessage.objects.all().delete()
    with django_capture_on_commit_callbacks(execute=False):
        extract_items([str(first.pk), str(second.pk)], slice_seconds=0, batch=1)
    first.refresh_from_db()
    second.refresh_from_db()
    # One item per slice here: the first is done, the rest waits in the outbox.
    assert (first.extraction_status, second.extraction_status) == ("done", "pending")
    assert OutboxMessage.objects.get().args == [[str(second.pk)]]
    OutboxMessage.objects.all().delete()
    # A slice takes a whole batch: both fit in the first one.
    with django_capture_on_commit_callbacks(execute=False):
        extract_items([str(first.pk), str(second.pk)], slice_seconds=0, batch=2)
    second.refresh_from_db()
    assert second.extraction_status == "done"
    assert not OutboxMessage.objects.exists()


BATCH_TEXTS = [
    "Verbose debug logging led to a full disk on db-1.",
    "The database crash happened because of a full disk on db-1.",
    "The database crash caused checkout failures for Acme's customers in Berlin.",
    "Checkout failures resulted in lost revenue for the quarter.",
    "Heavy fog caused the flight delay at the Lisbon airport.",
    "Maria Gonzalez prefers window seats.",
    "The flight delay happened because of heavy fog.",
]


def _derived(items: list[MemoryItem]) -> dict[str, object]:
    """Everything extraction derived from ``items``, independent of row ids."""
    import numpy as np

    from memory.models import SpanLink

    edges = CausalEdge.objects.filter(item__in=items)
    by_id = {e.pk: (str(e.item_id), e.cause, e.effect) for e in edges}
    return {
        "mentions": sorted(
            (str(m.item_id), m.entity.normalized, m.entity.label, m.text, m.start, m.end)
            for m in Mention.objects.filter(item__in=items).select_related("entity")
        ),
        "edges": sorted(
            (
                str(e.item_id),
                e.cause,
                e.effect,
                e.cue,
                e.extractor,
                tuple(e.cause_terms),
                tuple(e.effect_terms),
            )
            for e in edges
        ),
        "vectors": {
            (str(e.item_id), e.cause, e.effect): np.concatenate([e.cause_embedding, e.effect_embedding])
            for e in edges
        },
        "entities": sorted(
            (e.normalized, tuple(sorted(e.aliases)))
            for e in Entity.objects.filter(mentions__item__in=items).distinct()
        ),
        "links": sorted(
            (by_id[link.source_id], by_id[link.target_id], link.method)
            for link in SpanLink.objects.filter(source_id__in=by_id, target_id__in=by_id)
        ),
        "status": sorted(
            (str(i.pk), i.extraction_status) for i in MemoryItem.objects.filter(pk__in=[i.pk for i in items])
        ),
    }


def test_batched_extraction_equals_extraction_item_by_item(world, access):
    import numpy as np

    from memory.extraction.pipeline import extract_item

    items = [remember(access, text, scope="agent").item for text in BATCH_TEXTS]
    for item in items:
        extract_item(item.pk)
    one_by_one = _derived(items)
    Mention.objects.all().delete()
    CausalEdge.objects.all().delete()
    Entity.objects.all().delete()
    MemoryItem.objects.update(extraction_status="pending")
    extract_items([str(item.pk) for item in items], batch=len(items))
    batched = _derived(items)
    assert one_by_one["edges"] and one_by_one["links"] and one_by_one["mentions"]
    for key in ("mentions", "edges", "entities", "links", "status"):
        assert batched[key] == one_by_one[key], key
    assert batched["vectors"].keys() == one_by_one["vectors"].keys()
    for key, vector in one_by_one["vectors"].items():
        assert np.allclose(batched["vectors"][key], vector, atol=1e-4)


def test_one_failing_item_does_not_fail_its_batch(world, access, monkeypatch):
    from memory.extraction import pipeline

    items = [remember(access, text, scope="agent").item for text in BATCH_TEXTS[:3]]
    real = pipeline.find_entities

    def failing(text, doc):
        if "checkout" in text:
            raise RuntimeError("model failed on this text")
        return real(text, doc)

    monkeypatch.setattr(pipeline, "find_entities", failing)
    with pytest.raises(RuntimeError, match="model failed"):  # called directly, the retry re-raises
        extract_items([str(item.pk) for item in items])
    statuses = {
        i.content: (i.extraction_status, i.extraction_error)
        for i in MemoryItem.objects.filter(pk__in=[i.pk for i in items])
    }
    assert statuses[BATCH_TEXTS[0]] == ("done", "")
    assert statuses[BATCH_TEXTS[1]] == ("done", "")
    assert statuses[BATCH_TEXTS[2]][0] == "pending" and "model failed" in statuses[BATCH_TEXTS[2]][1]


def test_span_links_are_stored_on_write_and_follow_the_edges(world, access):
    from memory.models import SpanLink
    from memory.services.items import memory_forget, memory_update

    first = fact(access, "Verbose debug logging led to a full disk on db-1.", session_id="s1")
    second = fact(access, "The database crash happened because of a full disk on db-1.", session_id="s2")
    unrelated = fact(access, "Heavy fog caused the flight delay.", session_id="s3")
    link = SpanLink.objects.get(source__item=first, target__item=second)
    assert (link.method, link.tenant_id) == ("terms", world.tenant.pk)
    assert not SpanLink.objects.filter(source__item=unrelated).exists()
    assert not SpanLink.objects.filter(target__item=unrelated).exists()
    # Re-extraction (update) replaces the item's edges and with them its links.
    memory_update(access=access, item_id=second.pk, content="The database crash was caused by a power cut.")
    extract_items([str(second.pk)])
    assert not SpanLink.objects.filter(source__item=first).exists()
    third = fact(access, "The power cut happened because of a storm.", session_id="s4")
    assert SpanLink.objects.filter(source__item=third, target__item=second).exists()
    # Forgetting an item takes its links along.
    memory_forget(access=access, item_id=second.pk)
    assert not SpanLink.objects.filter(tenant=world.tenant).exists()


def test_a_chained_sentence_is_stored_as_linked_edges(world, access):
    # Written and extracted as a write is: two edges of one item, the first's effect
    # span linked to the second's cause span, so a chain runs through the sentence.
    from memory.models import SpanLink

    item = fact(access, "The outage caused delays, which led to customer complaints.")
    edges = {(e.cause, e.effect): e for e in CausalEdge.objects.filter(item=item)}
    assert set(edges) == {("The outage", "delays"), ("delays", "customer complaints")}
    first, second = edges[("The outage", "delays")], edges[("delays", "customer complaints")]
    assert SpanLink.objects.filter(source=first, target=second).exists()
    assert not CausalEdge.objects.filter(item=item, cause__iexact="which").exists()


def test_span_links_never_cross_tenants(world):
    from memory.enforcement import system_access
    from memory.models import SpanLink

    fact(system_access(world.agent), "Verbose debug logging led to a full disk on db-1.")
    fact(system_access(world.foreign_agent), "The crash happened because of a full disk on db-1.")
    assert not SpanLink.objects.exists()


def _handed_inputs(items: list[MemoryItem]) -> dict[str, object]:
    """The extraction inputs the writes of ``items`` put in their outbox messages."""
    from core.models import OutboxMessage

    ids = {str(item.pk) for item in items}
    handed: dict[str, object] = {}
    for message in OutboxMessage.objects.filter(task_name="memory.extract_items"):
        handed.update({k: v for k, v in (message.kwargs.get("inputs") or {}).items() if k in ids})
    return handed


def _reset_extraction() -> None:
    Mention.objects.all().delete()
    CausalEdge.objects.all().delete()
    Entity.objects.all().delete()
    MemoryItem.objects.update(extraction_status="pending")


def test_write_time_parse_handed_to_the_worker_gives_the_same_graph(world, access, monkeypatch):
    import json

    import numpy as np

    from memory.extraction import pipeline

    items = [remember(access, text, scope="agent").item for text in BATCH_TEXTS]
    handed = _handed_inputs(items)
    assert set(handed) == {str(item.pk) for item in items}
    # Offsets, labels and cue words only: no piece of the content leaves with the task.
    payload = json.dumps(handed)
    for word in ("Maria", "Gonzalez", "Lisbon", "Berlin", "db-1", "fog"):
        assert word not in payload
    ids = [str(item.pk) for item in items]
    extract_items(ids, batch=len(items))
    parsed_in_worker = _derived(items)
    _reset_extraction()
    seen: list[str] = []
    real_parse = pipeline.parse

    def counting(texts):
        seen.extend(texts)
        return real_parse(texts)

    monkeypatch.setattr(pipeline, "parse", counting)
    extract_items(ids, batch=len(items), inputs=handed)
    from_write = _derived(items)
    assert not set(seen) & set(BATCH_TEXTS)  # only the short cause/effect spans were parsed
    assert parsed_in_worker["edges"] and parsed_in_worker["mentions"] and parsed_in_worker["links"]
    for key in ("mentions", "edges", "entities", "links", "status"):
        assert from_write[key] == parsed_in_worker[key], key
    for key, vector in parsed_in_worker["vectors"].items():
        assert np.allclose(from_write["vectors"][key], vector, atol=1e-4)


def test_stale_or_malformed_inputs_are_parsed_in_the_worker(world, access):
    from memory.extraction.handoff import read_inputs, write_inputs

    items = [remember(access, text, scope="agent").item for text in BATCH_TEXTS[:3]]
    ids = [str(item.pk) for item in items]
    extract_items(ids)
    expected = _derived(items)
    good = write_inputs([BATCH_TEXTS[0]])[0]
    assert read_inputs(BATCH_TEXTS[0], good) is not None
    # Read from another text (an update raced the task), malformed, or another configuration.
    stale = write_inputs(["Heavy fog caused the flight delay."])[0]
    broken = {**good, "entities": [["x", None, 3]]}
    other = {**good, "extractors": ["rules", "model"]}
    for inputs in (stale, broken, other, "nonsense"):
        assert read_inputs(BATCH_TEXTS[0], inputs) is None
    _reset_extraction()
    extract_items(ids, inputs={ids[0]: stale, ids[1]: broken, ids[2]: other})
    again = _derived(items)
    for key in ("mentions", "edges", "entities", "links", "status"):
        assert again[key] == expected[key], key


def test_known_entities_are_not_embedded_again(world, access, monkeypatch):
    from memory.extraction import pipeline

    first = remember(access, "The payments-api crashed because of a full disk on db-1.", scope="agent").item
    extract_items([str(first.pk)])
    second = remember(access, "The payments-api recovered after db-1 was cleaned.", scope="agent").item
    embedded: list[str] = []
    real = pipeline.embed_texts

    def counting(texts):
        embedded.extend(texts)
        return real(texts)

    monkeypatch.setattr(pipeline, "embed_texts", counting)
    pipeline._vectors.clear()
    extract_items([str(second.pk)])
    before = {m.entity.normalized for m in Mention.objects.filter(item=first).select_related("entity")}
    mentions = Mention.objects.filter(item=second).select_related("entity")
    known = {m.text for m in mentions if m.entity.normalized in before}
    assert "db-1" in {m.entity.normalized for m in mentions} and known
    assert not known & set(embedded)
    assert {m.text for m in mentions} - known <= set(embedded)


def test_span_links_are_the_per_span_rule_applied_in_one_statement(
    world, access, django_assert_max_num_queries
):
    from memory.extraction.links import FANOUT, link_edges, matching_spans
    from memory.models import SpanLink

    items = [remember(access, text, scope="agent").item for text in BATCH_TEXTS]
    extract_items([str(item.pk) for item in items[:-1]])
    last = remember(access, "A full disk on db-1 caused the database crash.", scope="agent").item
    extract_items([str(last.pk)])
    edges = list(CausalEdge.objects.filter(item=last))
    assert edges
    pool = CausalEdge.objects.filter(tenant_id=world.tenant.pk)
    expected = set()
    for edge in edges:
        for m in matching_spans(pool, side="cause", terms=edge.effect_terms, vector=edge.effect_embedding,
                                exclude=edge.pk, limit=FANOUT):  # fmt: skip
            expected.add((edge.pk, m.edge_id, m.method, round(m.score, 5)))
        for m in matching_spans(pool, side="effect", terms=edge.cause_terms, vector=edge.cause_embedding,
                                exclude=edge.pk, limit=FANOUT):  # fmt: skip
            expected.add((m.edge_id, edge.pk, m.method, round(m.score, 5)))
    ids = [e.pk for e in edges]
    stored = {
        (link.source_id, link.target_id, link.method, round(link.score, 5))
        for link in SpanLink.objects.filter(models_q_either(ids))
    }
    assert expected and stored == expected
    SpanLink.objects.filter(models_q_either(ids)).delete()
    # savepoint, SET LOCAL, the candidates, their terms, the insert, release
    with django_assert_max_num_queries(6):
        link_edges(world.tenant.pk, edges)


def models_q_either(ids):
    from django.db.models import Q

    return Q(source_id__in=ids) | Q(target_id__in=ids)


def test_a_batch_is_stored_in_as_many_statements_as_one_item(world, access):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory.extraction.pipeline import load_items, prepare, store_many

    items = [remember(access, text, scope="agent").item for text in BATCH_TEXTS]
    extract_items([str(item.pk) for item in items], batch=len(items))
    # Re-extraction: every entity is known, so no per-entity statement remains.
    counts = []
    for chunk in (items[:1], items):
        prepared = prepare(load_items([item.pk for item in chunk]))
        with CaptureQueriesContext(connection) as queries:
            assert store_many(prepared) == [True] * len(chunk)
        counts.append(len(queries))
    assert counts[0] == counts[1]
    statuses = MemoryItem.objects.filter(pk__in=[i.pk for i in items]).values_list(
        "extraction_status", flat=True
    )
    assert set(statuses) == {"done"}


def test_names_whose_identifiers_differ_are_never_merged(access, settings):
    # MiniLM puts "Flight BA117" and "Flight BA118" at cosine ~0.96, above the merge
    # threshold: by embedding alone the second flight became an alias of the first.
    settings.FEDMEM_ENTITY_MERGE_THRESHOLD = 0.9
    fact(access, "Flight BA117 left Heathrow two hours late.")
    fact(access, "Flight BA118 left Heathrow on time.")
    names = dict(Entity.objects.filter(tenant_id=access.tenant_id).values_list("normalized", "aliases"))
    assert "flight ba117" in names and "flight ba118" in names, names
    assert names["flight ba117"] == [] and names["flight ba118"] == []
    # (Names that agree on their identifiers still merge: test_hold_findings' Zorblax cases.)
