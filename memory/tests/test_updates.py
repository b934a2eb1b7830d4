"""Update detection (memory.updates) on labelled sentence pairs written for these
tests: update wording, restatements, state changes, and the hard negatives that a
precision-first detector must leave alone (the same subject in another slot,
compatible additions, other subjects, an unrelated negation, numbers that are not
the slot's value, history)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory.contradictions import RuleResolver
from memory.updates import detect, frames

PAIRS = [json.loads(line) for line in (Path(__file__).parent / "data" / "update_pairs.jsonl").open()]
POSITIVES = [p for p in PAIRS if p["label"]]
NEGATIVES = [p for p in PAIRS if not p["label"]]


def _id(pair: dict) -> str:
    return f"{pair['kind']}: {pair['new'][:40]}"


def test_the_set_is_balanced_and_varied():
    assert len(POSITIVES) >= 40 and len(NEGATIVES) >= 40
    assert len({p["kind"] for p in PAIRS}) >= 30


@pytest.mark.parametrize("pair", NEGATIVES, ids=_id)
def test_a_fact_that_is_not_an_update_retires_nothing(pair):
    found = detect(pair["new"], pair["old"])
    assert found is None, found


def test_updates_are_found():
    missed = [p for p in POSITIVES if detect(p["new"], p["old"]) is None]
    recall = 1 - len(missed) / len(POSITIVES)
    # Known miss: a sentence the parser reads without its verb ("The warehouse ships
    # parcels ..." with "ships" as a noun).
    assert recall >= 0.95, [m["new"] for m in missed]


@pytest.mark.parametrize(
    ("old", "new", "rule", "old_value", "new_value"),
    [
        (
            "The retailer routes its northern orders through the Leeds depot.",
            "On May 2 the retailer moved its northern orders from the Leeds depot to the York depot.",
            "change",
            "leeds depot",
            "york depot",
        ),
        (
            "The retailer routes its northern orders through the Leeds depot.",
            "The retailer routes its northern orders through the Hull depot.",
            "restatement",
            "leeds depot",
            "hull depot",
        ),
        (
            "The launch is scheduled for October 2.",
            "The launch was moved to October 16.",
            "change",
            "october 2",
            "october 16",
        ),
        ("The export limit is 50 MB.", "The export limit was raised to 500 MB.", "change", "50 mb", "500 mb"),
        ("Bob reports to Chris.", "Bob no longer reports to Chris.", "negation", "chris", "chris"),
        (
            "The search service runs on Elasticsearch.",
            "The search service now runs on OpenSearch instead of Elasticsearch.",
            "replacement",
            "elasticsearch",
            "opensearch",
        ),
    ],
)
def test_the_verdict_names_the_rule_and_the_values(old, new, rule, old_value, new_value):
    verdict = RuleResolver().check(new, old)
    assert verdict is not None
    assert verdict.details["rule"] == rule
    assert (verdict.details["old_value"], verdict.details["new_value"]) == (old_value, new_value)
    assert verdict.reason


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # An ending reaches a state or plan, not what happened before it.
        ("Chris wrote the deployment runbook.", "Chris left the company."),
        # "also": an added value.
        ("Omar manages the payments team.", "Omar also manages the fraud team."),
        # Both negated: nothing asserted is withdrawn.
        ("The factory does not work night shifts.", "The factory does not open on Sundays."),
        # The replaced name is the old fact's subject, not its value.
        (
            "Redis runs on the same node as Elasticsearch.",
            "Checkout now stores carts in Postgres instead of Redis.",
        ),
        # Another value in two slots at once is another claim.
        ("The kitchen is closed on Mondays.", "The kitchen is open on Sundays."),
    ],
)
def test_precision_guards(old, new):
    assert detect(new, old) is None


def test_a_misparsed_sentence_is_read_again_with_its_verb():
    # The parser reads "The nightly backup runs at 02:00." as one noun phrase.
    [frame] = frames("The nightly backup runs at 02:00.")
    assert (frame.subject, frame.verb, frame.state) == (("nightly", "backup"), "run", True)
    assert [v.kind for v in frame.values] == ["time"]


def test_tense_and_markers():
    [event] = frames("Omar wrote the incident postmortem.")
    [plan] = frames("The conference will be held in Porto.")
    [update] = frames("Bob no longer reports to Chris.")
    [now] = frames("The default model is now Qwen 3.8.")
    assert not event.state and plan.state
    assert update.negated and not update.now
    assert now.now and now.values[0].kind == "name"
