"""Helpers for graph tests: write facts and run their extraction in this process."""

from __future__ import annotations

from typing import Any

from memory.enforcement import MemoryAccess
from memory.models import MemoryItem
from memory.tasks import extract_items
from memory.tests.conftest import remember


def fact(access: MemoryAccess, content: str, **fields: Any) -> MemoryItem:
    """Write ``content`` and run the extraction task function directly (no broker)."""
    fields.setdefault("scope", "agent")
    item = remember(access, content, **fields).item
    extract_items([str(item.pk)])
    item.refresh_from_db()
    return item


# One incident told across three sessions, in both directions of wording, plus a
# distractor sharing words with the chain.
INCIDENT = [
    ("s1", "Verbose debug logging led to a full disk on db-1."),
    ("s2", "The database crash happened because of a full disk on db-1."),
    ("s3", "The database crash caused checkout failures."),
    ("s3", "Checkout failures resulted in lost revenue for the quarter."),
]
DISTRACTOR = ("s4", "The marketing team cleaned the disk of the old laptop.")
