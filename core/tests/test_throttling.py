"""Rate limiting: 429 with Retry-After in the one error body; atomic counters in Redis."""

from __future__ import annotations

import threading
import time

import pytest
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from conftest import assert_error, bearer
from core.env import parse_rate
from governance.tests import factories as f


def _whole_window(period: int, needed: float = 15.0) -> None:
    """Wait for the next fixed window when the current one ends within ``needed``
    seconds: a test counting hits in one window must not see it roll over (at the
    hour, every count starts again and no request is refused)."""
    left = period - time.time() % period
    if left < needed:
        time.sleep(left + 0.05)


def test_parse_rate():
    assert parse_rate("600/minute") == (600, 60)
    assert parse_rate("5/s") == (5, 1)
    assert parse_rate("off") is None
    for bad in ("many/minute", "10/fortnight", "10"):
        with pytest.raises(ImproperlyConfigured, match="FEDMEM_API_RATE_LIMIT"):
            parse_rate(bad)


def test_over_the_limit_answers_429_per_key(world, settings):
    settings.API_RATE_LIMIT = "3/hour"
    caches["counters"].clear()
    _whole_window(3600)
    first, second = bearer(f.agent_key(world.agent)), bearer(f.agent_key(world.agent))
    for _ in range(3):
        assert first.get("/v1/me").status_code == 200
    response = first.get("/v1/me")
    assert_error(response, 429, "rate_limited")
    assert 0 < int(response["Retry-After"]) <= 3600
    # Another key has its own window.
    assert second.get("/v1/me").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_redis_counters_are_atomic_under_concurrency(world, settings, redis):
    url = redis
    settings.API_RATE_LIMIT = "40/hour"
    secret = f.agent_key(world.agent)
    redis = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}
    redis_cache = {"default": redis, "counters": redis}
    statuses: list[int] = []
    lock = threading.Lock()

    with override_settings(CACHES=redis_cache):
        caches["counters"].clear()
        _whole_window(3600)

        def hammer() -> None:
            from django.db import connection

            client = bearer(secret)
            for _ in range(10):
                code = client.get("/v1/me").status_code
                with lock:
                    statuses.append(code)
            connection.close()

        threads = [threading.Thread(target=hammer) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        caches["counters"].clear()
    assert statuses.count(200) == 40 and statuses.count(429) == 20


def test_the_default_counters_are_one_table_shared_by_every_client(db):
    """Without Redis the counters live in PostgreSQL: two clients (as two web
    processes have) incrementing the same counter at once lose no count."""
    from core.counters import DatabaseCounterCache

    first, second = DatabaseCounterCache("", {}), DatabaseCounterCache("", {})
    assert first.add("fedmem:test:shared", 0, timeout=60)
    assert not second.add("fedmem:test:shared", 0, timeout=60)  # already counting

    def bump(counters: DatabaseCounterCache) -> None:
        for _ in range(50):
            counters.incr("fedmem:test:shared")

    threads = [threading.Thread(target=bump, args=(c,)) for c in (first, second, first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert first.get("fedmem:test:shared") == second.get("fedmem:test:shared") == 200
    # An expired window starts again from the increment.
    second.set("fedmem:test:old", 7, timeout=0)
    assert first.get("fedmem:test:old") is None and first.incr("fedmem:test:old") == 1
    assert second.delete("fedmem:test:shared") and first.get("fedmem:test:shared", 0) == 0


def test_a_request_costs_two_counter_statements(world, settings, monkeypatch):
    """Every request with a key meets the counters twice: its brute-force check reads
    the address's and the key's failure counters in one statement, its rate limit
    opens or bumps its window in one upsert (it was four: two reads, add, incr)."""
    from core.counters import DatabaseCounterCache
    from governance.models import ApiKey

    settings.API_RATE_LIMIT = "100/hour"
    caches["counters"].clear()
    _whole_window(3600)
    secret = f.agent_key(world.agent)
    client = bearer(secret)
    assert client.get("/v1/me").status_code == 200
    statements: list[str] = []
    execute = DatabaseCounterCache._cursor

    def counted(self, sql, params):
        statements.append(sql)
        return execute(self, sql, params)

    monkeypatch.setattr(DatabaseCounterCache, "_cursor", counted)
    for _ in range(3):
        assert client.get("/v1/me").status_code == 200
    assert len(statements) == 6
    # Each request counted once, in the key's window.
    key = ApiKey.objects.get(prefix=secret.split("_")[1])
    window = int(time.time() // 3600)
    assert caches["counters"].get(f"fedmem:rl:key:{key.pk}:3600:{window}") == 4


def test_a_new_window_counts_from_its_first_hit_for_its_own_period(db):
    """count_hit opens a missing (or expired) counter for the period it is given."""
    from core.counters import DatabaseCounterCache, count_hit

    counters = DatabaseCounterCache("", {})
    assert count_hit(counters, "fedmem:test:window", 60) == 1
    assert count_hit(counters, "fedmem:test:window", 60) == 2
    counters.set("fedmem:test:window", 9, timeout=0)  # expired
    assert count_hit(counters, "fedmem:test:window", 60) == 1
    assert counters.get_many(["fedmem:test:window", "fedmem:test:none"]) == {"fedmem:test:window": 1}
    with counters._conn().execute(
        "SELECT expires_at - now() FROM core_counter WHERE key LIKE %s", ["%fedmem:test:window"]
    ) as cursor:
        (left,) = cursor.fetchone()
    assert 55 < left.total_seconds() <= 60
