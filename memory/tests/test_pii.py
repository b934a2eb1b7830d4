"""Personal-data detection: the same findings as the whole-document analysis it
replaced, in bounded windows over the shared parse."""

from __future__ import annotations

import importlib
import itertools
import time

import pytest

from memory.extraction.nlp import parse
from memory.pii import OVERLAP_TOKENS, WINDOW_CHARS, detect_personal_data, windows

FILLER = "The cache was cold because the deploy restarted every node in the cluster. "
# Each text with the types the whole-document analysis found for it (recorded
# before detection was windowed). Where it missed (555 numbers are not valid phone
# numbers; an SSN-shaped number reads as a phone number) the record says so too:
# windowing must not change what is found, better or worse.
FOUND_BEFORE = {
    "Contact dana.lee@example.org about the renewal.": ("EMAIL_ADDRESS",),
    "Yesterday Maria Gonzalez approved the budget for the Lisbon team.": ("PERSON",),
    "Call the on-call engineer at +1 415 555 0132 if the queue backs up.": (),
    "The card on file is 4111 1111 1111 1111, expiring next year.": ("CREDIT_CARD",),
    "Wire it to GB82 WEST 1234 5698 7654 32 before Friday.": ("IBAN_CODE",),
    "The scanner came from 203.0.113.77 twice last night.": ("IP_ADDRESS",),
    "His social security number is 078-05-1120 per the form.": ("PHONE_NUMBER",),
    "Prefers window seats on long flights and quiet hotel rooms.": (),
    "The payments API latency rose after the deploy because the cache was cold.": (),
    "Alice Smith (alice@example.com) asked Bob Jones to call 212-555-0188 about 192.168.10.4.": (
        "EMAIL_ADDRESS",
        "IP_ADDRESS",
        "PERSON",
    ),
    (FILLER * 220)[:15800] + " Finally, write to late.person@example.net or ask Priya Raman.": (
        "EMAIL_ADDRESS",
        "PERSON",
    ),
    (FILLER * 100) + "Jonathan Meyer phoned from +44 20 7946 0958. " + (FILLER * 100): (
        "PERSON",
        "PHONE_NUMBER",
    ),
    (FILLER * 220)[:16384]: (),
    ("Alice Smith emailed bob@example.com about the outage. Call +1 415 555 0100. " * 220)[:16384]: (
        "EMAIL_ADDRESS",
        "PERSON",
    ),
}


def test_detection_finds_what_the_whole_document_analysis_found():
    texts = list(FOUND_BEFORE)
    assert [f.types for f in detect_personal_data(texts)] == list(FOUND_BEFORE.values())
    # One at a time (no batch) gives the same.
    assert [detect_personal_data([t])[0].types for t in texts[-4:]] == list(FOUND_BEFORE.values())[-4:]
    assert [f.personal_data for f in detect_personal_data(texts[:3])] == [True, True, False]


@pytest.mark.parametrize(
    "text",
    [
        (FILLER * 220)[:16384],
        # One sentence with no boundary to cut at, and one token longer than a window.
        "word " * 3000,
        "x" * (WINDOW_CHARS * 3) + " tail words here.",
        "Short.",
    ],
)
def test_windows_cover_the_document_in_bounded_overlapping_pieces(text):
    doc = parse([text])[0]
    pieces = windows(doc)
    assert pieces[0][0] == 0 and pieces[-1][1] == len(doc)
    for (start, end), (next_start, _) in itertools.pairwise(pieces):
        assert next_start <= end  # nothing skipped
        assert end - next_start <= OVERLAP_TOKENS  # overlap, but bounded
        assert next_start > start  # always moving on
    for start, end in pieces:
        span = doc[start:end]
        assert end - start == 1 or span.end_char - span.start_char <= WINDOW_CHARS
    # The length of a window, not of the text, bounds each analysis.
    if len(text) > 10 * WINDOW_CHARS:
        assert len(pieces) >= len(text) // WINDOW_CHARS


def test_a_pattern_cut_by_a_window_edge_is_found_in_the_next():
    # The card number straddles where a filler-only window would end.
    lead = "word " * (WINDOW_CHARS // 5 - 3)
    text = lead + "card 4111 1111 1111 1111 on file."
    doc = parse([text])[0]
    assert len(windows(doc)) > 1
    assert detect_personal_data([text])[0].types == ("CREDIT_CARD",)


def test_detection_and_extraction_share_one_parse():
    text = "Maria Gonzalez moved the billing service to Lisbon because of latency."
    detect_personal_data([text])
    assert parse([text])[0] is parse([text])[0]


# Short writes as the load bench and agents send them, and the short texts above.
CONCURRENT_WRITES = [
    *[text for text in FOUND_BEFORE if len(text) < 200],
    "The billing service had incident 48213 today.",
    "The checkout service had incident 7 today because the cache was cold.",
    "Maria Gonzalez moved the search service to Lisbon after the outage.",
]


def test_concurrent_writes_are_detected_together_each_as_alone():
    from memory.extraction import nlp
    from memory.services.write.prepare import DetectionBatcher, detect_and_read

    # Each text alone: its own parse, its own findings and extraction inputs.
    alone = []
    for text in CONCURRENT_WRITES:
        nlp._docs.clear()
        alone.append(detect_and_read([text]))
    nlp._docs.clear()
    batcher = DetectionBatcher()
    # The parse lock held here keeps the first write's detection waiting in spaCy,
    # so the writes that arrive meanwhile queue and go into the next run together.
    with nlp.run_lock:
        first = batcher.submit(CONCURRENT_WRITES[:1])
        while batcher.runs < 1:
            time.sleep(0.001)
        rest = [batcher.submit([text]) for text in CONCURRENT_WRITES[1:]]
    results = [first.result(timeout=60), *(future.result(timeout=60) for future in rest)]
    assert batcher.runs == 2
    assert results == alone
    assert [r[0][0].types for r in results[:10]] == list(FOUND_BEFORE.values())[:10]


def test_a_write_whose_detection_fails_fails_alone(monkeypatch):
    from memory.extraction import nlp

    # The module, not the function of the same name memory.services.write exports.
    prepare = importlib.import_module("memory.services.write.prepare")
    real = prepare.detect_and_read

    def failing(texts: list[str]) -> tuple[list[object], list[object]]:
        if "poison" in " ".join(texts):
            raise RuntimeError("parser failed")
        return real(texts)

    monkeypatch.setattr(prepare, "detect_and_read", failing)
    batcher = prepare.DetectionBatcher()
    with nlp.run_lock:
        first = batcher.submit(["The billing service is fine."])
        while batcher.runs < 1:
            time.sleep(0.001)
        good = batcher.submit(["The search service is fine."])
        bad = batcher.submit(["A poison text."])
    assert first.result(timeout=60)[0][0].personal_data is False
    assert good.result(timeout=60)[0][0].personal_data is False
    with pytest.raises(RuntimeError, match="parser failed"):
        bad.result(timeout=60)


def test_a_write_that_does_not_fit_the_batch_runs_next_in_its_turn():
    from memory.extraction import nlp
    from memory.services.write.prepare import DetectionBatcher

    batcher = DetectionBatcher(batch_size=32)
    large = [f"The pump in hall {n} failed." for n in range(40)]
    with nlp.run_lock:
        first = batcher.submit(["The billing service is fine."])
        while batcher.runs < 1:
            time.sleep(0.001)
        small = batcher.submit(["Contact dana.lee@example.org about the renewal."])
        big = batcher.submit(large)
        last = batcher.submit(["Yesterday Maria Gonzalez approved the budget for the Lisbon team."])
    assert last.result(timeout=120)[0][0].types == ("PERSON",)
    # The first write alone, the small one (the large one would overfill it), the
    # large one alone, then the last: in the order they came.
    assert batcher.runs == 4
    assert small.result()[0][0].types == ("EMAIL_ADDRESS",)
    assert len(big.result()[0]) == 40 and not any(f.personal_data for f in big.result()[0])
    assert first.result()[0][0].personal_data is False


def test_writes_queued_when_the_detection_thread_died_are_answered_by_its_successor():
    import os
    import threading
    from concurrent.futures import Future

    from memory.services.write.prepare import DetectionBatcher

    batcher = DetectionBatcher()
    # A thread of this process that has ended, and a write it left in the queue.
    dead = threading.Thread(target=lambda: None)
    dead.start()
    dead.join()
    batcher._thread, batcher._pid = dead, os.getpid()
    orphan: Future = Future()
    batcher._queue.put((["The billing service is fine."], orphan))
    later = batcher.submit(["Contact dana.lee@example.org about the renewal."])
    assert later.result(timeout=60)[0][0].types == ("EMAIL_ADDRESS",)
    assert orphan.result(timeout=60)[0][0].personal_data is False
