"""Independent reads of one request, run beside it on a second pooled connection.

A graph rank waits for some thirty statements, several of which depend on none of
the others (a round's term bridges, its causal neighbours and its mentions); run
one after another, the database works while Python waits and Python works while
the database waits. :class:`Beside` starts such a read on a thread of its own with
a connection of its own from the process's pool, while the caller goes on; its
``result()`` waits for it.

A read runs beside only where that is safe and can pay, and otherwise right away in
the caller's thread, statement for statement as if it were written inline:

* the connection pool is on (a new connection per read costs more than the
  overlap wins) and has an idle connection now, or room for one more;
* the caller is in no transaction: another connection would not see its
  uncommitted rows (a test's transaction included), nor read in its snapshot;
* the caller's request is the only one this process serves now (a task or a
  command serves none): with other requests in flight the cores have their work,
  an overlap wins nothing and the threads cost their switches (docs/performance.md);
* fewer than ``FEDMEM_DB_SIDE_READS`` reads of this process are beside already
  (0 turns side reads off). The permits bound what a process takes from its pool
  for side reads, so a request waiting for its side read never waits for a
  connection that other waiting requests hold: at most that many callers wait, and
  the pool's other connections belong to requests that finish on their own. Under
  load the permits are mostly taken and the reads run inline: with every core busy
  an overlap has nothing to win.

A side thread keeps its connection after a read for up to ``HOLD_SECONDS`` while its
process serves one request at a time: a graph recall runs eight or nine side reads,
and taking a connection from the pool for each (the pool's health check, a round
trip, and Django's connection set-up) cost 0.3-0.4 ms of CPU per read. The
connection goes back to the pool when the thread has had no read for that long,
when another request comes in (``serving`` tells the side threads at once: a busy
process needs its pool for requests), and when a read left it in a transaction or
failed on it. A connection idle for more than ``CHECK_AFTER_SECONDS`` is checked
(one round trip) before a read, as the pool checks the connections it hands out.
What a side read reads must not depend on the caller's session state: visibility
is in every statement's own condition (:mod:`memory.enforcement`), never in the
connection.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections

T = TypeVar("T")
logger = logging.getLogger(__name__)

# A side thread's connection goes back to the pool after this long without a read.
HOLD_SECONDS = 2.0
# A kept connection idle longer than this is checked (one round trip) before a read.
CHECK_AFTER_SECONDS = 0.5

_lock = threading.Lock()


# Requests this process serves now, counted by core.middleware.RequestsInFlightMiddleware
# around the whole middleware stack (down again in a finally, whatever the view did).
_in_flight = 0
_flight_lock = threading.Lock()


@contextlib.contextmanager
def serving() -> Iterator[None]:
    """The caller serves a request while inside (core.middleware counts every one)."""
    global _in_flight
    with _flight_lock:
        _in_flight += 1
        crowded = _in_flight == 2
    if crowded and _side is not None and _side.holding:
        _side.release_connections()
    try:
        yield
    finally:
        with _flight_lock:
            # A forked child starts from zero (_forget_threads) with no request of its own.
            _in_flight = max(0, _in_flight - 1)


def _alone() -> bool:
    """No other request than the caller's (if any) is in flight in this process."""
    return _in_flight <= 1


class _Side:
    """The side threads of a process, each with a queue of its own, and the permits
    that bound how many reads are beside at once (one per thread, so a caller that
    holds a permit always finds an idle thread)."""

    def __init__(self, count: int) -> None:
        self.permits = threading.BoundedSemaphore(count)
        self.queues: list[queue.SimpleQueue[Any]] = [queue.SimpleQueue() for _ in range(count)]
        # Idle threads by number, the last one to finish on top: it is the likeliest to
        # hold a connection still, so a process keeps as few as its reads need.
        self.idle = list(range(count))
        self.idle_lock = threading.Lock()
        # The threads that keep a connection now (read without the lock: a hint).
        self.holding: set[int] = set()
        for number in range(count):
            threading.Thread(
                target=self._loop, args=(number,), name=f"fedmem-beside_{number}", daemon=True
            ).start()

    def submit(self, fn: Callable[..., T], args: tuple[Any, ...]) -> Future[T]:
        """Run ``fn(*args)`` on an idle thread; the caller holds a permit."""
        future: Future[T] = Future()
        with self.idle_lock:
            number = self.idle.pop()
        # The caller's context variables go along, as asyncio.to_thread does.
        self.queues[number].put((future, contextvars.copy_context(), fn, args))
        return future

    def release_connections(self, timeout: float | None = None) -> None:
        """Every thread hands its connection back once it is idle (now, or after its
        read); with a ``timeout``, wait up to that long until each has."""
        done = [threading.Event() for _ in self.queues]
        for jobs, event in zip(self.queues, done, strict=True):
            jobs.put(event)
        if timeout is not None:
            deadline = time.monotonic() + timeout
            for event in done:
                event.wait(max(0.0, deadline - time.monotonic()))

    def _loop(self, number: int) -> None:
        jobs = self.queues[number]
        held_since: float | None = None  # when the kept connection's last read ended
        while True:
            try:
                job = jobs.get(timeout=HOLD_SECONDS if held_since is not None else None)
            except queue.Empty:
                job = None
            if job is None or isinstance(job, threading.Event):
                if held_since is not None:
                    held_since = None
                    self.holding.discard(number)
                    try:
                        connections.close_all()  # back to the pool
                    except Exception:  # a broken connection: the pool discards it
                        logger.warning("a side read's connection did not close cleanly", exc_info=True)
                if job is not None:
                    job.set()
                continue
            future, context, fn, args = job
            outcome: Any = None
            failure: BaseException | None = None
            try:
                if held_since is not None and time.monotonic() - held_since > CHECK_AFTER_SECONDS:
                    # As the pool checks a connection it hands out (Django leaves pooled
                    # connections to it); a broken one goes back, the read takes another.
                    kept = connections[DEFAULT_DB_ALIAS]
                    if not kept.is_usable():
                        kept.close()
                outcome = context.run(fn, *args)
            except BaseException as exc:  # handed to the caller
                failure = exc
            held_since = None
            try:
                if _keep():
                    held_since = time.monotonic()
            except BaseException as exc:  # a connection that would not close: the read's error
                failure = failure or exc
            finally:
                (self.holding.add if held_since is not None else self.holding.discard)(number)
                with self.idle_lock:
                    self.idle.append(number)
                self.permits.release()
                if failure is None:
                    future.set_result(outcome)
                else:
                    future.set_exception(failure)


def _keep() -> bool:
    """Whether this side thread keeps its connection for the next read; if not, every
    connection it opened goes back to the pool now."""
    kept = connections[DEFAULT_DB_ALIAS]  # the wrapper ``connection`` proxies
    keep = (
        kept.connection is not None
        and not kept.in_atomic_block
        and not kept.needs_rollback
        and not kept.errors_occurred
        and kept.get_autocommit()
        and _alone()
    )
    for other in connections.all(initialized_only=True):
        if other is not kept or not keep:
            other.close()  # back to the pool, rolled back if a transaction was left open
            if other.in_atomic_block:
                # Left inside an atomic block (a bug of the read): the wrapper would
                # refuse every later read on this thread, so the next one gets a new one.
                del connections[other.alias]
    return keep


# The side threads, made at first use with the setting then.
_side: _Side | None = None


def release_connections(timeout: float = 5.0) -> None:
    """Hand every connection the side threads keep back to the pool, and wait for it
    (a test database is dropped only when no connection is open on it)."""
    if _side is not None:
        _side.release_connections(timeout)


def _forget_threads() -> None:
    # A forked child (a Celery worker's pool process) has none of its parent's threads.
    global _side, _lock, _in_flight
    _side, _lock, _in_flight = None, threading.Lock(), 0


os.register_at_fork(after_in_child=_forget_threads)


def _threads() -> _Side:
    global _side
    with _lock:
        if _side is None:
            _side = _Side(max(1, settings.FEDMEM_DB_SIDE_READS))
        return _side


def _pool_has_room() -> bool:
    """The caller's database has a connection pool with an idle connection now, or room
    to open one (kept in the pool afterwards: a process pays that once)."""
    if not connection.settings_dict.get("OPTIONS", {}).get("pool"):
        return False
    try:
        stats = connection.pool.get_stats()
    except Exception:  # a pool not opened yet, or a backend without one
        return False
    return stats.get("pool_available", 0) > 0 or stats.get("pool_size", 0) < stats.get("pool_max", 0)


class Beside(Generic[T]):
    """``fn(*args)``, run beside the caller when it may (see the module), else now."""

    def __init__(self, fn: Callable[..., T], *args: Any) -> None:
        self._future: Future[T] | None = None
        self._value: T | None = None
        if (
            settings.FEDMEM_DB_SIDE_READS > 0
            and not connection.in_atomic_block
            and _alone()
            and _pool_has_room()
        ):
            side = _threads()
            if side.permits.acquire(blocking=False):
                try:
                    self._future = side.submit(fn, args)
                except BaseException:
                    side.permits.release()
                    raise
                return
        self._value = fn(*args)

    @property
    def ran_beside(self) -> bool:
        return self._future is not None

    def result(self) -> T:
        if self._future is None:
            return self._value  # type: ignore[return-value]
        return self._future.result()
