"""Sentence vectors: how a content is cut, what a write stores, and how recall reads them."""

from __future__ import annotations

from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from memory.embeddings import embed_query, embed_texts
from memory.enforcement import Keys
from memory.models import ItemSentence, MemoryItem
from memory.retrieval.hybrid import RecallQuery, retrieve
from memory.services import backfill
from memory.services.backfill import sentence_backfill
from memory.services.items import MemoryDraft, memory_remember_batch, memory_update
from memory.services.write.prepare import sentence_texts
from memory.tests.conftest import remember
from memory.text import MAX_SENTENCES, sentence_spans


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("One sentence only.", ["One sentence only."]),
        (
            "Caroline: Hey Mel! Good to see you! How have you been?",
            ["Caroline: Hey Mel!", "Good to see you!", "How have you been?"],
        ),
        # Titles and initials end no sentence.
        (
            "Dr. Smith met Mr. Jones in the U.S. last week. They talked about the merger.",
            ["Dr. Smith met Mr. Jones in the U.S. last week.", "They talked about the merger."],
        ),
        # A closing quote stays with its sentence; a line break ends one.
        ('He said "go now." She went home quickly.', ['He said "go now."', "She went home quickly."]),
        ("first line has words\n\nsecond line has words", ["first line has words", "second line has words"]),
        # Pieces of fewer than three words open the next sentence, or close the last.
        ("Thanks! I went to the group. Loved it.", ["Thanks! I went to the group. Loved it."]),
        ("The pump failed at noon。 It stopped a day。", ["The pump failed at noon。", "It stopped a day。"]),
        ("Die Pumpe fiel aus! Die Linie stand still.", ["Die Pumpe fiel aus!", "Die Linie stand still."]),
        ("  Hi!  ", ["Hi!"]),
    ],
)  # fmt: skip
def test_sentence_spans(text, expected):
    assert [text[a:b] for a, b in sentence_spans(text)] == expected


def test_a_long_text_keeps_its_rest_in_the_last_sentence():
    text = " ".join(f"Sentence number {n} is here." for n in range(MAX_SENTENCES + 5))
    spans = sentence_spans(text)
    assert len(spans) == MAX_SENTENCES
    assert spans[-1][1] == len(text) and text[spans[-1][0] :].startswith(
        f"Sentence number {MAX_SENTENCES - 1} "
    )


def test_every_sentence_of_a_transcript_line_carries_its_speaker():
    assert sentence_texts("Caroline: Hey Mel! Good to see you! How have you been?") == [
        (0, 18, "Caroline: Hey Mel!"),
        (19, 35, "Caroline: Good to see you!"),
        (36, 54, "Caroline: How have you been?"),
    ]
    assert sentence_texts("The pump failed at noon. The line stopped for a day.") == [
        (0, 24, "The pump failed at noon."),
        (25, 52, "The line stopped for a day."),
    ]
    assert sentence_texts("One sentence only.") == []


def _stored(item):
    return list(ItemSentence.objects.filter(item=item).order_by("position"))


def _close(a, b):
    a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))) >= 0.999


def test_a_write_stores_a_vector_per_sentence_and_an_update_replaces_them(access):
    content = "Priya: We shipped the billing release on Friday. On Saturday I went hiking with my sister."
    item = remember(access, content, scope="agent").item
    rows = _stored(item)
    assert [(r.position, content[r.start : r.end]) for r in rows] == [
        (0, "Priya: We shipped the billing release on Friday."),
        (1, "On Saturday I went hiking with my sister."),
    ]
    # Each vector is the sentence's own embedding, the speaker label included.
    expected = embed_texts([piece for _, _, piece in sentence_texts(content)])
    assert all(_close(row.embedding, vector) for row, vector in zip(rows, expected, strict=True))
    assert not _close(rows[1].embedding, embed_texts(["On Saturday I went hiking with my sister."])[0])

    single = remember(access, "Priya likes long walks by the sea.", scope="agent").item
    assert _stored(single) == []

    revised = "Priya: The release slipped to Monday. Nobody went hiking. We all worked the weekend."
    memory_update(access=access, item_id=item.pk, content=revised)
    assert [revised[r.start : r.end] for r in _stored(item)] == [
        "Priya: The release slipped to Monday.",
        "Nobody went hiking.",
        "We all worked the weekend.",
    ]
    memory_update(access=access, item_id=item.pk, content="Priya: The release slipped to Monday.")
    assert _stored(item) == []


def test_a_duplicate_in_a_batch_stores_its_sentences_once(access):
    content = "The pump failed at noon. The line stopped for a day."
    written = memory_remember_batch(
        access=access, drafts=[MemoryDraft(content=content, scope="agent") for _ in range(2)]
    )
    items = {r.outcome.item.pk for r in written}
    assert len(items) == 1
    assert ItemSentence.objects.filter(item_id__in=items).count() == 2
    assert ItemSentence.objects.count() == 2


ANSWER = (
    "Priya: Work has been hectic, we shipped the new billing release on Friday. "
    "Then on Saturday I went hiking in the Lake District with my sister. Now I need a long nap."
)
DISTRACTORS = [
    "Priya: Hiking boots are expensive these days.",
    "Priya: My weekend was quiet, mostly reading at home.",
]
QUERY = "Where did Priya go hiking last weekend?"


def _recall(access, query=QUERY):
    rq = RecallQuery(query=query, scopes=("agent",), keys=Keys(narrow=True), top_k=5, stamp=False)
    return retrieve(access, rq)


def test_recall_scores_an_item_by_its_best_sentence_too(access, settings):
    answer = remember(access, ANSWER, scope="agent").item
    for content in DISTRACTORS:
        remember(access, content, scope="agent")
    settings.FEDMEM_HYBRID_SENTENCE_WEIGHT = 0.0
    before = _recall(access)
    assert all("sentence" not in hit.signals for hit in before)
    # The whole turn is about three things: by its own vector lines that only share
    # a word or a topic with the question outrank it.
    assert before[0].item.pk != answer.pk
    settings.FEDMEM_HYBRID_SENTENCE_WEIGHT = 0.6
    after = _recall(access)
    assert after[0].item.pk == answer.pk
    hit = after[0]
    # The signal is the query's cosine with the best stored sentence vector ...
    query = embed_query(QUERY)
    best = max(float(np.asarray(r.embedding) @ query) for r in _stored(answer))
    assert hit.signals["sentence"] == pytest.approx(best, abs=1e-4)
    # ... and the fused score weighs it against the item's own cosine.
    cosine = 0.4 * hit.similarity + 0.6 * best
    speaker = settings.FEDMEM_HYBRID_SPEAKER_WEIGHT  # the query names the turn's speaker
    assert hit.signals["speaker"] == "Priya"
    assert hit.score == pytest.approx(0.6 * cosine + 0.4 * hit.signals["lexical"] + speaker, rel=1e-4)
    # A one-sentence item scores by its own vector alone, as before.
    others = {h.item.content: h for h in after}
    was = {h.item.content: h for h in before}
    for content in DISTRACTORS:
        assert "sentence" not in others[content].signals
        assert others[content].score == pytest.approx(was[content].score, rel=1e-6)


def test_a_neighbours_best_sentence_lends_its_lead(access, settings):
    # The turn after the one that answers in a sentence among several: the context
    # term reads the neighbour's score with its best sentence, as the neighbour's own.
    said = [ANSWER, "Mel: Sounds lovely, glad you had a break."]
    written = memory_remember_batch(
        access=access, drafts=[MemoryDraft(content=c, scope="agent", session_id="s1") for c in said]
    )
    answer, reply = (r.outcome.item for r in written)
    for content in DISTRACTORS:
        remember(access, content, scope="agent")
    hits = {h.item.pk: h for h in _recall(access)}
    own_answer = hits[answer.pk]
    reply_hit = hits[reply.pk]
    answer_fused = (
        0.6 * (0.4 * own_answer.similarity + 0.6 * own_answer.signals["sentence"])
        + 0.4 * (own_answer.signals["lexical"])
    )
    assert reply_hit.signals["context"] == pytest.approx(answer_fused, rel=1e-4)


def test_sentences_go_with_their_item(access):
    item = remember(access, "The pump failed at noon. The line stopped for a day.", scope="agent").item
    assert ItemSentence.objects.filter(item=item).count() == 2
    MemoryItem.objects.filter(pk=item.pk).delete()
    assert not ItemSentence.objects.filter(item_id=item.pk).exists()


def test_the_backfill_writes_what_a_write_would_have_once(access, world):
    content = "The pump failed at noon. The line stopped for a day. Orders shipped late."
    item = remember(access, content, scope="agent").item
    written = [(r.position, r.start, r.end, r.embedding) for r in _stored(item)]
    ItemSentence.objects.filter(item=item).delete()  # as if written before sentence vectors
    remember(access, "A single sentence needs no rows.", scope="agent")
    out = StringIO()
    call_command("fedmem_sentences", tenant=world.tenant.slug, stdout=out)
    # Progress after each batch (two items read: the one-sentence item needs nothing), then the total.
    assert out.getvalue().splitlines() == [
        "  2 item(s) read, 3 sentence vector(s) for 1 written",
        "Wrote 3 sentence vector(s) for 1 item(s).",
    ]
    again = [(r.position, r.start, r.end, r.embedding) for r in _stored(item)]
    assert [row[:3] for row in again] == [row[:3] for row in written]
    assert all(_close(a[3], b[3]) for a, b in zip(again, written, strict=True))
    # Items that have their rows are skipped: a second run writes nothing.
    assert sentence_backfill() == (0, 0)
    with pytest.raises(CommandError):
        call_command("fedmem_sentences", tenant="no-such-tenant")
    with pytest.raises(CommandError):
        call_command("fedmem_sentences", agent="not-an-id")


def test_the_backfill_leaves_an_item_whose_content_changed_to_its_update(access, monkeypatch):
    item = remember(access, "The pump failed at noon. The line stopped for a day.", scope="agent").item
    ItemSentence.objects.filter(item=item).delete()
    real = backfill.embed_texts

    def update_meanwhile(texts):
        # The item is updated while the backfill embeds its old text.
        MemoryItem.objects.filter(pk=item.pk).update(content="Changed.", content_hash="changed")
        return real(texts)

    monkeypatch.setattr(backfill, "embed_texts", update_meanwhile)
    assert sentence_backfill() == (0, 0)
    assert not ItemSentence.objects.filter(item=item).exists()
