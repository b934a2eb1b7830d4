"""Speaker labels: a query naming the label a transcript turn opens with lifts that
turn in hybrid recall (memory.retrieval.speaker)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from memory.enforcement import Keys
from memory.retrieval.hybrid import RecallQuery, retrieve
from memory.retrieval.speaker import label, named_labels
from memory.tests.conftest import recall_url, remember


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("Melanie: We painted a sunset together", "Melanie"),
        ("Dr. Ng: the scan is clear", "Dr. Ng"),
        ("  Support bot:\tok", "Support bot"),
        ("Note that the deploy: failed", None),  # four words before the colon
        ("https://example.org/x", None),  # no blank after the colon
        ("10:30 stand-up moved", None),
        ("We painted a sunset together", None),
    ],
)
def test_label_is_the_first_words_before_a_colon(content, expected):
    assert label(content) == expected


def test_named_labels_are_the_capitalised_word_sequences_of_the_query():
    names = named_labels("What are Melanie's pets' names?")
    assert "Melanie" in names and "pets" not in names
    assert "Dr. Ng" in named_labels("What did Dr. Ng say about the scan?")
    both = named_labels("Did Caroline and Melanie both paint sunsets?")
    assert {"Caroline", "Melanie", "Caroline and Melanie"} <= set(both)
    # A sequence stops at a comma: "Melanie, Caroline" is no one's label.
    assert "Melanie, Caroline" not in named_labels("Melanie, Caroline said what?")
    assert named_labels("what did the support bot answer?") == []


def _recall(access, query, **extra):
    keys = Keys(user_id="cust-1", narrow=True)
    return retrieve(access, RecallQuery(query=query, scopes=("user",), keys=keys, top_k=10, **extra))


def _conversation(access):
    said = [
        "Caroline: Wow, Melanie! The colours blend so nicely, is that your own painting?",
        "Melanie: Yes, I painted a horse last week, it took me three evenings.",
        "Caroline: I painted a rainbow mural for the centre.",
        "Note: the fence needs a second coat of paint.",
    ]
    return {text: remember(access, text, session_id="s1").item for text in said}


def test_a_query_naming_a_speaker_lifts_that_speakers_turns(access):
    items = _conversation(access)
    melanie = items["Melanie: Yes, I painted a horse last week, it took me three evenings."]
    query = "What has Melanie painted?"
    hits = _recall(access, query)
    by_pk = {hit.item.pk: hit for hit in hits}
    assert by_pk[melanie.pk].signals["speaker"] == "Melanie"
    assert [h.item.pk for h in hits if "speaker" in h.signals] == [melanie.pk]
    with override_settings(FEDMEM_HYBRID_SPEAKER_WEIGHT=0.0):
        plain = {hit.item.pk: hit for hit in _recall(access, query)}
    assert "speaker" not in plain[melanie.pk].signals
    # Linear fusion: the bonus is the weight, added after session context.
    assert by_pk[melanie.pk].score == pytest.approx(
        plain[melanie.pk].score + settings.FEDMEM_HYBRID_SPEAKER_WEIGHT, rel=1e-4
    )
    for pk, hit in by_pk.items():
        if pk != melanie.pk:
            assert hit.score == pytest.approx(plain[pk].score, rel=1e-6)
    # The turn of the other speaker that only addresses Melanie no longer ranks above hers.
    addressed = items["Caroline: Wow, Melanie! The colours blend so nicely, is that your own painting?"]
    order = [h.item.pk for h in hits]
    assert order.index(melanie.pk) < order.index(addressed.pk)


def test_a_query_naming_no_label_ranks_as_before(access):
    _conversation(access)
    # "note" in lower case names no label, so "Note: ..." is not lifted.
    query = "what does the note say about the fence?"
    with override_settings(FEDMEM_HYBRID_SPEAKER_WEIGHT=0.0):
        plain = [(h.item.pk, round(h.score, 6)) for h in _recall(access, query)]
    hits = _recall(access, query)
    assert [(h.item.pk, round(h.score, 6)) for h in hits] == plain
    assert all("speaker" not in h.signals for h in hits)


def test_speaker_is_a_hybrid_signal_only(access):
    _conversation(access)
    for mode in ("vector", "keyword"):
        hits = _recall(access, "What has Melanie painted?", mode=mode)
        assert hits and all("speaker" not in h.signals for h in hits)


@override_settings(FEDMEM_HYBRID_FUSION="rrf")
def test_rank_fusion_adds_the_speaker_bonus_as_one_first_place(access):
    items = _conversation(access)
    melanie = items["Melanie: Yes, I painted a horse last week, it took me three evenings."]
    by_pk = {hit.item.pk: hit for hit in _recall(access, "What has Melanie painted?")}
    with override_settings(FEDMEM_HYBRID_SPEAKER_WEIGHT=0.0):
        plain = {hit.item.pk: hit for hit in _recall(access, "What has Melanie painted?")}
    bonus = settings.FEDMEM_HYBRID_SPEAKER_WEIGHT / (settings.FEDMEM_RRF_K + 1)
    assert by_pk[melanie.pk].score == pytest.approx(plain[melanie.pk].score + bonus, rel=1e-4)


def test_recall_api_ranks_the_named_speaker_first(world, as_agent, access):
    _conversation(access)
    response = as_agent(world.agent).post(
        recall_url(world.agent), {"query": "What has Melanie painted?", "user_id": "cust-1"}, format="json"
    )
    assert response.status_code == 200, response.json()
    first = response.json()["results"][0]
    assert first["content"].startswith("Melanie:")
