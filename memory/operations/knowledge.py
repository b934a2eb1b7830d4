"""Answers and knowledge datasets: answer, ingest, search, relations, graph build, delete."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory.enforcement import MemoryAccess
from memory.operations.graph import DiscoverRequest, Window, discover
from memory.operations.recall import RecallRequest, recall_query
from memory.reasoning.answer import answer_from
from memory.reasoning.synthesis import BUILTIN_SYNTHESIZER, synthesizer_for
from memory.rendering import dataset_json, job_json
from memory.retrieval.hybrid import retrieve
from memory.services import knowledge as k


@dataclass(frozen=True)
class AnswerRequest:
    query: str
    mode: str = "discover"  # recall | discover
    scopes: tuple[str, ...] | None = None
    top_k: int = 5
    hops: int = 2
    as_of: datetime | None = None
    user_id: str | None = None
    session_id: str | None = None
    synthesizer: str = BUILTIN_SYNTHESIZER


@dataclass(frozen=True)
class AnswerResult:
    query: str
    mode: str
    answer: dict[str, Any]
    facts: list[dict[str, Any]]
    chain: list[dict[str, Any]]
    entities: list[str]
    scopes: tuple[str, ...]

    def body(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "mode": self.mode,
            "answer": self.answer,
            "facts": self.facts,
            "chain": self.chain,
            "entities": self.entities,
            "scopes": list(self.scopes),
        }


def _fact(
    id_: str, content: str, kind: str, score: float | None, path: list[Any], why: dict[str, Any] | None = None
) -> dict[str, Any]:
    fact: dict[str, Any] = {
        "id": id_,
        "content": content,
        "kind": kind,
        "score": score,
        "path": path,
        "trust": "untrusted",
    }
    if why is not None:
        fact["why"] = why
    return fact


def answer(access: MemoryAccess, request: AnswerRequest) -> AnswerResult:
    """The facts and paths an answer rests on, and the cited answer."""
    synth = synthesizer_for(access.agent, request.synthesizer)  # unknown engine: 404 before any work
    if request.mode == "discover":
        found = discover(
            access,
            DiscoverRequest(
                query=request.query,
                scopes=request.scopes,
                user_id=request.user_id,
                session_id=request.session_id,
                top_k=request.top_k,
                hops=request.hops,
                max_results=request.top_k * 3,
                max_visited=request.top_k * 20,
                window=Window(as_of=request.as_of),
            ),
        )
        scopes = found.scopes
        facts = [
            _fact(f["id"], f["content"], f["kind"], f["score"], f["path"], f["why"]) for f in found.results
        ]
    else:
        rq = recall_query(
            access,
            RecallRequest(
                query=request.query,
                scopes=request.scopes,
                top_k=request.top_k,
                user_id=request.user_id,
                session_id=request.session_id,
                as_of=request.as_of,
            ),
        )
        scopes = rq.scopes
        facts = [_fact(str(h.item.pk), h.item.content, "recall", h.score, []) for h in retrieve(access, rq)]
    text, chain, entities = answer_from(
        tenant_id=access.tenant_id, question=request.query, facts=facts, synthesizer=synth
    )
    return AnswerResult(request.query, request.mode, text.to_dict(), facts, chain, entities, scopes)


@dataclass(frozen=True)
class IngestRequest:
    texts: tuple[str, ...]
    dataset_id: str
    scope: str
    team: str = ""
    project: str = ""
    classification: str | None = None
    retention_days: int | None = None
    legal_hold: bool = False
    build_graph: bool = False
    trace_parent: str | None = None
    # The subject the knowledge was written for (None: the calling user, if any).
    user_id: str | None = None


@dataclass(frozen=True)
class IngestResult:
    outcome: k.IngestOutcome

    @property
    def queued(self) -> bool:
        """A large ingest: a job stores the chunks (answered 202)."""
        return self.outcome.job is not None and self.outcome.job.kind == k.INGEST_JOB

    def body(self) -> dict[str, Any]:
        outcome = self.outcome
        return {
            "queued": self.queued,
            "dataset": dataset_json(outcome.dataset),
            "created": outcome.created,
            "engine_id": outcome.engine,
            "chunks": outcome.chunks,
            "stored": outcome.stored,
            "deduplicated": outcome.deduplicated,
            "failed": outcome.failed,
            "item_ids": outcome.item_ids,
            "engine_result": outcome.remote,
            "job": job_json(outcome.job) if outcome.job else None,
        }


def ingest_knowledge(access: MemoryAccess, request: IngestRequest, *, requested_by: Any) -> IngestResult:
    """Chunk texts into a dataset's document memories (or hand them to the policy's
    knowledge engine); ``build_graph`` also queues the graph build."""
    outcome = k.knowledge_ingest(
        access=access,
        texts=list(request.texts),
        dataset_name=request.dataset_id,
        scope=request.scope,
        team=request.team,
        project=request.project,
        classification=request.classification,
        retention_days=request.retention_days,
        legal_hold=request.legal_hold,
        build_graph=request.build_graph,
        requested_by=requested_by,
        trace_parent=request.trace_parent,
        user_id=request.user_id,
    )
    return IngestResult(outcome)


@dataclass(frozen=True)
class KnowledgeSearchRequest:
    query: str
    dataset_ids: tuple[str, ...] | None = None  # None: every visible dataset
    top_k: int = 10
    search_type: str = "CHUNKS"
    hops: int = 2
    synthesizer: str = BUILTIN_SYNTHESIZER
    trace_parent: str | None = None


@dataclass(frozen=True)
class Body:
    """An answer a service already shapes as JSON."""

    data: dict[str, Any]

    def body(self) -> dict[str, Any]:
        return self.data


def knowledge_search(access: MemoryAccess, request: KnowledgeSearchRequest) -> Body:
    """Chunks, lexical chunks, summaries, or a completion with its context."""
    return Body(
        k.knowledge_search(
            access=access,
            query=request.query,
            dataset_names=list(request.dataset_ids) if request.dataset_ids is not None else None,
            top_k=request.top_k,
            search_type=request.search_type,
            synthesizer=request.synthesizer,
            hops=request.hops,
            trace_parent=request.trace_parent,
        )
    )


def dataset_relations(access: MemoryAccess, name: str, *, limit: int, trace_parent: str | None) -> Body:
    """A dataset's entities and the causal links its chunks assert."""
    return Body(k.dataset_relations(access=access, name=name, limit=limit, trace_parent=trace_parent))


def dataset_delete(access: MemoryAccess, name: str, *, trace_parent: str | None) -> Body:
    """Delete a dataset and everything derived from it (refused under legal hold)."""
    counts = k.knowledge_dataset_delete(access=access, name=name, trace_parent=trace_parent)
    return Body({"dataset_id": name, "deleted": counts})


def graph_build(access: MemoryAccess, dataset_ids: list[str], *, requested_by: Any) -> Body:
    """Queue the graph build of the agent's own datasets (a job)."""
    job = k.knowledge_graph_start(access=access, dataset_names=dataset_ids, requested_by=requested_by)
    return Body({"job": job_json(job)})


def datasets(access: MemoryAccess, *, scope: str | None) -> Any:
    """The datasets the agent may read, newest first (a queryset to page)."""
    return k.datasets_visible(access, scope=scope)
