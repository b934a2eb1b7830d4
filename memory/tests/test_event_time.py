"""Event time: ``occurred_at`` on write (validated, stored, rendered) and the times a
query names as a ranking signal and a candidate list of hybrid recall."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.test import override_settings

from conftest import assert_error
from core.errors import ApiError
from memory.enforcement import Keys
from memory.models import MemoryItem
from memory.retrieval.hybrid import RecallQuery, retrieve
from memory.retrieval.when import Windows, windows
from memory.services.items import MemoryDraft
from memory.tests.conftest import memories_url, recall_url, remember

NOW = datetime(2026, 12, 1, 15, 30, tzinfo=UTC)


def _day(y, m, d):
    return datetime(y, m, d, tzinfo=UTC)


# --- reading the times a query names ---------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (
            "What painting did she show on October 13, 2023?",
            Windows(((_day(2023, 10, 13), _day(2023, 10, 14)),)),
        ),
        ("the outage on 8 May 2023", Windows(((_day(2023, 5, 8), _day(2023, 5, 9)),))),
        ("the release of 2024-02-29", Windows(((_day(2024, 2, 29), _day(2024, 3, 1)),))),
        ("What did they paint in July 2023?", Windows(((_day(2023, 7, 1), _day(2023, 8, 1)),))),
        ("rollout in December, 2022", Windows(((_day(2022, 12, 1), _day(2023, 1, 1)),))),
        ("How often did she go to the beach in 2023?", Windows(((_day(2023, 1, 1), _day(2024, 1, 1)),))),
        ("When did Melanie go camping in June?", Windows(months=(6,))),
        # A day without a year stands for its month of any year.
        ("the meeting on 3 March", Windows(months=(3,))),
        ("What happened in May?", Windows(months=(5,))),
    ],
)
def test_windows_read_days_months_and_years(query, expected):
    assert windows(query, NOW) == expected


def test_windows_relative_to_the_moment_of_the_query():
    assert windows("what broke yesterday?", NOW) == Windows(((_day(2026, 11, 30), _day(2026, 12, 1)),))
    # 1 December 2026 is a Tuesday: last week is the calendar week before, up to today.
    assert windows("what did we decide last week", NOW) == Windows(((_day(2026, 11, 23), _day(2026, 12, 2)),))
    assert windows("this month", NOW) == Windows(((_day(2026, 12, 1), _day(2027, 1, 1)),))
    assert windows("last month", NOW) == Windows(((_day(2026, 11, 1), _day(2026, 12, 1)),))
    assert windows("last year", NOW) == Windows(((_day(2025, 1, 1), _day(2026, 1, 1)),))
    assert windows("last month", _day(2026, 1, 10)) == Windows(((_day(2025, 12, 1), _day(2026, 1, 1)),))


@pytest.mark.parametrize(
    "query",
    [
        "May I change the billing address?",
        "The deploy may fail when the disk is full",
        "a march through the city",  # lower case: not a month
        "order 2023 of 5000 units",  # a bare number, no preposition
        "the 31 June 2023 batch",  # no such day
        "What is Caroline's favourite book?",
    ],
)
def test_windows_ignore_what_names_no_time(query):
    assert not windows(query, NOW)


def test_may_is_a_month_after_a_preposition_or_before_a_day_or_year():
    assert windows("plans for May", NOW) == Windows(months=(5,))
    assert windows("May 2023 review", NOW) == Windows(((_day(2023, 5, 1), _day(2023, 6, 1)),))
    assert windows("Since May, the build is slow", NOW) == Windows(months=(5,))


def test_windows_contains_is_half_open_and_in_utc():
    win = windows("in July 2023", NOW)
    assert win.contains(datetime(2023, 7, 31, 23, 59, tzinfo=UTC))
    assert not win.contains(_day(2023, 8, 1))
    assert not win.contains(None)
    # 1 August 01:00 in Paris is 31 July 23:00 UTC.
    from zoneinfo import ZoneInfo

    assert win.contains(datetime(2023, 8, 1, 1, 0, tzinfo=ZoneInfo("Europe/Paris")))


# --- writing occurred_at ---------------------------------------------------------------


def test_remember_stores_and_renders_occurred_at(world, as_agent):
    body = {
        "content": "We painted a sunset together",
        "user_id": "cust-1",
        "occurred_at": "2023-07-08T13:56:00+02:00",
    }
    response = as_agent(world.agent).post(memories_url(world.agent), body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["occurred_at"] == "2023-07-08T11:56:00Z"
    item = MemoryItem.objects.get(pk=response.json()["id"])
    assert item.occurred_at == datetime(2023, 7, 8, 11, 56, tzinfo=UTC)
    assert item.created_at > item.occurred_at  # the time of storage is its own
    plain = as_agent(world.agent).post(
        memories_url(world.agent), {**body, "occurred_at": None, "content": "x y"}, format="json"
    )
    assert plain.status_code == 201 and plain.json()["occurred_at"] is None


@pytest.mark.parametrize(
    "value", ["2023-07-08T13:56:00", "8 July 2023", "2023-13-01T00:00:00Z", 1688824560, ""]
)
def test_remember_refuses_a_bad_or_naive_occurred_at(world, as_agent, value):
    body = {"content": "We painted a sunset together", "user_id": "cust-1", "occurred_at": value}
    response = as_agent(world.agent).post(memories_url(world.agent), body, format="json")
    error = assert_error(response, 400, "validation_error")
    assert "occurred_at" in error["details"]["fields"], error
    assert not MemoryItem.objects.exists()


def test_batch_refuses_only_the_item_with_a_naive_occurred_at(world, as_agent):
    items = [
        {
            "content": "Caroline: I went to the support group",
            "user_id": "cust-1",
            "occurred_at": "2023-05-08T13:56:00Z",
        },
        {"content": "Melanie: That's great", "user_id": "cust-1", "occurred_at": "2023-05-08T13:56:00"},
    ]
    response = as_agent(world.agent).post(
        memories_url(world.agent, "/batch"), {"items": items}, format="json"
    )
    assert response.status_code == 201
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["created", "error"]
    assert "occurred_at" in results[1]["error"]["details"]["fields"]


def test_the_service_refuses_a_naive_occurred_at(access):
    with pytest.raises(ApiError) as raised:
        remember(access, "a naive time", occurred_at=datetime(2023, 5, 8, 13, 56))
    assert raised.value.code == "validation_error" and "occurred_at" in raised.value.details["fields"]


def test_an_unset_occurred_at_keeps_the_request_hash():
    # Idempotency-Key replays compare this hash: a draft without the field hashes as before it existed.
    draft = MemoryDraft(content="same")
    assert draft.fingerprint() != MemoryDraft(content="same", occurred_at=NOW).fingerprint()
    import hashlib
    import json
    from dataclasses import asdict

    before = {k: v for k, v in asdict(draft).items() if k != "occurred_at"}
    assert (
        draft.fingerprint()
        == hashlib.sha256(json.dumps(before, sort_keys=True, default=str).encode()).hexdigest()
    )


# --- ranking ----------------------------------------------------------------------------


def _recall(access, query, top_k=10, **extra):
    keys = Keys(user_id="cust-1", narrow=True)
    return retrieve(access, RecallQuery(query=query, scopes=("user",), keys=keys, top_k=top_k, **extra))


def _story(access):
    """Similar turns said on different days; the July one answers with none of the query's words."""
    said = {
        "Melanie: We painted a sunset with a palm tree, the kids loved it!": _day(2023, 7, 15),
        "Melanie: I love painting landscapes with my kids.": _day(2023, 5, 20),
        "Melanie: Painting with my family is my favourite hobby.": _day(2023, 9, 2),
        "Melanie: My kids painted pottery at the workshop.": _day(2023, 10, 1),
    }
    return {text: remember(access, text, occurred_at=when).item for text, when in said.items()}


def test_a_named_month_lifts_the_items_said_in_it(access):
    items = _story(access)
    july = items["Melanie: We painted a sunset with a palm tree, the kids loved it!"]
    query = "What did Melanie and her kids paint in July 2023?"
    hits = _recall(access, query)
    by_pk = {hit.item.pk: hit for hit in hits}
    assert hits[0].item.pk == july.pk
    assert by_pk[july.pk].signals["time_match"] is True
    assert all("time_match" not in h.signals for h in hits if h.item.pk != july.pk)
    with override_settings(FEDMEM_HYBRID_TIME_WEIGHT=0.0):
        plain = {hit.item.pk: hit for hit in _recall(access, query)}
    assert "time_match" not in plain[july.pk].signals
    # Linear fusion: the bonus is the weight, on top of the score it had without it.
    from django.conf import settings

    assert by_pk[july.pk].score == pytest.approx(
        plain[july.pk].score + settings.FEDMEM_HYBRID_TIME_WEIGHT, rel=1e-4
    )


def test_a_month_without_a_year_matches_that_month_of_any_year(access):
    items = _story(access)
    hits = _recall(access, "What did Melanie do in October?")
    matched = {hit.item.pk for hit in hits if hit.signals.get("time_match")}
    assert matched == {items["Melanie: My kids painted pottery at the workshop."].pk}


@override_settings(FEDMEM_RETRIEVAL_CANDIDATES=2)
def test_items_inside_the_named_time_join_the_candidates(access):
    for n in range(6):
        remember(
            access,
            f"Melanie: painting class number {n} with the kids was fun",
            occurred_at=_day(2023, 6, n + 1),
        )
    dated = remember(
        access, "Caroline: I finally adopted a dog from the shelter!", occurred_at=_day(2022, 3, 4)
    ).item
    query = "What did Melanie paint with the kids in March 2022?"
    # Neither the two nearest nor the two best lexical candidates hold it...
    with override_settings(FEDMEM_HYBRID_TIME_WEIGHT=0.0):
        assert dated.pk not in {hit.item.pk for hit in _recall(access, query)}
    # ...the time list does, and the bonus marks it.
    by_pk = {hit.item.pk: hit for hit in _recall(access, query)}
    assert by_pk[dated.pk].signals["time_match"] is True


def test_a_query_naming_no_time_ranks_as_before(access):
    _story(access)
    query = "What does Melanie like to paint?"
    with override_settings(FEDMEM_HYBRID_TIME_WEIGHT=0.0):
        plain = [(h.item.pk, round(h.score, 6)) for h in _recall(access, query)]
    assert [(h.item.pk, round(h.score, 6)) for h in _recall(access, query)] == plain


def test_time_is_a_hybrid_signal_only(access):
    _story(access)
    for mode in ("vector", "keyword"):
        hits = _recall(access, "What did Melanie paint in July 2023?", mode=mode)
        assert hits and all("time_match" not in h.signals for h in hits)


def test_recall_api_ranks_by_the_time_named(world, as_agent, access):
    _story(access)
    response = as_agent(world.agent).post(
        recall_url(world.agent),
        {"query": "What did Melanie paint in July 2023?", "user_id": "cust-1"},
        format="json",
    )
    assert response.status_code == 200, response.json()
    first = response.json()["results"][0]
    assert "palm tree" in first["content"]


@override_settings(FEDMEM_HYBRID_FUSION="rrf")
def test_rank_fusion_adds_the_time_bonus_as_one_first_place(access):
    items = _story(access)
    july = items["Melanie: We painted a sunset with a palm tree, the kids loved it!"]
    query = "What did Melanie and her kids paint in July 2023?"
    by_pk = {hit.item.pk: hit for hit in _recall(access, query)}
    with override_settings(FEDMEM_HYBRID_TIME_WEIGHT=0.0):
        plain = {hit.item.pk: hit for hit in _recall(access, query)}
    from django.conf import settings

    bonus = settings.FEDMEM_HYBRID_TIME_WEIGHT / (settings.FEDMEM_RRF_K + 1)
    assert by_pk[july.pk].signals["time_match"] is True
    assert by_pk[july.pk].score == pytest.approx(plain[july.pk].score + bonus, rel=1e-4)
