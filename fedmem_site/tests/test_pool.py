"""The worker's prefork pool survives a SIGKILLed idle child (fedmem_site/pool.py)."""

from __future__ import annotations

import os
import signal
import threading
import time

from billiard.pool import Pool

from fedmem_site.pool import RobustBlockingPool


def _wait_until_idle_child_holds_lock(pool: Pool) -> None:
    deadline = time.monotonic() + 30
    while pool._inqueue._rlock._semlock._get_value() != 0:
        assert time.monotonic() < deadline, "the idle child never blocked on the job pipe"
        time.sleep(0.05)


def _wait_until_replaced(pool: Pool, pid: int) -> None:
    deadline = time.monotonic() + 30
    while not any(p.pid != pid and p._is_alive() for p in pool._pool):
        assert time.monotonic() < deadline, "the killed child was never replaced"
        time.sleep(0.05)


def test_replacement_of_a_killed_idle_child_takes_the_next_job():
    pool = RobustBlockingPool(processes=1)
    try:
        first = pool.apply_async(os.getpid).get(timeout=60)
        # The idle child now waits for a job inside the job pipe's lock.
        _wait_until_idle_child_holds_lock(pool)
        os.kill(first, signal.SIGKILL)
        # The next job is sent once the replacement runs: sent earlier, it could reach
        # the killed child's pipe read before the kill took effect and die with it (a
        # job lost to the kill itself, which Celery's late acknowledgement redelivers),
        # and the test timed out about once in a dozen runs.
        _wait_until_replaced(pool, first)
        second = pool.apply_async(os.getpid).get(timeout=60)
        assert second != first
    finally:
        pool.terminate()


def _terminates(pool: Pool, timeout: float = 60) -> bool:
    done = threading.Thread(target=pool.terminate, daemon=True)
    done.start()
    done.join(timeout)
    return not done.is_alive()


def test_terminate_right_after_the_only_child_was_killed_returns():
    pool = RobustBlockingPool(processes=1)
    child = pool.apply_async(os.getpid).get(timeout=60)
    _wait_until_idle_child_holds_lock(pool)
    os.kill(child, signal.SIGKILL)  # before the supervisor can replace it
    assert _terminates(pool), "terminate waited for a lock the killed child held"


def test_terminate_of_an_idle_pool_returns_every_time():
    # Each round races the supervisor against the children taking their stop sentinel.
    for _ in range(5):
        pool = RobustBlockingPool(processes=1)
        pool.apply_async(os.getpid).get(timeout=60)
        _wait_until_idle_child_holds_lock(pool)
        assert _terminates(pool)


def test_celery_prefork_uses_the_robust_pool():
    from celery.concurrency import prefork

    import fedmem_site.celery  # noqa: F401 - installs the pool

    assert prefork.TaskPool.BlockingPool is RobustBlockingPool
