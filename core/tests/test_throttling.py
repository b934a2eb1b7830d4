"""Rate limiting: 429 with Retry-After in the one error body; atomic counters in Redis."""

from __future__ import annotations

import threading

import pytest
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from conftest import assert_error, bearer
from core.env import parse_rate
from governance.tests import factories as f


def test_parse_rate():
    assert parse_rate("600/minute") == (600, 60)
    assert parse_rate("5/s") == (5, 1)
    assert parse_rate("off") is None
    for bad in ("many/minute", "10/fortnight", "10"):
        with pytest.raises(ImproperlyConfigured, match="FEDMEM_API_RATE_LIMIT"):
            parse_rate(bad)


def test_over_the_limit_answers_429_per_key(world, settings):
    settings.API_RATE_LIMIT = "3/hour"
    caches["default"].clear()
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
    redis_cache = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}}
    statuses: list[int] = []
    lock = threading.Lock()

    with override_settings(CACHES=redis_cache):
        caches["default"].clear()

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
        caches["default"].clear()
    assert statuses.count(200) == 40 and statuses.count(429) == 20
