"""Knowledge datasets: ingest, build the graph (a job), search, relations, delete.

A dataset's documents are split into chunks and stored as memory items of record
kind ``document`` pointing at the dataset (through the same batch write as every
memory, so the policy, personal-data detection, extraction, retention, holds and
erasure apply unchanged). When the agent's policy sends knowledge to Cognee
(engine ``cognee`` or ``hybrid``), the documents go to the Cognee instance
instead, through the providers router, and only the dataset row stays here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from core.errors import (
    ApiError,
    Conflict,
    ErrorCode,
    KnowledgeDatasetEngineChanged,
    KnowledgeDatasetExists,
    KnowledgeDatasetNotFound,
    field_error,
)
from core.tasks import enqueue_on_commit
from core.vocabulary import Classification, Kind, RecordKind, Scope
from governance.models import Job, LegalHold
from governance.services.audit import audit_record, subject_hash
from governance.services.erasure import DeleterResult, ErasureTarget, HeldTally
from governance.services.jobs import job_finish, job_mark_running
from memory import enforcement, engines
from memory.enforcement import Keys, MemoryAccess, read_scopes, visible_q
from memory.erasure import delete_items
from memory.extraction.pipeline import EXTRACT_BATCH, load_items, prepare, store_many
from memory.holds import Holds, audit_blocked
from memory.models import CausalEdge, Dataset, Entity, MemoryHistory, MemoryItem, Mention
from memory.services.items import MAX_BATCH, BatchResult, MemoryDraft, memory_remember_batch
from memory.text import ContentError, check_content

MAX_TEXTS = 50
CHUNK_CHARS = 1500
SEARCH_TYPES = ("CHUNKS", "CHUNKS_LEXICAL", "SUMMARIES", "RAG_COMPLETION", "GRAPH_COMPLETION")
COMPLETIONS = ("RAG_COMPLETION", "GRAPH_COMPLETION")
# Knowledge is about no subject and no conversation: these scopes only.
KNOWLEDGE_SCOPES = (
    Scope.AGENT.value,
    Scope.SHARED_AGENTS.value,
    Scope.TEAM.value,
    Scope.PROJECT.value,
    Scope.ORGANIZATION.value,
    Scope.GLOBAL.value,
)
_DATASET_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,99}")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def check_dataset_name(name: str) -> str:
    # Cognee names datasets <tenant>__<name>: a double underscore would blur the prefix.
    if not _DATASET_NAME.fullmatch(name or "") or "__" in name:
        raise field_error(
            "dataset_id",
            "1 to 100 characters: lower-case letters, digits, '-' and '_' (no '__'), starting alphanumeric.",
        )
    return name


def chunks_of(text: str, limit: int = CHUNK_CHARS) -> list[str]:
    """Sentence-aligned pieces of at most ``limit`` characters (a longer sentence is cut)."""
    pieces: list[str] = []
    current = ""
    for paragraph in re.split(r"\n\s*\n", text.strip()):
        for sentence in _SENTENCE_END.split(paragraph.strip()):
            sentence = " ".join(sentence.split())
            while len(sentence) > limit:
                if current:
                    pieces.append(current)
                    current = ""
                pieces.append(sentence[:limit])
                sentence = sentence[limit:]
            if not sentence:
                continue
            if current and len(current) + 1 + len(sentence) > limit:
                pieces.append(current)
                current = sentence
            else:
                current = f"{current} {sentence}".strip()
        if current:
            pieces.append(current)
            current = ""
    return pieces


# --- reads ----------------------------------------------------------------------------


def datasets_visible(access: MemoryAccess, *, scope: str | None = None) -> Any:
    """Datasets the agent may read: its own, plus shared ones its policy reaches."""
    policy = access.policy
    readable = set(policy.read_scopes)
    q = Q(agent_id=access.agent.pk)
    if Scope.ORGANIZATION in readable:
        q |= Q(scope=Scope.ORGANIZATION)
    if Scope.GLOBAL in readable and policy.global_access:
        q |= Q(scope=Scope.GLOBAL)
    if Scope.TEAM in readable and policy.teams:
        q |= Q(scope=Scope.TEAM, team__in=list(policy.teams))
    if Scope.PROJECT in readable and policy.projects:
        q |= Q(scope=Scope.PROJECT, project__in=list(policy.projects))
    datasets = Dataset.objects.filter(
        q, tenant_id=access.tenant_id, classification__lte=policy.max_classification_level
    )
    return datasets.filter(scope=scope) if scope else datasets


def dataset_get(access: MemoryAccess, name: str, *, own: bool = False) -> Dataset:
    qs = datasets_visible(access)
    if own:
        qs = qs.filter(agent_id=access.agent.pk)
    dataset = qs.filter(name=name).first()
    if dataset is None:
        raise KnowledgeDatasetNotFound("Dataset not found.")
    return dataset


def _datasets_named(access: MemoryAccess, names: list[str] | None) -> list[Dataset]:
    visible = datasets_visible(access)
    if not names:
        return list(visible.order_by("name"))
    found = {d.name: d for d in visible.filter(name__in=names)}
    missing = [name for name in names if name not in found]
    if missing:
        raise KnowledgeDatasetNotFound("Dataset not found.", details={"dataset_ids": missing})
    return [found[name] for name in dict.fromkeys(names)]


# --- ingest ---------------------------------------------------------------------------


@dataclass
class IngestOutcome:
    dataset: Dataset
    created: bool
    engine: str
    chunks: int = 0
    stored: int = 0
    deduplicated: int = 0
    failed: list[dict[str, Any]] = field(default_factory=list)
    item_ids: list[str] = field(default_factory=list)
    documents: int = 0  # texts of which at least one chunk is stored
    remote: dict[str, Any] | None = None
    job: Job | None = None


def _checked_texts(texts: list[str]) -> list[str]:
    if not isinstance(texts, list) or not 1 <= len(texts) <= MAX_TEXTS:
        raise field_error("texts", f"Send between 1 and {MAX_TEXTS} texts.")
    out = []
    for index, text in enumerate(texts):
        try:
            out.append(check_content(text))
        except ContentError as exc:
            raise field_error("texts", f"Text {index}: {exc}") from None
    return out


def knowledge_ingest(
    *,
    access: MemoryAccess,
    texts: list[str],
    dataset_name: str,
    scope: str = Scope.AGENT,
    team: str = "",
    project: str = "",
    classification: str | None = None,
    retention_days: int | None = None,
    legal_hold: bool = False,
    build_graph: bool = False,
    requested_by: Any = None,
    trace_parent: str | None = None,
    user_id: str | None = None,
) -> IngestOutcome:
    """Ingest texts into a dataset. ``user_id`` is the subject the knowledge was
    written for (default: the calling user, none for an agent key): the chunks carry
    it, so erasing that subject erases them with their graph. Builtin ingests larger
    than ``FEDMEM_KNOWLEDGE_SYNC_BYTES`` run as a job (the outcome names it, nothing
    is stored yet)."""
    name = check_dataset_name(dataset_name)
    texts = _checked_texts(texts)
    if scope not in KNOWLEDGE_SCOPES:
        raise field_error("scope", f"Knowledge is stored at one of: {', '.join(KNOWLEDGE_SCOPES)}.")
    if scope == Scope.TEAM and not team:
        raise field_error("team", "Required for scope 'team'.")
    if scope == Scope.PROJECT and not project:
        raise field_error("project", "Required for scope 'project'.")
    try:
        level = Classification.from_name(classification) if classification else Classification.INTERNAL
    except ValueError:
        raise field_error("classification", f"{classification!r} is not a valid classification.") from None
    # The whole request is refused (nothing stored) when the policy forbids it.
    enforcement.check_write(
        access,
        scope=scope,
        kind=Kind.SEMANTIC,
        classification=level,
        retention_days=retention_days,
        team=team,
        project=project,
    )
    plan = engines.plan_for(access)
    target = plan.knowledge_engine or engines.BUILTIN
    existing = Dataset.objects.filter(tenant_id=access.tenant_id, name=name).first()
    if existing is not None and existing.agent_id != access.agent.pk:
        raise KnowledgeDatasetExists("A dataset with this id belongs to another agent of the tenant.")
    if existing is not None and existing.engine != target:
        raise KnowledgeDatasetEngineChanged(
            f"This dataset lives in engine {existing.engine!r}; the agent's policy now sends knowledge "
            f"to {target!r}.",
            details={"dataset_engine": existing.engine, "policy_engine": target},
        )
    subject = (user_id if user_id is not None else access.default_user_id) or ""
    if len(subject) > 128:
        raise field_error("user_id", "At most 128 characters.")
    fields = {
        "scope": scope,
        "team": team,
        "project": project,
        "classification": classification,
        "retention_days": retention_days,
        "legal_hold": legal_hold,
        "user_id": subject,
    }
    if (
        target == engines.BUILTIN
        and sum(len(t.encode()) for t in texts) > settings.FEDMEM_KNOWLEDGE_SYNC_BYTES
    ):
        return _ingest_job(
            access, name, texts, fields, level=level, build_graph=build_graph, requested_by=requested_by
        )
    remote = None
    if target != engines.BUILTIN:
        router = engines.router()
        assert router is not None  # a plan naming an engine comes from the router
        # The engine call comes first: if it fails nothing is recorded here.
        remote = router.knowledge(
            access, target, "ingest_knowledge", dataset=name, documents=texts, trace_parent=trace_parent
        )
    # The dataset row first (its own statement): chunks name it, and each batch of
    # chunks prepares (detection, embedding) before its own transaction, never inside
    # one that holds the dataset row.
    dataset, created = _dataset_for(access, name, fields, level=level, engine=target)
    outcome = IngestOutcome(dataset=dataset, created=created, engine=target, remote=remote)
    if target == engines.BUILTIN:
        _store_chunks(access, dataset, texts, outcome, **fields)
    with transaction.atomic():
        _count_documents(dataset, outcome.documents if target == engines.BUILTIN else len(texts), legal_hold)
        if build_graph:
            outcome.job = _graph_job(access, [dataset], requested_by)
            # The job marked the row queued in SQL: answer with what is stored.
            dataset.refresh_from_db(fields=["graph_status", "graph_job", "updated_at"])
    return outcome


def _dataset_for(
    access: MemoryAccess, name: str, fields: dict[str, Any], *, level: int, engine: str
) -> tuple[Dataset, bool]:
    return Dataset.objects.get_or_create(
        tenant_id=access.tenant_id,
        name=name,
        defaults={
            "agent": access.agent,
            "scope": fields["scope"],
            "team": fields["team"],
            "project": fields["project"],
            "classification": int(level),
            "legal_hold": fields["legal_hold"] or access.policy.legal_hold,
            "engine": engine,
        },
    )


def _count_documents(dataset: Dataset, documents: int, legal_hold: bool) -> None:
    # A text whose every chunk was refused (personal data, say) is not in the dataset.
    if not documents and (not legal_hold or dataset.legal_hold):
        return
    updates: dict[str, Any] = {"documents": F("documents") + documents, "updated_at": timezone.now()}
    if legal_hold:
        updates["legal_hold"] = True
    Dataset.objects.filter(pk=dataset.pk).update(**updates)
    dataset.refresh_from_db(fields=["documents", "legal_hold", "updated_at"])


# --- large ingests as a job ---------------------------------------------------------------

INGEST_JOB = "knowledge_ingest"
GRAPH_JOB = "knowledge_graph"


def _ingest_job(
    access: MemoryAccess,
    name: str,
    texts: list[str],
    fields: dict[str, Any],
    *,
    level: int,
    build_graph: bool,
    requested_by: Any,
) -> IngestOutcome:
    """Queue a large ingest: the dataset row and a job now (202), the chunks in the
    worker, batch by batch with progress. A client that stops waiting knows what it
    started (the job) and can follow it to the end; nothing is half-reported."""
    chunks = sum(len(chunks_of(text)) for text in texts)
    with transaction.atomic():
        dataset, created = _dataset_for(access, name, fields, level=level, engine=engines.BUILTIN)
        job = Job.objects.create(
            tenant_id=access.tenant_id,
            kind=INGEST_JOB,
            agent=access.agent,
            total=chunks,
            created_by=requested_by if getattr(requested_by, "pk", None) else None,
            message=f"{name}: {len(texts)} texts, {chunks} chunks",
            # The texts wait here until the worker takes them; the job's result
            # replaces them when it finishes, so no copy outlives the ingest.
            result={
                "pending": {
                    "agent": str(access.agent.pk),
                    "actor": access.actor.as_json(),
                    "dataset": dataset.pk,
                    "texts": texts,
                    "fields": fields,
                    "build_graph": build_graph,
                }
            },
        )
        enqueue_on_commit("memory.knowledge_ingest", str(job.pk))
    return IngestOutcome(dataset=dataset, created=created, engine=engines.BUILTIN, chunks=chunks, job=job)


class IngestCancelled(Exception):
    """The ingest's job was finished by someone else (an erasure) while it ran."""


_INGEST_LOCK = 0x6B6E  # advisory lock namespace of ingest jobs ("kn")


@contextmanager
def _ingest_lock(job_id: Any) -> Iterator[None]:
    """A session-level advisory lock on one ingest job, across the batch's own
    transactions (the batch write must open its transaction itself)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", [_INGEST_LOCK, str(job_id)])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", [_INGEST_LOCK, str(job_id)])


def erase_subject_ingests(target: ErasureTarget) -> DeleterResult:
    """Erasure deleter: a large ingest still waiting for (or in) the worker keeps its
    texts and subject in its job row. An erasure of that subject, or of the ingest's
    dataset, cancels it and drops the texts — unless a hold covers what the ingest
    would store. Registered before the memory deleter, so a batch the worker is
    storing right now commits first and is erased with the rest."""
    cover = Q()
    if target.subject:
        cover |= Q(result__pending__fields__user_id=target.subject)
    named: dict[int, str] = {}
    if target.datasets:
        named = dict(
            Dataset.objects.filter(tenant_id=target.tenant_id, name__in=target.datasets).values_list(
                "pk", "name"
            )
        )
        cover |= Q(result__pending__dataset__in=list(named))
    if not cover:
        return DeleterResult()
    jobs = Job.objects.select_for_update().filter(
        cover,
        tenant_id=target.tenant_id,
        kind=INGEST_JOB,
        status__in=(Job.Status.QUEUED, Job.Status.RUNNING),
    )
    if target.agent_id:
        jobs = jobs.filter(result__pending__agent=str(target.agent_id))
    holds = Holds(target.tenant_id)
    cancelled = 0
    kept = HeldTally()
    for job in jobs:
        # Wait for a batch the worker is storing now (it holds this lock for the batch).
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [_INGEST_LOCK, str(job.pk)])
        pending = job.result["pending"]
        fields = pending["fields"]
        dataset_name = (
            named.get(pending["dataset"])
            or Dataset.objects.filter(pk=pending["dataset"]).values_list("name", flat=True).first()
        )
        subject = subject_hash(fields["user_id"]) if fields.get("user_id") else None
        covering = [
            h
            for h in holds.holds
            if (h.target == LegalHold.Target.SUBJECT and subject is not None and h.subject == subject)
            or (h.target == LegalHold.Target.AGENT and str(h.agent_id) == pending["agent"])
            or (h.target == LegalHold.Target.DATASET and h.dataset == dataset_name)
            or (h.target == LegalHold.Target.SCOPE and h.scope == fields.get("scope"))
        ]
        if covering or fields.get("legal_hold"):
            kept.keep(covering, flagged=not covering)
            continue
        job_finish(
            job,
            result={"dataset_id": dataset_name, "erased": True},
            error="Cancelled: an erasure covers this ingest; its texts were dropped.",
        )
        cancelled += 1
    counts = {"governance_job": cancelled} if cancelled else {}
    return DeleterResult(counts=counts, held=kept.entries("governance_job"))


def knowledge_ingest_run(*, job_id: Any) -> Job | None:
    """The worker side of a large ingest. Each batch of chunks commits on its own
    (progress shows); a redelivered or repeated job stores nothing twice, since a
    chunk already stored is answered as a duplicate."""
    from governance.models import Agent
    from memory.enforcement import Actor, memory_access_for

    job = job_mark_running(job_id)
    if job is None:
        return None
    pending = (job.result or {}).get("pending")
    if not pending:
        return job_finish(job, error="The ingest's texts are gone; send them again.")
    try:
        agent = Agent.objects.select_related("tenant").get(pk=pending["agent"])
        access = memory_access_for(
            agent, Actor(**pending["actor"]), default_user_id=pending["fields"]["user_id"]
        )
        dataset = Dataset.objects.get(pk=pending["dataset"], tenant_id=agent.tenant_id)
        outcome = IngestOutcome(dataset=dataset, created=False, engine=engines.BUILTIN)

        def progress(done: int) -> None:
            Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING).update(
                progress=done, message=f"{dataset.name}: {done} chunks"
            )

        @contextmanager
        def still_running() -> Iterator[None]:
            # Each batch runs under the job's advisory lock and only while the job is
            # running: an erasure that cancels this ingest (erase_subject_ingests) waits
            # for the batch in flight, which its memory deleter then erases with the
            # rest, and no batch follows.
            with _ingest_lock(job.pk):
                if (
                    Job.objects.filter(pk=job.pk).values_list("status", flat=True).first()
                    != Job.Status.RUNNING
                ):
                    raise IngestCancelled
                yield

        _store_chunks(
            access,
            dataset,
            pending["texts"],
            outcome,
            progress=progress,
            batch_guard=still_running,
            **pending["fields"],
        )
        _count_documents(dataset, outcome.documents, pending["fields"]["legal_hold"])
        graph = None
        if pending["build_graph"]:
            with transaction.atomic():
                graph = _graph_job(access, [dataset], None)
    except IngestCancelled:  # finished by whoever cancelled it, with their reason
        job.refresh_from_db()
        return job
    except Exception as exc:  # the job records the failure; chunks stored so far stay
        return job_finish(
            job,
            result={"dataset_id": str(pending.get("dataset"))},
            error=f"{type(exc).__name__}: {exc}"[:2000],
        )
    return job_finish(
        job,
        result={
            "dataset_id": dataset.name,
            "chunks": outcome.chunks,
            "stored": outcome.stored,
            "deduplicated": outcome.deduplicated,
            "failed": outcome.failed,
            "documents": outcome.documents,
            "graph_job": str(graph.pk) if graph else None,
        },
    )


def _store_chunks(
    access: MemoryAccess,
    dataset: Dataset,
    texts: list[str],
    outcome: IngestOutcome,
    progress: Any = None,
    batch_guard: Any = None,
    **fields: Any,
) -> None:
    base = MemoryDraft(
        content="",
        scope=fields["scope"],
        kind=Kind.SEMANTIC,
        record_kind=RecordKind.DOCUMENT,
        classification=fields["classification"],
        # The subject the knowledge was written for: erasing them erases these chunks.
        user_id=fields["user_id"],
        team=fields["team"],
        project=fields["project"],
        retention_days=fields["retention_days"],
        legal_hold=fields["legal_hold"],
        source=f"knowledge:{dataset.name}",
        dataset_pk=dataset.pk,
        dataset=dataset.name,
    )
    drafts: list[MemoryDraft | ApiError] = []
    doc_of: list[int] = []
    for doc, text in enumerate(texts):
        pieces = chunks_of(text)
        for index, piece in enumerate(pieces):
            metadata = {"dataset": dataset.name, "document": doc, "chunk": index, "of": len(pieces)}
            drafts.append(replace(base, content=piece, metadata=metadata))
            doc_of.append(doc)
    outcome.chunks = len(drafts)
    results: list[BatchResult] = []
    for start in range(0, len(drafts), MAX_BATCH):
        with batch_guard() if batch_guard is not None else nullcontext():
            results.extend(
                memory_remember_batch(
                    access=access, drafts=drafts[start : start + MAX_BATCH], via="knowledge"
                )
            )
        if progress is not None:
            progress(len(results))
    # A text counts once its first chunk is stored: a re-ingest answered entirely by
    # duplicates adds no document (and leaves a held dataset's row unchanged).
    outcome.documents = len(
        {doc_of[i] for i, r in enumerate(results) if r.outcome is not None and r.outcome.created}
    )
    for position, result in enumerate(results):
        if result.error is not None:
            outcome.failed.append(
                {"chunk": position, "code": result.error.code, "message": result.error.message}
            )
        elif result.outcome is not None:
            outcome.item_ids.append(str(result.outcome.item.pk))
            if result.outcome.deduplicated:
                outcome.deduplicated += 1
            else:
                outcome.stored += 1


# --- graph ----------------------------------------------------------------------------


def _graph_job(access: MemoryAccess, datasets: list[Dataset], requested_by: Any) -> Job:
    total = MemoryItem.objects.filter(dataset__in=datasets).count() + sum(
        1 for d in datasets if d.engine != engines.BUILTIN
    )
    job = Job.objects.create(
        tenant_id=access.tenant_id,
        kind=GRAPH_JOB,
        agent=access.agent,
        total=total,
        created_by=requested_by if getattr(requested_by, "pk", None) else None,
        message=", ".join(d.name for d in datasets)[:500],
    )
    Dataset.objects.filter(pk__in=[d.pk for d in datasets]).update(
        graph_status=Dataset.Graph.QUEUED, graph_job=job.pk, updated_at=timezone.now()
    )
    enqueue_on_commit(
        "memory.knowledge_graph_build", str(job.pk), str(access.agent.pk), [d.pk for d in datasets]
    )
    return job


@transaction.atomic
def knowledge_graph_start(*, access: MemoryAccess, dataset_names: list[str], requested_by: Any = None) -> Job:
    """Queue the graph build of the agent's own datasets; progress in the returned job."""
    if not dataset_names:
        raise field_error("dataset_ids", "Name at least one dataset.")
    datasets = [dataset_get(access, name, own=True) for name in dict.fromkeys(dataset_names)]
    return _graph_job(access, datasets, requested_by)


def knowledge_graph_run(*, job_id: Any, agent_id: Any, dataset_pks: list[int]) -> Job | None:
    """The worker side: extract every chunk not yet extracted (idempotent), ask Cognee
    to cognify its datasets, then record the graph's size per dataset."""
    from governance.models import Agent
    from memory.enforcement import system_access

    job = job_mark_running(job_id)
    if job is None:
        return None
    datasets = list(Dataset.objects.filter(pk__in=dataset_pks).order_by("pk"))
    Dataset.objects.filter(pk__in=dataset_pks).update(graph_status=Dataset.Graph.RUNNING)
    done = 0
    report: dict[str, Any] = {}
    try:
        for dataset in datasets:
            if dataset.engine != engines.BUILTIN:
                router = engines.router()
                assert router is not None
                access = system_access(Agent.objects.select_related("tenant").get(pk=agent_id))
                # Queued before the call: the reconcile task (providers.settlement) marks it
                # built or failed when Cognee says so, and nothing here may overwrite that.
                Dataset.objects.filter(pk=dataset.pk).update(
                    graph_status=Dataset.Graph.QUEUED, graph_built_at=None
                )
                remote = router.knowledge(access, dataset.engine, "build_graph", dataset=dataset.name)
                report[dataset.name] = {"engine": dataset.engine, **remote}
                done += 1
                Job.objects.filter(pk=job.pk).update(progress=done)
                continue
            pending = list(
                MemoryItem.objects.filter(dataset=dataset)
                .exclude(extraction_status=MemoryItem.Extraction.DONE)
                .values_list("pk", flat=True)
            )
            already = MemoryItem.objects.filter(dataset=dataset).count() - len(pending)
            done += already
            for start in range(0, len(pending), EXTRACT_BATCH):
                # Idempotent: a redelivered job redoes nothing wrong. The models run
                # once per chunk, and the chunk is stored in one transaction.
                chunk = pending[start : start + EXTRACT_BATCH]
                store_many(prepare(load_items(chunk)))
                done += len(chunk)
                Job.objects.filter(pk=job.pk).update(progress=done)
            report[dataset.name] = {"engine": engines.BUILTIN, "status": "built", **_graph_size(dataset)}
    except Exception as exc:  # one failed build ends this job, not the worker
        Dataset.objects.filter(pk__in=dataset_pks).update(graph_status=Dataset.Graph.FAILED)
        return job_finish(job, result={"datasets": report}, error=f"{type(exc).__name__}: {exc}"[:2000])
    now = timezone.now()
    for dataset in datasets:
        # Cognee builds in the background: its datasets stay "queued" until the reconcile
        # task hears Cognee's answer (set before the call above), never reported as built here.
        if dataset.engine != engines.BUILTIN:
            continue
        Dataset.objects.filter(pk=dataset.pk).update(graph_status=Dataset.Graph.BUILT, graph_built_at=now)
    return job_finish(job, result={"datasets": report})


def _graph_size(dataset: Dataset) -> dict[str, int]:
    items = MemoryItem.objects.filter(dataset=dataset)
    return {
        "chunks": items.count(),
        "entities": Mention.objects.filter(item__in=items).values("entity_id").distinct().count(),
        "causal_edges": CausalEdge.objects.filter(item__in=items).count(),
    }


# --- search ---------------------------------------------------------------------------


def _summary(content: str, query: str) -> str:
    """An extractive summary: the chunk's lead sentence plus the sentence sharing the
    most words with the query (no model)."""
    sentences = [s for s in _SENTENCE_END.split(content) if s.strip()] or [content]
    words = set(re.findall(r"\w+", query.lower()))
    best = max(
        sentences, key=lambda s: (len(words & set(re.findall(r"\w+", s.lower()))), -sentences.index(s))
    )
    picked = [sentences[0]] if best is sentences[0] else [sentences[0], best]
    return " ".join(s.strip() for s in picked)


def knowledge_search(
    *,
    access: MemoryAccess,
    query: str,
    dataset_names: list[str] | None,
    top_k: int = 10,
    search_type: str = "CHUNKS",
    synthesizer: str | None = None,
    hops: int = 2,
    trace_parent: str | None = None,
) -> dict[str, Any]:
    from memory.reasoning import graph
    from memory.reasoning.answer import answer_from
    from memory.reasoning.synthesis import synthesizer_for
    from memory.retrieval.hybrid import RecallQuery, retrieve

    if search_type not in SEARCH_TYPES:
        raise field_error("search_type", f"One of {', '.join(SEARCH_TYPES)}.")
    synth = synthesizer_for(access.agent, synthesizer) if search_type in COMPLETIONS else None
    datasets = _datasets_named(access, dataset_names)
    local = [d for d in datasets if d.engine == engines.BUILTIN]
    remote = [d for d in datasets if d.engine != engines.BUILTIN]
    names = {d.pk: d.name for d in local}
    results: list[dict[str, Any]] = []
    facts: list[dict[str, Any]] = []
    paths: list[dict[str, Any]] = []
    if local:
        rq = RecallQuery(
            query=query,
            scopes=read_scopes(access, None),
            keys=Keys(),
            top_k=top_k,
            mode="keyword" if search_type == "CHUNKS_LEXICAL" else "hybrid",
            record_kinds=(RecordKind.DOCUMENT,),
            datasets=tuple(names),
        )
        if search_type == "GRAPH_COMPLETION":
            view = graph.View(access, visible_q(access, rq.scopes) & Q(dataset_id__in=list(names)))
            found = graph.discover(access, rq, view, hops=hops, max_results=top_k, max_visited=top_k * 10)
            for f in found:
                results.append(
                    _chunk_json(f.item, names, f.score, graph={"kind": f.kind, "hop": f.hop, "path": f.path})
                )
                paths.extend({"item_id": str(f.item.pk), **step} for step in f.path)
        else:
            for hit in retrieve(access, rq):
                entry = _chunk_json(hit.item, names, hit.score)
                if search_type == "SUMMARIES":
                    entry["summary"] = _summary(hit.item.content, query)
                results.append(entry)
        facts = [{"id": r["id"], "content": r["content"]} for r in results]
    engine_answers: list[dict[str, Any]] = []
    for dataset in remote:
        router = engines.router()
        assert router is not None
        context_type = "CHUNKS" if search_type in COMPLETIONS else search_type
        hits = router.knowledge(
            access,
            dataset.engine,
            "search_graph",
            query=query,
            top_k=top_k,
            dataset=dataset.name,
            search_type=context_type,
            trace_parent=trace_parent,
        )
        for hit in hits:
            results.append(
                {
                    "id": hit["external_id"],
                    "dataset_id": dataset.name,
                    "engine_id": hit["engine_id"],
                    "content": hit["text"],
                    "kind": hit["kind"],
                    "score": hit["score"],
                    "rank": hit["rank"],
                }
            )
            facts.append({"id": hit["external_id"], "content": hit["text"]})
        if search_type in COMPLETIONS:
            own = router.knowledge(
                access,
                dataset.engine,
                "search_graph",
                query=query,
                top_k=top_k,
                dataset=dataset.name,
                search_type=search_type,
                trace_parent=trace_parent,
            )
            engine_answers.extend({"engine_id": h["engine_id"], "text": h["text"]} for h in own)
    body: dict[str, Any] = {
        "search_type": search_type,
        "datasets": [d.name for d in datasets],
        "results": results,
    }
    if synth is not None:
        answer, chain, entities = answer_from(
            tenant_id=access.tenant_id, question=query, facts=facts, synthesizer=synth
        )
        body["context"] = {"facts": facts, "entities": entities, "causal_paths": chain, "connections": paths}
        body["answer"] = answer.to_dict()
        if engine_answers:
            body["engine_answers"] = engine_answers
    return body


def _chunk_json(item: MemoryItem, names: dict[int, str], score: float, **extra: Any) -> dict[str, Any]:
    return {
        "id": str(item.pk),
        "dataset_id": names.get(item.dataset_id, "") if item.dataset_id is not None else "",
        "engine_id": engines.BUILTIN,
        "content": item.content,
        "kind": item.record_kind,
        "score": score,
        "metadata": item.metadata,
        "trust": "untrusted",
        **extra,
    }


# --- relations ------------------------------------------------------------------------


def dataset_relations(
    *, access: MemoryAccess, name: str, limit: int = 100, trace_parent: str | None = None
) -> dict[str, Any]:
    """The dataset's graph: entities its chunks mention and the causal links they assert."""
    dataset = dataset_get(access, name)
    if dataset.engine != engines.BUILTIN:
        router = engines.router()
        assert router is not None
        hits = router.knowledge(
            access,
            dataset.engine,
            "get_relations",
            external_id=f"dataset:{dataset.name}",
            trace_parent=trace_parent,
        )
        return {
            "dataset_id": dataset.name,
            "engine_id": dataset.engine,
            "entities": [],
            "relations": [
                {
                    "subject": h["metadata"].get("subject"),
                    "predicate": h["metadata"].get("predicate"),
                    "object": h["metadata"].get("object"),
                    "text": h["text"],
                }
                for h in hits[:limit]
            ],
            "causal_edges": [],
        }
    items = MemoryItem.objects.filter(visible_q(access, read_scopes(access, None)), dataset=dataset)
    entities = (
        Mention.objects.filter(tenant_id=access.tenant_id, item__in=items)
        .values("entity__name", "entity__label")
        .annotate(mentions=Count("id"), items=Count("item_id", distinct=True))
        .order_by("-items", "entity__name")[:limit]
    )
    edges = CausalEdge.objects.filter(tenant_id=access.tenant_id, item__in=items).order_by("id")[:limit]
    return {
        "dataset_id": dataset.name,
        "engine_id": dataset.engine,
        "entities": [
            {
                "name": e["entity__name"],
                "label": e["entity__label"],
                "mentions": e["mentions"],
                "items": e["items"],
            }
            for e in entities
        ],
        "relations": [],
        "causal_edges": [
            {"cause": e.cause, "effect": e.effect, "cue": e.cue, "item_id": str(e.item_id), "edge_id": e.pk}
            for e in edges
        ],
    }


# --- delete ---------------------------------------------------------------------------


class DatasetHeld(Conflict):
    code = ErrorCode.MEMORY_LEGAL_HOLD


def holds_now_cover(tenant_id: Any, dataset: Dataset, chunks: Any) -> bool:
    """Re-read inside the deleting transaction: the dataset's flag or any hold."""
    fresh = Holds(tenant_id)
    named = any(h.target == "dataset" and h.dataset == dataset.name for h in fresh.holds)
    flagged = Dataset.objects.filter(pk=dataset.pk, legal_hold=True).exists()
    return named or flagged or fresh.held(chunks).exists()


def knowledge_dataset_delete(
    *, access: MemoryAccess, name: str, trace_parent: str | None = None
) -> dict[str, int]:
    """Delete a dataset and everything derived from it (chunks, their embeddings,
    entity links, causal edges, history; entities no other item names). Refused
    while a legal hold covers the dataset or any of its chunks."""
    dataset = dataset_get(access, name, own=True)
    holds = Holds(access.tenant_id)
    chunks = MemoryItem.objects.filter(dataset=dataset)
    by_hold = holds.covering(chunks)
    covering = holds.holds_by_id(by_hold)
    covering += [
        h for h in holds.holds if h.target == "dataset" and h.dataset == dataset.name and h not in covering
    ]
    flagged = chunks.filter(legal_hold=True).count()
    if covering or flagged or dataset.legal_hold:
        audit_blocked(
            tenant=access.agent.tenant,
            actor=access.actor,
            operation="dataset_delete",
            holds=covering,
            count=max(1, chunks.count()),
            flagged=flagged + int(dataset.legal_hold),
            target=("memory.dataset", dataset.name),
        )
        raise DatasetHeld(
            "This dataset is under legal hold and cannot be deleted.",
            details={"dataset_id": dataset.name, "holds": [str(h.pk) for h in covering]},
        )
    if dataset.engine != engines.BUILTIN:
        router = engines.router()
        assert router is not None
        # The engine first: if it cannot delete, the record of the dataset stays here.
        router.knowledge(
            access, dataset.engine, "delete_dataset", dataset=dataset.name, trace_parent=trace_parent
        )
    with transaction.atomic():
        ids = list(chunks.select_for_update().values_list("pk", flat=True))
        # A hold placed since the check wins: nothing is deleted.
        if holds_now_cover(access.tenant_id, dataset, chunks):
            raise DatasetHeld(
                "This dataset is under legal hold and cannot be deleted.",
                details={"dataset_id": dataset.name},
            )
        deleted = delete_items(access.tenant_id, ids)
        counts = {
            "items": deleted[MemoryItem._meta.db_table],
            "mentions": deleted.get(Mention._meta.db_table, 0),
            "causal_edges": deleted.get(CausalEdge._meta.db_table, 0),
            "history": deleted[MemoryHistory._meta.db_table],
            "entities": deleted[Entity._meta.db_table],
        }
        dataset.delete()
        audit_record(
            tenant=access.agent.tenant,
            actor=access.actor,
            action="memory.knowledge.dataset.delete",
            target_type="memory.dataset",
            target_id=name,
            data={"dataset": name, "engine": dataset.engine, **counts},
        )
    return counts
