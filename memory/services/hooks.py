"""Extension point for work that follows a memory write (extraction, later).

A write answers at once; follow-up work registers a callback here and is run
only after the write's transaction commits, so it never sees rows that were
rolled back. Nothing is registered yet: items carry no extraction status until
the extraction pipeline exists, so no write is ever reported as processed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction

Callback = Callable[[list[Any]], None]
_after_write: list[Callback] = []


def on_items_written(callback: Callback) -> Callback:
    """Register ``callback(item_ids)`` to run after each committed memory write."""
    if callback not in _after_write:
        _after_write.append(callback)
    return callback


def items_written(item_ids: list[Any]) -> None:
    ids = list(item_ids)
    for callback in list(_after_write):
        transaction.on_commit(lambda cb=callback: cb(ids))
