"""What flows through the write pipeline: a draft as the caller asked for it, the
prepared write (checked and analysed), and the outcome of storing it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from memory.enforcement import MemoryAccess
from memory.models import MemoryItem

MAX_BATCH = 100
MAX_RETENTION_DAYS = 36500


@dataclass(frozen=True)
class MemoryDraft:
    """One write as the caller asked for it (None: take the policy's default)."""

    content: str
    scope: str | None = None
    kind: str = "fact"
    record_kind: str = "fact"
    classification: str | None = None
    user_id: str | None = None
    session_id: str = ""
    team: str = ""
    project: str = ""
    retention_days: int | None = None
    legal_hold: bool = False
    personal_data: bool = False
    source: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    # Knowledge chunks: the dataset row's pk and name (set by memory.services.knowledge only).
    dataset_pk: int | None = None
    dataset: str = ""
    # None: as the agent's policy says (check_contradictions).
    check_contradictions: bool | None = None
    # When the fact happened or was said (MemoryItem.occurred_at); None: not stated.
    occurred_at: datetime | None = None

    def fingerprint(self) -> str:
        data = asdict(self)
        # Left out when unset, so a request's hash (Idempotency-Key replays) is the
        # one it had before the field existed.
        if data["occurred_at"] is None:
            del data["occurred_at"]
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class WriteOutcome:
    item: MemoryItem
    created: bool
    deduplicated: bool
    replayed: bool = False
    # Decisions of the contradiction check (memory.services.contradictions), if it ran.
    contradictions: list[Any] | None = None


class Sentence(NamedTuple):
    """A sentence of a content: its offsets and its own embedding."""

    start: int
    end: int
    embedding: Any


@dataclass(frozen=True, eq=False)
class Prepared:
    """A draft that passed every check, with its derived fields."""

    content: str
    content_hash: str
    scope: str
    kind: str
    record_kind: str
    classification: int
    user_id: str
    session_id: str
    team: str
    project: str
    retention_until: Any
    legal_hold: bool
    personal_data: bool
    personal_data_types: tuple[str, ...]
    source: str
    metadata: dict[str, Any]
    shared_with: tuple[str, ...]
    embedding: Any
    # One per sentence when the content has several (memory.models.ItemSentence).
    sentences: tuple[Sentence, ...] = ()
    dataset_pk: int | None = None
    dataset: str = ""
    occurred_at: datetime | None = None
    # What the write's parse says for the extraction (memory.extraction.handoff).
    extraction_inputs: dict[str, Any] | None = None
    # What the chain walk reads of the parse (memory.extraction.clauses), stored on the item.
    clauses: dict[str, Any] | None = None

    def dedup_keys(self, access: MemoryAccess) -> tuple[str, ...]:
        # A knowledge chunk is a duplicate only within its own dataset.
        return (
            str(access.tenant_id), str(access.agent.pk), self.user_id, self.session_id,
            self.team, self.project, self.content_hash, str(self.dataset_pk or ""),
        )  # fmt: skip
