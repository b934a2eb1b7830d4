"""fedmem's own memory as one federated recall source.

Registered with :func:`providers.federation.register_builtin_source` when the
providers app loads. It reads through the same policy-bound retrieval as
``/v1/memory/agents/{id}/recall`` (the agent's read scopes; user and session keys
narrow the seeds exactly as there) and hands each item over in the common
envelope, its hybrid score staying source-local like every other provider's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from governance.models import Agent
from memory.embeddings import get_embedder
from memory.enforcement import Keys, read_scopes, system_access
from memory.retrieval.hybrid import RecallQuery, retrieve
from memory.retrieval.rerank import get_reranker
from providers.adapters.base import Hit, OperationContext

BUILTIN_ENGINE_ID = "builtin"
MAX_TOP_K = 100


@dataclass
class BuiltinSource:
    agent: Agent
    ctx: OperationContext
    engine_id: str = BUILTIN_ENGINE_ID
    provider_id: str = BUILTIN_ENGINE_ID

    def prepare(self) -> None:
        warm_models()

    def recall(self, query: str, top_k: int, deadline: float) -> list[Hit]:
        access = system_access(self.agent)
        rq = RecallQuery(
            query=query,
            scopes=read_scopes(access, None),
            keys=Keys(user_id=self.ctx.user_id or None, session_id=self.ctx.session_id or None, narrow=True),
            top_k=max(1, min(top_k, MAX_TOP_K)),
        )
        return [
            Hit(
                provider_id=self.provider_id,
                engine_id=self.engine_id,
                external_id=str(hit.item.pk),
                kind=hit.item.record_kind,
                text=hit.item.content,
                provenance={"source": hit.item.source, **hit.item.provenance}
                if hit.item.source
                else hit.item.provenance,
                created_at=hit.item.created_at.isoformat(),
                updated_at=hit.item.updated_at.isoformat(),
                metadata={"scope": hit.item.scope, "kind": hit.item.kind},
                score=hit.score,
                rank=rank,
            )
            for rank, hit in enumerate(retrieve(access, rq), start=1)
        ]


def warm_models() -> None:
    """Load the models a recall uses (once per process; afterwards a no-op). Under
    load a cold load takes tens of seconds, far past a federated recall's budget."""
    get_embedder()
    get_reranker()


def builtin_source(agent: Any, ctx: OperationContext) -> BuiltinSource:
    return BuiltinSource(agent=agent, ctx=ctx)
