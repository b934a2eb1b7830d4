from .history import MemoryHistory
from .idempotency import IdempotencyRecord
from .items import EMBEDDING_DIMENSIONS, MemoryItem
from .sessions import SessionMessage

__all__ = ["EMBEDDING_DIMENSIONS", "IdempotencyRecord", "MemoryHistory", "MemoryItem", "SessionMessage"]
