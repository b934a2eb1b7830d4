"""Whether the current code runs inside a transaction of its own.

``connection.in_atomic_block`` also counts the transactions a test case wraps
around each test (Django marks those ``_from_testcase``); the write pipeline's
checks must see what production sees, so those are left out."""

from __future__ import annotations

from django.db import connection


def in_transaction() -> bool:
    return any(not getattr(block, "_from_testcase", False) for block in connection.atomic_blocks)
