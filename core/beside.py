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

Each side read hands its connection back to the pool when it ends. What it reads
must not depend on the caller's session state: visibility is in every statement's
own condition (:mod:`memory.enforcement`), never in the connection.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.db import connection, connections

T = TypeVar("T")

_lock = threading.Lock()
# The side threads and their permits, made at first use with the setting then.
_side: tuple[ThreadPoolExecutor, threading.BoundedSemaphore] | None = None


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
    try:
        yield
    finally:
        with _flight_lock:
            # A forked child starts from zero (_forget_threads) with no request of its own.
            _in_flight = max(0, _in_flight - 1)


def _alone() -> bool:
    """No other request than the caller's (if any) is in flight in this process."""
    return _in_flight <= 1


def _forget_threads() -> None:
    # A forked child (a Celery worker's pool process) has none of its parent's threads.
    global _side, _lock, _in_flight
    _side, _lock, _in_flight = None, threading.Lock(), 0


os.register_at_fork(after_in_child=_forget_threads)


def _threads() -> tuple[ThreadPoolExecutor, threading.BoundedSemaphore]:
    global _side
    with _lock:
        if _side is None:
            count = max(1, settings.FEDMEM_DB_SIDE_READS)
            _side = (
                ThreadPoolExecutor(max_workers=count, thread_name_prefix="fedmem-beside"),
                threading.BoundedSemaphore(count),
            )
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
            executor, permits = _threads()
            if permits.acquire(blocking=False):
                try:
                    # The caller's context variables go along, as asyncio.to_thread does.
                    context = contextvars.copy_context()
                    self._future = executor.submit(context.run, self._run, permits, fn, args)
                except BaseException:
                    permits.release()
                    raise
                return
        self._value = fn(*args)

    @property
    def ran_beside(self) -> bool:
        return self._future is not None

    @staticmethod
    def _run(permits: threading.BoundedSemaphore, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        try:
            return fn(*args)
        finally:
            try:
                connections.close_all()  # back to the pool
            finally:
                permits.release()

    def result(self) -> T:
        if self._future is None:
            return self._value  # type: ignore[return-value]
        return self._future.result()
