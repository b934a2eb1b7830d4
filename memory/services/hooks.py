"""Extension point for work that follows a memory write (extraction).

Callbacks run *inside* the write's transaction and are expected to enqueue their
work with :func:`core.tasks.enqueue_on_commit`: the outbox row commits or rolls
back with the items, and the task is published only after commit, so it never
sees rows that were rolled back and is never lost if the process dies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# callback(item_ids, inputs): ``inputs`` maps an item id (as text) to what the write
# already read from the item's text for its extraction (memory.extraction.handoff).
Callback = Callable[[list[Any], dict[str, Any]], None]
_after_write: list[Callback] = []


def on_items_written(callback: Callback) -> Callback:
    """Register ``callback(item_ids, inputs)`` to run in each memory write's transaction."""
    if callback not in _after_write:
        _after_write.append(callback)
    return callback


def items_written(item_ids: list[Any], inputs: dict[str, Any] | None = None) -> None:
    ids = list(item_ids)
    for callback in list(_after_write):
        callback(ids, dict(inputs or {}))
