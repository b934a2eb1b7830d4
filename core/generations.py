"""Process-local copies of rows that any process may change, exact all the same.

Each web process answers most requests from the same few rows (an API key with its
agent and tenant, the agent's policy); reading them on every request costs
statements and ORM time, and a plain time-limited cache would keep a revoked key
working until it expires. Instead, triggers on the copied tables bump a number in
``core_generation`` (one row per cache name) in the same transaction as the change,
and a reader compares that number (one indexed read) with the one its copy was
made under. A change committed by anyone - another web process, the admin, a
shell, raw SQL, an erasure - moves the number before any later request can read
it, so it takes effect on the next request everywhere.

The number only grows: the trigger writes the larger of the old value plus one and
the clock in microseconds, so after a rollback or after the table was emptied (the
test flush) it never comes back to a value a copy was made under. Without a row
(a database no trigger has fired in yet) nothing is cached.

The price is on the writers: a transaction that changes a copied table holds the
generation's row from that change to its commit, so such writes serialize. They
are governance actions (a key revoked, a policy saved), few and short; the hot
bookkeeping writes (a key's last use) are excluded by the triggers.

The migration of the copied tables creates their triggers (governance 0013 for the
identity rows), calling the function of core migration 0004.
"""

from __future__ import annotations

import copy
import threading
from typing import Any, Generic, TypeVar

from django.db import connection

T = TypeVar("T")


def current(name: str) -> int | None:
    """The generation ``name`` now, or None when it has never been bumped."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT value FROM core_generation WHERE name = %s", [name])
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def select_sql(name: str) -> tuple[str, list[Any]]:
    """The same read as a scalar subquery, for a statement that loads the rows to copy
    (so a first read costs no statement of its own)."""
    return "(SELECT value FROM core_generation WHERE name = %s)", [name]


class Cache(Generic[T]):
    """Values per key, each valid under the generation it was stored with. ``get``
    hands out a deep copy, so a request may change what it was given (Django model
    instances collect per-request state) without touching the next request's;
    ``copies=False`` for immutable values."""

    def __init__(self, size: int = 4096, *, copies: bool = True) -> None:
        self.size = size
        self.copies = copies
        self.lock = threading.Lock()
        self.entries: dict[Any, tuple[int, T]] = {}

    def generation_of(self, key: Any) -> int | None:
        """The generation ``key``'s value was stored under, if any."""
        entry = self.entries.get(key)
        return None if entry is None else entry[0]

    def get(self, key: Any, generation: int | None) -> T | None:
        entry = self.entries.get(key)
        if entry is None or generation is None or entry[0] != generation:
            return None
        return copy.deepcopy(entry[1]) if self.copies else entry[1]

    def put(self, key: Any, generation: int | None, value: T) -> None:
        if generation is None:
            return
        with self.lock:
            if len(self.entries) >= self.size and key not in self.entries:
                # Oldest first (insertion order); a bound, not a policy.
                self.entries.pop(next(iter(self.entries)))
            self.entries[key] = (generation, copy.deepcopy(value) if self.copies else value)

    def update(self, key: Any, generation: int | None, change: Any) -> None:
        """Apply ``change`` to the stored value if it is still the one of ``generation``."""
        with self.lock:
            entry = self.entries.get(key)
            if entry is not None and entry[0] == generation:
                change(entry[1])

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
