"""Memory test fixtures. The embedding model and the personal-data analyzer are
process-wide singletons; the session fixture loads them once for the whole run."""

from __future__ import annotations

import time
from typing import Any

import pytest

from memory.enforcement import MemoryAccess, system_access
from memory.models import MemoryItem
from memory.services.items import MemoryDraft, WriteOutcome, memory_remember


@pytest.fixture(scope="session", autouse=True)
def loaded_models() -> None:
    from memory.embeddings import get_embedder
    from memory.pii import get_analyzer

    get_embedder()
    get_analyzer()


@pytest.fixture
def access(world) -> MemoryAccess:
    """The owner agent's memory, as platform-internal code uses it."""
    return system_access(world.agent)


def settled(item: MemoryItem, timeout: float = 90.0) -> MemoryItem:
    """``item`` once a real worker's extraction has left it no longer pending (or the
    timeout has passed), read again."""
    deadline = time.monotonic() + timeout
    item.refresh_from_db()
    while item.extraction_status == MemoryItem.Extraction.PENDING and time.monotonic() < deadline:
        time.sleep(0.1)
        item.refresh_from_db()
    return item


def remember(access: MemoryAccess, content: str, **fields: Any) -> WriteOutcome:
    fields.setdefault("user_id", "cust-1")
    return memory_remember(access=access, draft=MemoryDraft(content=content, **fields))


def memories_url(agent: Any, suffix: str = "") -> str:
    return f"/v1/memory/agents/{agent.pk}/memories{suffix}"


def recall_url(agent: Any) -> str:
    return f"/v1/memory/agents/{agent.pk}/recall"
