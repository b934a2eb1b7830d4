"""Reads beside the request (core.beside): on a pooled connection of their own when
that is safe, in the caller's thread otherwise, and the same result either way; the
connection a side thread keeps goes back to the pool when it should."""

from __future__ import annotations

import contextlib
import threading
import time

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


def _pool_in_use() -> int:
    stats = connection.pool.get_stats()
    return stats.get("pool_size", 0) - stats.get("pool_available", 0)


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_a_read_runs_beside_on_a_connection_it_keeps_a_moment():
    from governance.models import Tenant

    Tenant.objects.create(slug="beside", name="beside")  # committed: every connection sees it
    seen = []
    for _ in range(4):  # more reads than side threads
        read = Beside(lambda: (_where(), Tenant.objects.filter(slug="beside").count()))
        assert read.ran_beside
        (thread, fresh), count = read.result()
        assert thread != threading.get_ident() and count == 1
        seen.append((thread, fresh))
    # One read after the other: the last thread to finish takes the next read, on the
    # connection it kept, so one connection serves them all.
    assert len({thread for thread, _fresh in seen}) == 1
    assert [fresh for _thread, fresh in seen] == [True, False, False, False]
    in_use = _pool_in_use()
    beside.release_connections()
    assert _pool_in_use() == in_use - 1
    assert connection.pool.get_stats().get("requests_waiting", 0) == 0
    assert Beside(_where).result()[1]  # handed back: the next read takes one again


@pytest.mark.django_db(transaction=True)
def test_a_kept_connection_goes_back_after_a_while_without_reads(monkeypatch):
    monkeypatch.setattr(beside, "HOLD_SECONDS", 0.2)
    beside.release_connections()
    in_use = _pool_in_use()
    read = Beside(_where)
    assert read.ran_beside and read.result()[1]
    assert beside._threads().holding  # kept after the read...
    deadline = time.monotonic() + 5
    while _pool_in_use() > in_use and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _pool_in_use() == in_use  # ...and handed back without another read
    assert not beside._threads().holding


@pytest.mark.django_db(transaction=True)
def test_a_second_request_in_flight_takes_the_kept_connections_back():
    beside.release_connections()
    in_use = _pool_in_use()
    with beside.serving():
        read = Beside(_where)
        assert read.ran_beside and read.result()[1]
        assert _pool_in_use() == in_use + 1
        with beside.serving():  # the process is busy: its pool is for requests
            deadline = time.monotonic() + 5
            while _pool_in_use() > in_use and time.monotonic() < deadline:
                time.sleep(0.01)
            assert _pool_in_use() == in_use


@pytest.mark.django_db(transaction=True)
def test_a_read_that_leaves_a_transaction_or_fails_hands_its_connection_back():
    from django.db import transaction

    def opens() -> None:
        transaction.atomic().__enter__()  # never left: the connection must not serve again
        _where()

    def fails() -> None:
        with connection.cursor() as cursor:  # the connection itself fails
            cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")

    for read in (opens, fails):
        beside.release_connections()
        side = Beside(read)
        with contextlib.suppress(Exception):
            side.result()
        assert not beside._threads().holding
        assert Beside(_where).result()[1]  # a connection taken afresh, and it works


@pytest.mark.django_db(transaction=True)
def test_a_kept_connection_the_server_ended_is_replaced_before_a_read(monkeypatch):
    monkeypatch.setattr(beside, "CHECK_AFTER_SECONDS", 0.0)
    beside.release_connections()
    read = Beside(lambda: (_where(), connection.connection.info.backend_pid))
    (_thread, _fresh), pid = read.result()
    with connection.cursor() as cursor:  # as a server restart or an administrator would
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    time.sleep(0.1)
    (_thread, _fresh), new_pid = Beside(lambda: (_where(), connection.connection.info.backend_pid)).result()
    assert new_pid != pid


@pytest.mark.django_db(transaction=True)
def test_side_reads_turned_off_run_inline(settings):
    settings.FEDMEM_DB_SIDE_READS = 0
    read = Beside(_where)
    assert not read.ran_beside and read.result()[0] == threading.get_ident()


@pytest.mark.django_db(transaction=True)
def test_with_every_permit_taken_a_read_runs_inline():
    release = threading.Event()
    holders = []
    for _ in range(beside._threads().permits._initial_value):
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
    # Its permit came back (a failed statement leaves the connection usable).
    assert Beside(_where).ran_beside


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
