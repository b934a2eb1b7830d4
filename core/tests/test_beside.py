"""Reads beside the request (core.beside): on a pooled connection of their own when
that is safe, in the caller's thread otherwise, and the same result either way."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from core import beside
from core.beside import Beside


def _where() -> tuple[int, bool]:
    """The thread a read ran in, and whether that thread held no connection before it."""
    fresh = connection.connection is None
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return threading.get_ident(), fresh


@pytest.mark.django_db
def test_inside_a_transaction_a_read_runs_in_the_callers_thread():
    # A test's transaction, as a caller's: another connection would not see its rows.
    assert connection.in_atomic_block
    read = Beside(_where)
    assert not read.ran_beside
    assert read.result()[0] == threading.get_ident()


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_a_read_runs_beside_on_a_connection_it_hands_back():
    from governance.models import Tenant

    Tenant.objects.create(slug="beside", name="beside")  # committed: every connection sees it
    for _ in range(4):  # more reads than side threads: each thread is used again
        read = Beside(lambda: (_where(), Tenant.objects.filter(slug="beside").count()))
        assert read.ran_beside
        (thread, fresh), count = read.result()
        assert thread != threading.get_ident() and count == 1
        # Every earlier read on that thread handed its connection back to the pool.
        assert fresh
    stats = connection.pool.get_stats()
    assert stats.get("requests_waiting", 0) == 0


@pytest.mark.django_db(transaction=True)
def test_side_reads_turned_off_run_inline(settings):
    settings.FEDMEM_DB_SIDE_READS = 0
    read = Beside(_where)
    assert not read.ran_beside and read.result()[0] == threading.get_ident()


@pytest.mark.django_db(transaction=True)
def test_with_every_permit_taken_a_read_runs_inline():
    release = threading.Event()
    holders = []
    for _ in range(beside._threads()[1]._initial_value):
        holders.append(Beside(lambda: release.wait(10)))
    try:
        assert all(h.ran_beside for h in holders)
        read = Beside(_where)
        assert not read.ran_beside and read.result()[0] == threading.get_ident()
    finally:
        release.set()
        for h in holders:
            h.result()
    # The permits came back: the next read runs beside again.
    assert Beside(_where).ran_beside


@pytest.mark.django_db(transaction=True)
def test_a_side_reads_error_reaches_the_caller():
    def fails() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 / 0")

    read = Beside(fails)
    assert read.ran_beside
    with pytest.raises(Exception, match="division by zero"):
        read.result()
    # Its permit and its connection came back.
    assert Beside(_where).result()[1]


@pytest.mark.django_db(transaction=True)
def test_a_side_read_sees_the_callers_context_variables():
    import contextvars

    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")
    marker.set("request")
    read = Beside(marker.get)
    assert read.ran_beside and read.result() == "request"


@pytest.mark.django_db(transaction=True)
def test_with_another_request_in_flight_a_read_runs_inline():
    # The caller's own request alone: beside.
    with beside.serving():
        assert Beside(_where).ran_beside
        # A second request in flight in this process: the cores have their work.
        with beside.serving():
            read = Beside(_where)
            assert not read.ran_beside and read.result()[0] == threading.get_ident()
        assert Beside(_where).ran_beside


@pytest.mark.django_db(transaction=True)
def test_requests_are_counted_in_flight_until_they_end_whatever_they_answer(client):
    from django.http import StreamingHttpResponse
    from django.test import RequestFactory

    from core.middleware import RequestsInFlightMiddleware

    seen = []

    def view(request):  # type: ignore[no-untyped-def]
        seen.append(beside._in_flight)
        if request.path == "/fails":
            raise RuntimeError("the view failed")
        return StreamingHttpResponse(iter([b"never read"]))

    middleware = RequestsInFlightMiddleware(view)
    before = beside._in_flight
    middleware(RequestFactory().get("/streams"))  # its body is never read out
    with pytest.raises(RuntimeError):
        middleware(RequestFactory().get("/fails"))
    assert seen == [before + 1, before + 1]
    assert beside._in_flight == before
    # The API's own requests pass through it: a side read after them runs beside.
    assert client.get("/health").status_code == 200
    assert Beside(_where).ran_beside
