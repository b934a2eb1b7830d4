"""API rate limiting: a fixed window per API key (or user, or address).

Counting uses the ``counters`` cache (``core.counters.count_hit``, atomic): Redis
with ``REDIS_URL``, otherwise a table (``core.counters``, one upsert per request).
Either way every web process shares one counter per caller.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.cache import caches
from rest_framework.throttling import BaseThrottle

from core.counters import count_hit
from core.env import parse_rate


class ApiKeyRateThrottle(BaseThrottle):
    def __init__(self) -> None:
        self.wait_seconds: float | None = None

    def ident(self, request: Any) -> str:
        key = getattr(request, "auth", None)
        if key is not None and getattr(key, "pk", None) is not None:
            return f"key:{key.pk}"
        user = getattr(request, "user", None)
        if user is not None and getattr(user, "pk", None) is not None:
            return f"user:{user.pk}"
        return f"addr:{self.get_ident(request)}"

    def allow_request(self, request: Any, view: Any) -> bool:
        rate = parse_rate(settings.API_RATE_LIMIT)
        if rate is None:
            return True
        limit, period = rate
        now = time.time()
        window = int(now // period)
        counter = f"fedmem:rl:{self.ident(request)}:{period}:{window}"
        count = count_hit(caches["counters"], counter, period + 1)
        if count > limit:
            self.wait_seconds = period - (now % period)
            return False
        return True

    def wait(self) -> float | None:
        return self.wait_seconds
