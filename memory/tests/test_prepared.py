"""Statements prepared on the server (FEDMEM_DB_PREPARE_THRESHOLD), and the ones that
never are: a nearest-neighbour search keeps a plan made for its values, so one tenant's
size never chooses the index another tenant's search runs on. A statement marked as
computing distances of rows it chose otherwise (CHOSEN_ROWS) is prepared like any other."""

from __future__ import annotations

from datetime import UTC, datetime

from django.conf import settings
from django.db import connection
from django.db.backends.postgresql.base import ServerBindingCursor

from memory.enforcement import Keys
from memory.retrieval.hybrid import RecallQuery, retrieve
from memory.retrieval.vectors import CHOSEN_ROWS, DISTANCE, planned_per_run
from memory.tests.conftest import remember


def _prepared() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_recalls_prepare_their_statements_but_never_a_vector_search(access):
    for text in ("The billing service failed at noon.", "Checkout timed out for three users."):
        remember(access, text)
    keys = Keys(user_id="cust-1", narrow=True)
    runs = settings.DATABASES["default"]["OPTIONS"]["prepare_threshold"] + 2
    for n in range(runs):
        query = RecallQuery(query=f"why did billing fail {n}", scopes=("user",), keys=keys, top_k=3)
        assert [hit.item.content for hit in retrieve(access, query)][:1] == [
            "The billing service failed at noon."
        ]
    prepared = _prepared()
    # The recall's lexical statements ran often enough to be prepared, and the one
    # fusing the lists, which scores the candidates' distances...
    assert any("search_vector" in statement for statement in prepared)
    assert any(CHOSEN_ROWS in statement for statement in prepared)
    # ...its vector search as often, and it is planned each run.
    assert not [s for s in prepared if DISTANCE in s and CHOSEN_ROWS not in s]


def test_a_recall_naming_a_time_keeps_its_dated_search_planned_per_run(access):
    # The dated candidates are a nearest-neighbour search inside the fused statement.
    remember(access, "The billing service failed at noon.", occurred_at=datetime(2023, 5, 8, 12, tzinfo=UTC))
    remember(access, "Checkout timed out for three users.")
    keys = Keys(user_id="cust-1", narrow=True)
    runs = settings.DATABASES["default"]["OPTIONS"]["prepare_threshold"] + 2
    for n in range(runs):
        query = RecallQuery(query=f"what failed in May 2023 {n}", scopes=("user",), keys=keys, top_k=3)
        hits = retrieve(access, query)
        assert hits[0].item.content == "The billing service failed at noon."
        assert hits[0].signals.get("time_match") is True
    prepared = _prepared()
    assert any("search_vector" in statement for statement in prepared)
    assert not [s for s in prepared if DISTANCE in s and CHOSEN_ROWS not in s]
    assert not [s for s in prepared if "occurred_at" in s and DISTANCE in s]


def test_a_generic_plan_of_the_fused_statement_ranks_as_a_plan_per_run(access):
    # Sessions of several turns, so the neighbour probes and the anchors have rows.
    for session in range(4):
        for turn, text in enumerate(
            (
                f"Ticket {session}: the billing service failed at noon.",
                f"Ticket {session}: checkout timed out for three users.",
                f"Ticket {session}: the cache was cold after the deploy.",
                f"Ticket {session}: we rolled back and latency recovered.",
            )
        ):
            remember(access, text, session_id=f"s{session}", user_id="cust-1")
    keys = Keys(user_id="cust-1", narrow=True)
    queries = ["why did billing fail", "what happened after the deploy", "latency recovered", "checkout"]
    runs = settings.DATABASES["default"]["OPTIONS"]["prepare_threshold"] + 2

    def ranked(mode: str) -> list[list[tuple[str, float]]]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('plan_cache_mode', %s, false)", [mode])
        out = []
        for n in range(runs):
            for text in queries:
                hits = retrieve(access, RecallQuery(query=text, scopes=("user",), keys=keys, top_k=6))
                if n == runs - 1:
                    out.append([(hit.item.content, round(hit.score, 9)) for hit in hits])
        return out

    try:
        per_run = ranked("force_custom_plan")
        generic = ranked("force_generic_plan")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET plan_cache_mode")
    assert any(CHOSEN_ROWS in statement for statement in _prepared())
    assert all(len(hits) == 6 for hits in per_run)
    assert generic == per_run


def test_a_vector_search_cursor_still_prepares_what_the_caller_asks_for(db):
    cursor_class = planned_per_run(ServerBindingCursor)
    assert planned_per_run(ServerBindingCursor) is cursor_class  # one class per base
    assert planned_per_run(cursor_class) is cursor_class
    with connection.cursor() as wrapper:
        raw = wrapper.cursor
        assert isinstance(raw, cursor_class)  # every connection gets it when it opens
        sql = f"SELECT '[1,0]'::vector {DISTANCE} %s::vector"
        raw.execute(sql, ["[0,1]"], prepare=True)  # an explicit choice wins
        assert raw.fetchone() == (1.0,)
    assert any(DISTANCE in statement for statement in _prepared())
