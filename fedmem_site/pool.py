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

import logging

from billiard.pool import RUN, Pool, stop_if_not_current

logger = logging.getLogger(__name__)


class RobustBlockingPool(Pool):
    def _repopulate_pool(self, exitcodes):
        if self._processes == 1 and not self._pool and self._state == RUN:  # no child alive
            self._release_orphaned_locks()
        return super()._repopulate_pool(exitcodes)

    def terminate(self) -> None:
        # billiard's terminate sends each child a stop sentinel and then takes the job
        # pipe's read lock. Two ways that wait never ends: the supervisor thread forks a
        # replacement for a child that just took its sentinel (the new child blocks in
        # the read, holding the lock, with no sentinel coming), or the only child was
        # killed holding the lock. So the supervisor stops first, and a lock a dead
        # child left is released, as on a replacement.
        self._worker_handler.terminate()
        stop_if_not_current(self._worker_handler)
        if self._processes == 1 and not any(p._is_alive() for p in self._pool):
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
