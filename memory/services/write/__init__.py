"""The builtin write pipeline, in the order a write runs it.

1. :func:`prepare` — check drafts against input rules and the policy, detect
   personal data and embed. Slow; refuses to run inside a transaction.
2. :mod:`guards` — for a change to an existing item: lock its row, refuse it when
   a legal hold covers it, and audit the refusal.
3. :func:`store` — insert or deduplicate prepared writes, with their history.
   Requires the write's transaction.

Services (items, supersession, contradictions, promotion, knowledge) compose
these public names; nothing outside this package reaches into its modules'
private helpers.
"""

from memory.services.write import guards
from memory.services.write.drafts import MAX_BATCH, MAX_RETENTION_DAYS, MemoryDraft, Prepared, WriteOutcome
from memory.services.write.guards import MemoryHeld
from memory.services.write.history import history_row, history_rows_sql
from memory.services.write.prepare import analyse, checked_content, prepare, validate_draft
from memory.services.write.store import advisory_lock, advisory_locks, store
from memory.services.write.tx import in_transaction

__all__ = [
    "MAX_BATCH",
    "MAX_RETENTION_DAYS",
    "MemoryDraft",
    "MemoryHeld",
    "Prepared",
    "WriteOutcome",
    "advisory_lock",
    "advisory_locks",
    "analyse",
    "checked_content",
    "guards",
    "history_row",
    "history_rows_sql",
    "in_transaction",
    "prepare",
    "store",
    "validate_draft",
]
