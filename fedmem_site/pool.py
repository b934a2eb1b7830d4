"""The prefork pool, made to survive a SIGKILLed child on a broker without an event loop.

Brokers without asynchronous I/O (kombu's filesystem transport, the default here) run
Celery's prefork pool in billiard's thread-driven ``Pool``: every child reads jobs
from one shared pipe guarded by a process-shared lock, and an idle child blocks in
that read *holding the lock*. A child killed there (OOM killer, ``kill -9``) leaves
the lock taken forever, and the child forked to replace it waits on it for good: the
worker looks alive and does nothing. The same goes for the result pipe's write lock
if the child dies mid-write.

When the pool has a single child, no other process can legitimately hold those
locks once that child is gone, so the replacement is preceded by releasing them.
With several children a live child may hold the lock, so nothing is released; the
operations guide says to run one child per worker process on the filesystem broker
(and scale with more worker processes), or to use Redis, whose event-loop pool gives
each child its own pipes without locks.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal

from billiard.pool import RUN, Pool, stop_if_not_current

logger = logging.getLogger(__name__)

# How long terminate waits for a SIGKILLed child to be reaped.
CHILD_EXIT_SECONDS = 10


class RobustBlockingPool(Pool):
    def _repopulate_pool(self, exitcodes):
        if self._processes == 1 and not self._pool and self._state == RUN:  # no child alive
            self._release_orphaned_locks()
        return super()._repopulate_pool(exitcodes)

    def terminate(self) -> None:
        # billiard's terminate sends each child a stop sentinel and then takes the job
        # pipe's read lock; it stops the children only after that. The wait for the lock
        # never ends when a live child never gets its sentinel (an idle child blocks in
        # the read holding the lock: seen once more with the supervisor stopped first,
        # the pool test hanging for 10+ minutes on a replacement child), or when the
        # only child was killed holding it. Terminating stops every child anyway, so here
        # the supervisor stops first, then the children (SIGKILL: this is the hard stop;
        # close() and join() are the graceful one), and then no process can hold a lock
        # but a dead one: those are released before billiard's own terminate takes them.
        self._worker_handler.terminate()
        stop_if_not_current(self._worker_handler)
        children = [p for p in self._pool if p._is_alive()]
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
        for child in children:
            child.join(CHILD_EXIT_SECONDS)
        if not any(p._is_alive() for p in self._pool):
            self._release_orphaned_locks()
        super().terminate()

    def _release_orphaned_locks(self) -> None:
        # The parent never takes the job pipe's read lock nor the result pipe's write
        # lock while running; only a dead child can be holding them now.
        for queue, name in ((self._inqueue, "_rlock"), (self._outqueue, "_wlock")):
            lock = getattr(queue, name, None)
            if lock is None:
                continue
            try:
                held = lock._semlock._get_value() == 0
            except (AttributeError, NotImplementedError):  # no sem_getvalue on this platform
                continue
            if held:
                logger.warning("releasing a pool lock left held by a killed worker child")
                lock.release()


def robust_blocking_pool() -> None:
    """Make Celery's prefork pool use :class:`RobustBlockingPool` when it runs without a hub."""
    from celery.concurrency import prefork

    prefork.TaskPool.BlockingPool = RobustBlockingPool
