"""Counters shared by every process: rate limits and failed-login lockouts.

``fedmem_run`` starts several web processes; a counter in each process's memory
would let a caller multiply every limit by their number. The ``counters`` cache
alias is Redis when ``REDIS_URL`` is set, and otherwise this backend: one row per
counter in ``core_counter``, incremented with one atomic upsert.

It speaks to PostgreSQL on a connection of its own (one per process, autocommit), not
Django's: a count must survive the rollback of the request that failed to log in,
and it must not show up in the request's transaction or its pinned query counts.
Only the counter operations (add, incr, get, get_many, delete, clear) are supported.

Every request meets these counters (the brute-force check of its credential, its
rate limit), so each of those costs one statement here: :func:`count_hit` opens or
bumps a window in one upsert, and ``get_many`` reads several counters in one select.
"""

from __future__ import annotations

import random
import threading
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache

# Expired rows are deleted now and then, by the increments themselves.
PRUNE_EVERY = 500

_UPSERT = """
INSERT INTO core_counter (key, count, expires_at)
VALUES (%(key)s, %(delta)s, now() + make_interval(secs => %(timeout)s))
ON CONFLICT (key) DO UPDATE SET
    count = CASE WHEN core_counter.expires_at <= now() THEN EXCLUDED.count
                 ELSE core_counter.count + EXCLUDED.count END,
    expires_at = CASE WHEN core_counter.expires_at <= now() THEN EXCLUDED.expires_at
                      ELSE core_counter.expires_at END
RETURNING count
"""


class _Shared:
    """One connection per process, shared by its threads under a lock (a counter
    statement takes well under a millisecond). Not per backend instance: Django
    builds cache backends per thread and async context, so under ASGI every request
    would open (and leave behind) a connection of its own."""

    lock = threading.Lock()
    connection: Any = None
    target: tuple[Any, ...] | None = None


class DatabaseCounterCache(BaseCache):
    """``add`` / ``incr`` / ``get`` / ``delete`` / ``clear`` over ``core_counter``."""

    def __init__(self, location: str, params: dict[str, Any]) -> None:
        super().__init__(params)

    def _conn(self) -> Any:
        import psycopg
        from django.db import connections

        params = connections["default"].settings_dict
        # The test runner renames the database after start-up: follow it.
        target = (params["HOST"], params["PORT"], params["NAME"], params["USER"])
        conn = _Shared.connection
        if conn is not None and (conn.closed or _Shared.target != target):
            conn.close()
            conn = None
        if conn is None:
            # Django's own options, not libpq's (a plain psycopg connection binds on the server).
            options = {
                k: v for k, v in params.get("OPTIONS", {}).items() if k not in ("pool", "server_side_binding")
            }
            # Named, so pg_stat_activity tells this connection from the pool's.
            options.setdefault("application_name", "fedmem-counters")
            conn = psycopg.connect(
                host=params["HOST"] or None,
                port=params["PORT"] or None,
                dbname=params["NAME"],
                user=params["USER"] or None,
                password=params["PASSWORD"] or None,
                autocommit=True,
                **options,
            )
            _Shared.connection, _Shared.target = conn, target
        return conn

    def _cursor(self, sql: str, params: Any) -> Any:
        """The executed cursor; call with ``_Shared.lock`` held."""
        import psycopg

        try:
            return self._conn().execute(sql, params)
        except psycopg.OperationalError:
            # The server restarted or dropped an idle connection: once more, afresh.
            _Shared.connection.close()
            return self._conn().execute(sql, params)

    def _execute(self, sql: str, params: Any = None) -> tuple[Any, int]:
        """The first row (or None) and the row count."""
        with _Shared.lock:
            cursor = self._cursor(sql, params)
            return (cursor.fetchone() if cursor.description else None), cursor.rowcount

    def _rows(self, sql: str, params: Any) -> list[Any]:
        with _Shared.lock:
            return list(self._cursor(sql, params).fetchall())

    @property
    def connected(self) -> bool:
        return _Shared.connection is not None and not _Shared.connection.closed

    def _seconds(self, timeout: Any) -> float:
        seconds = self.get_backend_timeout(timeout)
        return 10 * 365 * 86400.0 if seconds is None else max(0.0, float(seconds) - _now_offset())

    def add(self, key: str, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        row, _ = self._execute(
            "INSERT INTO core_counter (key, count, expires_at) "
            "VALUES (%s, %s, now() + make_interval(secs => %s)) "
            "ON CONFLICT (key) DO UPDATE SET count = EXCLUDED.count, expires_at = EXCLUDED.expires_at "
            "WHERE core_counter.expires_at <= now() RETURNING 1",
            [self.make_and_validate_key(key, version), int(value), self._seconds(timeout)],
        )
        return row is not None

    def incr(self, key: str, delta: int = 1, version: int | None = None) -> int:
        """Atomic. Unlike other backends, a missing counter starts at ``delta``
        (valid for the backend's default timeout) instead of raising."""
        return self.incr_window(key, DEFAULT_TIMEOUT, delta=delta, version=version)

    def incr_window(self, key: str, timeout: Any, *, delta: int = 1, version: int | None = None) -> int:
        """``add(key, 0, timeout)`` then ``incr(key, delta)`` as one atomic statement:
        a missing or expired counter starts at ``delta`` for ``timeout`` seconds."""
        if random.randrange(PRUNE_EVERY) == 0:  # noqa: S311 - when to prune, not a secret
            self._execute("DELETE FROM core_counter WHERE expires_at <= now()")
        key = self.make_and_validate_key(key, version)
        row, _ = self._execute(_UPSERT, {"key": key, "delta": delta, "timeout": self._seconds(timeout)})
        return int(row[0])

    def get(self, key: str, default: Any = None, version: int | None = None) -> Any:
        row, _ = self._execute(
            "SELECT count FROM core_counter WHERE key = %s AND expires_at > now()",
            [self.make_and_validate_key(key, version)],
        )
        return default if row is None else int(row[0])

    def get_many(self, keys: Any, version: int | None = None) -> dict[str, Any]:
        """The live counters among ``keys``, in one statement."""
        names = {self.make_and_validate_key(key, version): key for key in keys}
        if not names:
            return {}
        rows = self._rows(
            "SELECT key, count FROM core_counter WHERE key = ANY(%s) AND expires_at > now()", [list(names)]
        )
        return {names[key]: int(count) for key, count in rows}

    def set(self, key: str, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        self._execute(
            "INSERT INTO core_counter (key, count, expires_at) "
            "VALUES (%s, %s, now() + make_interval(secs => %s)) "
            "ON CONFLICT (key) DO UPDATE SET count = EXCLUDED.count, expires_at = EXCLUDED.expires_at",
            [self.make_and_validate_key(key, version), int(value), self._seconds(timeout)],
        )

    def delete(self, key: str, version: int | None = None) -> bool:
        _, count = self._execute(
            "DELETE FROM core_counter WHERE key = %s", [self.make_and_validate_key(key, version)]
        )
        return bool(count)

    def touch(self, key: str, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        raise NotImplementedError("counters do not move their windows")

    def clear(self) -> None:
        self._execute("DELETE FROM core_counter")

    def close(self, **kwargs: Any) -> None:
        pass  # kept for the next request; one connection per thread

    def close_all(self) -> None:
        """Close the connection (before a test database is dropped)."""
        with _Shared.lock:
            if _Shared.connection is not None:
                _Shared.connection.close()
            _Shared.connection = None


def count_hit(cache: BaseCache, key: str, timeout: int, delta: int = 1) -> int:
    """Count ``delta`` hits on the window counter ``key`` (which lives ``timeout``
    seconds from its first hit) and return the count so far, atomically on any
    backend: one statement on this module's table, ``add`` then ``incr`` elsewhere
    (Redis)."""
    if isinstance(cache, DatabaseCounterCache):
        return cache.incr_window(key, timeout, delta=delta)
    cache.add(key, 0, timeout=timeout)
    try:
        return int(cache.incr(key, delta))
    except ValueError:  # expired between add and incr: start the window again
        cache.add(key, delta, timeout=timeout)
        return delta


def _now_offset() -> float:
    # get_backend_timeout returns an absolute time.time() deadline.
    import time

    return time.time()
