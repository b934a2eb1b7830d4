"""The federation core: concurrent fan-out with a deadline, per-source status,
ordinal RRF, grouping with every match kept, contradictions flagged, bounded output."""

from __future__ import annotations

import threading
import time

import pytest

from providers import federation
from providers.adapters.base import AdapterError, EngineTimeout, EngineUnavailable, Hit
from providers.federation import RecallSource, federated_recall, normalize_text


class StaticSource:
    """A recall source answering fixed records (best first), or failing as told."""

    def __init__(self, engine_id, records=(), *, provider="custom", fail=None, hang=None):
        self.engine_id = engine_id
        self.provider_id = provider
        self.records = records
        self.fail = fail
        self.hang = hang
        self.calls = 0

    def recall(self, query, top_k, deadline):
        self.calls += 1
        if self.hang is not None:
            self.hang.wait(30)  # released by the test's teardown; never a real 30 s
        if self.fail is not None:
            raise self.fail
        hits = []
        for position, record in enumerate(self.records, start=1):
            kind, text, *rest = record
            score = rest[0] if rest else None
            metadata = rest[1] if len(rest) > 1 else {}
            hits.append(
                Hit(
                    provider_id=self.provider_id,
                    engine_id=self.engine_id,
                    external_id=f"{self.engine_id}-{position}",
                    kind=kind,
                    text=text,
                    score=score,
                    metadata=metadata,
                    rank=position,
                )
            )
        return hits


@pytest.fixture
def hang():
    event = threading.Event()
    yield event
    event.set()


def _run(sources, top_k=10, timeout_ms=2000):
    return federated_recall(sources, query="q", top_k=top_k, timeout_ms=timeout_ms)


def test_sources_satisfy_the_protocol():
    assert isinstance(StaticSource("a"), RecallSource)


def test_all_sources_answer():
    result = _run(
        [
            StaticSource("a", [("fact", "Alice likes tea")]),
            StaticSource("b", [("fact", "Bob likes jazz")]),
        ]
    )
    assert result["status"] == "ok"
    assert [(s["engine_id"], s["status"], s["count"], s["error"]) for s in result["sources"]] == [
        ("a", "ok", 1, None),
        ("b", "ok", 1, None),
    ]
    assert all(isinstance(s["latency_ms"], int) for s in result["sources"])


@pytest.mark.parametrize(
    ("failure", "status"),
    [
        (EngineUnavailable("down", retryable=True), "unavailable"),
        (EngineTimeout("slow", retryable=True), "timed_out"),
        (AdapterError("bad answer", retryable=False), "error"),
        (RuntimeError("a bug in a source"), "error"),
        (federation.SourceFailure("error", "credential_missing", "no key"), "error"),
    ],
)
def test_one_failing_source_makes_a_partial_result(failure, status):
    result = _run([StaticSource("a", [("fact", "Alice likes tea")]), StaticSource("b", fail=failure)])
    assert result["status"] == "partial"
    failed = result["sources"][1]
    assert failed["status"] == status and failed["count"] == 0 and failed["error"]["message"]
    assert [g["text"] for g in result["results"]] == ["Alice likes tea"]


def test_a_hung_source_is_timed_out_and_the_rest_returned(hang):
    hung = StaticSource("slow", [("fact", "never")], hang=hang)
    result = _run([StaticSource("a", [("fact", "Alice likes tea")]), hung], timeout_ms=500)
    assert result["status"] == "partial"
    assert result["sources"][1]["status"] == "timed_out"
    assert result["sources"][1]["error"]["reason"] == "timeout"
    assert [g["text"] for g in result["results"]] == ["Alice likes tea"]


class PreparingSource(StaticSource):
    """A source with a one-off preparation (a model load, an SDK import)."""

    def __init__(self, engine_id, records=(), *, prepare_fails=None, **kwargs):
        super().__init__(engine_id, records, **kwargs)
        self.prepare_fails = prepare_fails
        self.prepared_at = None
        self.deadline = None

    def prepare(self):
        if self.prepare_fails is not None:
            raise self.prepare_fails
        self.prepared_at = time.monotonic()

    def recall(self, query, top_k, deadline):
        self.deadline = deadline
        return super().recall(query, top_k, deadline)


def test_preparation_runs_before_the_deadline_starts():
    source = PreparingSource("builtin", [("fact", "Alice likes tea")])
    result = _run([source, StaticSource("b", [("fact", "Bob likes jazz")])], timeout_ms=2000)
    assert result["status"] == "ok"
    # The whole budget is left for the answer, however long the preparation took.
    assert source.deadline >= source.prepared_at + 2.0


def test_a_failing_preparation_is_that_sources_error_and_it_is_not_asked():
    broken = PreparingSource("builtin", [("fact", "never")], prepare_fails=OSError("no model files"))
    result = _run([broken, StaticSource("b", [("fact", "Bob likes jazz")])])
    assert result["status"] == "partial"
    report = result["sources"][0]
    assert (report["status"], report["error"]["reason"], report["count"]) == ("error", "source_error", 0)
    assert broken.calls == 0
    assert [g["text"] for g in result["results"]] == ["Bob likes jazz"]


def test_when_every_source_fails_the_result_says_failed():
    result = _run(
        [
            StaticSource("a", fail=EngineUnavailable("down", retryable=True)),
            StaticSource("b", fail=AdapterError("bad", retryable=False)),
        ]
    )
    assert result["status"] == "failed"
    assert result["results"] == []
    assert {s["status"] for s in result["sources"]} == {"unavailable", "error"}


def test_no_source_is_failed_not_ok():
    assert _run([])["status"] == "failed"


def test_fusion_is_ordinal_and_ignores_provider_scores():
    # "shared" is second in both lists; "top-a" is first in one list only.
    a = StaticSource("a", [("fact", "top a", 0.99), ("fact", "shared", 0.98)])
    b = StaticSource("b", [("fact", "top b", 1000.0), ("fact", "shared", 999.0)])
    order = [g["text"] for g in _run([a, b])["results"]]
    assert order[0] == "shared"
    # Rescaling one provider's scores changes nothing.
    b2 = StaticSource("b", [("fact", "top b", 0.000001), ("fact", "shared", 0.0000001)])
    assert [g["text"] for g in _run([a, b2])["results"]] == order


def test_rrf_scores_follow_the_formula():
    result = _run([StaticSource("a", [("fact", "x"), ("fact", "y")]), StaticSource("b", [("fact", "y")])])
    scores = {g["text"]: g["rrf_score"] for g in result["results"]}
    assert scores["y"] == pytest.approx(1 / 62 + 1 / 61, abs=1e-6)
    assert scores["x"] == pytest.approx(1 / 61, abs=1e-6)


def test_grouping_keeps_every_match_and_respects_kind():
    a = StaticSource("a", [("fact", "Alice likes  Tea."), ("document", "Alice likes tea")], provider="mem0")
    b = StaticSource("b", [("fact", "alice likes tea")], provider="zep")
    groups = _run([a, b])["results"]
    fact = next(g for g in groups if g["kind"] == "fact")
    assert [(m["engine_id"], m["provider_id"], m["rank"], m["external_id"]) for m in fact["matches"]] == [
        ("a", "mem0", 1, "a-1"),
        ("b", "zep", 1, "b-1"),
    ]
    assert any(g["kind"] == "document" for g in groups)


def test_a_source_repeating_itself_votes_once():
    a = StaticSource("a", [("fact", "x"), ("fact", "X")])
    group = _run([a])["results"][0]
    assert len(group["matches"]) == 2
    assert group["rrf_score"] == pytest.approx(1 / 61, abs=1e-6)


def test_output_is_bounded():
    many = StaticSource("a", [("fact", f"fact {i}") for i in range(80)])
    assert len(_run([many], top_k=5)["results"]) == 5
    assert _run([many], top_k=5)["sources"][0]["count"] == 5
    assert len(_run([many], top_k=500)["results"]) == federation.MAX_TOP_K


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Alice lives in Lisbon", "Alice lives in Porto"),
        ("Alice likes tea", "Alice does not like tea"),
        ("Bob's favorite color is blue", "Bob's favorite color is green"),
        ("The user prefers email", "The user prefers phone calls"),
    ],
)
def test_contradictions_are_flagged_not_resolved(first, second):
    result = _run([StaticSource("a", [("fact", first)]), StaticSource("b", [("fact", second)])])
    assert len(result["results"]) == 2
    for group in result["results"]:
        assert group["conflict"] is not None
        assert group["conflict"]["with"][0]["text"] in {first, second} - {group["text"]}


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Alice likes tea", "Alice likes coffee"),
        ("Alice lives in Lisbon", "Bob lives in Porto"),
        ("The deploy is on Tuesday", "The build is green"),
    ],
)
def test_compatible_statements_are_not_flagged(first, second):
    result = _run([StaticSource("a", [("fact", first)]), StaticSource("b", [("fact", second)])])
    assert all(group["conflict"] is None for group in result["results"])


def test_structured_edges_with_one_subject_and_predicate_conflict_unless_retired():
    alice_acme = (
        "edge",
        "Alice works at Acme",
        None,
        {"subject": "Alice", "predicate": "WORKS_AT"},
    )
    alice_globex = (
        "edge",
        "Alice is employed by Globex",
        None,
        {"subject": "Alice", "predicate": "WORKS_AT"},
    )
    result = _run([StaticSource("a", [alice_acme]), StaticSource("b", [alice_globex])])
    assert all(g["conflict"] for g in result["results"])
    retired = (
        "edge",
        "Alice is employed by Globex",
        None,
        {"subject": "Alice", "predicate": "WORKS_AT", "invalid_at": "2025-01-01T00:00:00Z"},
    )
    result = _run([StaticSource("a", [alice_acme]), StaticSource("b", [retired])])
    assert all(g["conflict"] is None for g in result["results"])


def test_a_providers_edge_and_anothers_sentence_about_one_subject_meet():
    # Zep names the relation (LIVES_IN, subject, object); Mem0 says it in a sentence.
    lisbon = (
        "edge",
        "Alice lives in Lisbon",
        None,
        {"subject": "Alice", "predicate": "LIVES_IN", "object": "Lisbon"},
    )
    porto = ("fact", "Alice lives in Porto")
    result = _run([StaticSource("zep", [lisbon]), StaticSource("mem0", [porto])])
    assert {g["text"]: g["conflict"]["subject"] for g in result["results"]} == {
        "Alice lives in Lisbon": "alice lives in",
        "Alice lives in Porto": "alice lives in",
    }
    # The same place said both ways is agreement, with or without the edge's object.
    for metadata in (
        {"subject": "Alice", "predicate": "LIVES_IN", "object": "Porto"},
        {"subject": "Alice", "predicate": "LIVES_IN"},
    ):
        edge = ("edge", "Alice lives in Porto", None, metadata)
        result = _run([StaticSource("zep", [edge]), StaticSource("mem0", [porto])])
        assert all(g["conflict"] is None for g in result["results"])


def test_a_conflict_outside_the_top_k_stays_visible():
    a = StaticSource("a", [("fact", "x1"), ("fact", "Alice lives in Lisbon")])
    b = StaticSource("b", [("fact", "x1"), ("fact", "Alice lives in Porto")])
    groups = _run([a, b], top_k=2)["results"]
    assert [g["text"] for g in groups] == ["x1", "Alice lives in Lisbon"]  # Porto was cut by top_k
    assert groups[1]["conflict"]["with"][0]["text"] == "Alice lives in Porto"


def test_normalization():
    assert normalize_text("  Alice\u00a0LIKES   tea. ") == "alice likes tea"
    assert normalize_text("\u201cQuoted\u201d") != ""
    fullwidth = "".join(chr(0xFF00 + ord(c) - 0x20) for c in "Fullwidth")  # NFKC folds it
    assert normalize_text(fullwidth) == "fullwidth"


def test_the_builtin_engine_plugs_in_as_a_source():
    calls = []

    def factory(agent, ctx):
        calls.append((agent, ctx.operation))
        return StaticSource("builtin", [("fact", "from builtin")], provider="builtin")

    previous = federation.builtin_source_factory()
    federation.register_builtin_source(factory)
    try:
        assert federation.builtin_source_factory() is factory
    finally:
        federation.register_builtin_source(previous)
