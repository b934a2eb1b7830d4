from .graph import CausalEdge, ContradictionDecision, Entity, Mention, SpanLink, Supersession
from .history import MemoryHistory
from .idempotency import IdempotencyRecord
from .items import EMBEDDING_DIMENSIONS, ItemSentence, MemoryItem
from .knowledge import Dataset
from .sessions import SessionMessage

__all__ = [
    "EMBEDDING_DIMENSIONS",
    "CausalEdge",
    "ContradictionDecision",
    "Dataset",
    "Entity",
    "IdempotencyRecord",
    "ItemSentence",
    "MemoryHistory",
    "MemoryItem",
    "Mention",
    "SessionMessage",
    "SpanLink",
    "Supersession",
]
