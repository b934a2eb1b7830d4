from .graph import CausalEdge, Entity, Mention, Supersession
from .history import MemoryHistory
from .idempotency import IdempotencyRecord
from .items import EMBEDDING_DIMENSIONS, MemoryItem
from .knowledge import Dataset
from .sessions import SessionMessage

__all__ = [
    "EMBEDDING_DIMENSIONS",
    "CausalEdge",
    "Dataset",
    "Entity",
    "IdempotencyRecord",
    "MemoryHistory",
    "MemoryItem",
    "Mention",
    "SessionMessage",
    "Supersession",
]
