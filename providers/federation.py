"""Federated recall: ask several sources at once, fuse by rank, keep every match.

* Fan-out is concurrent, one worker thread per source, under one deadline. A
  source that has not answered by then is reported ``timed_out`` and abandoned
  (its own egress timeout ends its thread; we never wait for it).
* Each source reports ``ok | timed_out | unavailable | error`` with its latency
  and count. The aggregate is ``ok`` (all answered), ``partial`` (at least one
  did) or ``failed`` (none did). Failures are returned, never raised, and a
  failed recall is never an empty ``ok``.
* Fusion is ordinal reciprocal-rank fusion: a record's contribution is
  ``1 / (k + rank)`` where ``rank`` is its position in its own source's answer.
  Provider scores are carried along but never compared across providers.
* Records are grouped by exact kind + normalized text; every source match stays
  in its group with its provenance, source-local score and rank.
* Groups that disagree about the same subject are flagged (``conflict``), never
  resolved silently.

A source is anything with ``engine_id``, ``provider_id`` and
``recall(query, top_k, deadline) -> list[Hit]``; the builtin engine plugs in
with :func:`register_builtin_source`. A source may also have ``prepare()``: a
one-off, process-local step (loading the embedding model, importing an SDK) that
runs before the deadline starts. The deadline bounds how long a source takes to
answer, not how long this process takes to start: on a busy machine a cold model
load takes longer than the default 3 s budget, and the first recall of every new
web worker would otherwise report fedmem's own memory as timed out.
"""

from __future__ import annotations

import os
import re
import threading
import time
import unicodedata
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from django.conf import settings

from providers.adapters.base import (
    AdapterError,
    EngineTimeout,
    EngineUnavailable,
    Hit,
    MemoryAdapter,
    OperationContext,
)

RRF_K = 60
MAX_TOP_K = 50
MAX_CONFLICT_REFERENCES = 5

SOURCE_OK = "ok"
SOURCE_TIMED_OUT = "timed_out"
SOURCE_UNAVAILABLE = "unavailable"
SOURCE_ERROR = "error"


@runtime_checkable
class RecallSource(Protocol):
    """One place federated recall can ask. Adapters are wrapped by :class:`AdapterSource`."""

    @property
    def engine_id(self) -> str: ...

    @property
    def provider_id(self) -> str: ...

    def recall(self, query: str, top_k: int, deadline: float) -> list[Hit]: ...


class SourceFailure(Exception):
    """A source that cannot run at all (no credential, not installed); reported, not raised."""

    def __init__(self, status: str, reason: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.retryable = retryable


@dataclass
class AdapterSource:
    """A provider engine as a recall source."""

    adapter: MemoryAdapter
    ctx: OperationContext

    @property
    def engine_id(self) -> str:
        return self.adapter.engine.engine_id

    @property
    def provider_id(self) -> str:
        return self.adapter.provider

    def prepare(self) -> None:
        type(self.adapter).warm()

    def recall(self, query: str, top_k: int, deadline: float) -> list[Hit]:
        ctx = replace(
            self.ctx,
            deadline=deadline if self.ctx.deadline is None else min(deadline, self.ctx.deadline),
        )
        return list(self.adapter.perform("recall", ctx, query=query, top_k=top_k))


@dataclass
class FailedSource:
    """A source known to fail before it runs; it still gets its line in the report."""

    engine_id: str
    provider_id: str
    failure: SourceFailure

    def recall(self, query: str, top_k: int, deadline: float) -> list[Hit]:
        raise self.failure


BuiltinSourceFactory = Callable[[Any, OperationContext], RecallSource]
_builtin_factory: BuiltinSourceFactory | None = None


def register_builtin_source(factory: BuiltinSourceFactory | None) -> None:
    """The memory app registers its engine here (from its AppConfig.ready)."""
    global _builtin_factory
    _builtin_factory = factory


def builtin_source_factory() -> BuiltinSourceFactory | None:
    return _builtin_factory


@dataclass
class SourceReport:
    engine_id: str
    provider_id: str
    status: str
    latency_ms: int
    count: int = 0
    error: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine_id": self.engine_id,
            "provider_id": self.provider_id,
            "status": self.status,
            "error": self.error,
            "latency_ms": self.latency_ms,
            "count": self.count,
        }


@dataclass
class SourceOutcome:
    report: SourceReport
    hits: list[Hit] = field(default_factory=list)


def _failed(source: RecallSource, exc: Exception, latency_ms: int) -> SourceOutcome:
    """The report of a source that raised; every failure is a status, never an exception."""

    def report(status: str, error: dict[str, Any]) -> SourceOutcome:
        return SourceOutcome(SourceReport(source.engine_id, source.provider_id, status, latency_ms, 0, error))

    if isinstance(exc, SourceFailure):
        return report(exc.status, _error(exc.reason, exc.message, exc.retryable))
    if isinstance(exc, EngineTimeout):
        return report(SOURCE_TIMED_OUT, _error(exc.reason, exc.message, True))
    if isinstance(exc, EngineUnavailable):
        return report(SOURCE_UNAVAILABLE, _error(exc.reason, exc.message, exc.retryable))
    if isinstance(exc, AdapterError):
        return report(SOURCE_ERROR, _error(exc.reason, exc.message, exc.retryable))
    # A source bug must not take the other sources down.
    return report(SOURCE_ERROR, _error("source_error", exc.__class__.__name__, False))


def _run_source(source: RecallSource, query: str, top_k: int, deadline: float) -> SourceOutcome:
    """Runs in a worker thread; never raises."""
    started = time.perf_counter()
    try:
        hits = source.recall(query, top_k, deadline)[:top_k]
    except Exception as exc:
        return _failed(source, exc, int((time.perf_counter() - started) * 1000))
    finally:
        _close_thread_connections()
    for position, hit in enumerate(hits, start=1):
        if hit.rank < 1:
            hit.rank = position
    return SourceOutcome(
        SourceReport(
            source.engine_id,
            source.provider_id,
            SOURCE_OK,
            int((time.perf_counter() - started) * 1000),
            len(hits),
        ),
        hits,
    )


def _prepare(source: RecallSource) -> SourceOutcome | None:
    """Run a source's one-off preparation outside the deadline; its failure is its outcome."""
    prepare = getattr(source, "prepare", None)
    if prepare is None:
        return None
    try:
        prepare()
    except Exception as exc:
        return _failed(source, exc, 0)
    return None


def _close_thread_connections() -> None:
    # A source that touches the database (the builtin engine) opens a connection in
    # this worker thread; the thread is thrown away, so close what it opened.
    from django.db import connections

    connections.close_all()


def _error(reason: str, message: str, retryable: bool) -> dict[str, Any]:
    return {"reason": reason, "message": message[:500], "retryable": retryable}


_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    """One process-wide pool. Starting threads per recall costs a scheduling round trip
    per source (milliseconds on a busy machine) before the first request leaves; pooled
    threads are already running. A hung source holds a worker only until its egress
    timeout (never past the engine's ``timeout_seconds``), and a task still queued at
    its deadline is cancelled, so a saturated pool degrades to timed-out sources,
    never to a hang."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=settings.FEDMEM_FEDERATION_WORKERS,
                thread_name_prefix="fedmem-federation",
            )
        return _pool


def _forget_pool_after_fork() -> None:
    # Threads do not survive fork (Celery prefork workers): the child builds its own pool.
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_after_fork)


def fan_out(
    sources: Sequence[RecallSource], *, query: str, top_k: int, timeout_ms: int
) -> list[SourceOutcome]:
    """Ask every source concurrently; whatever has not answered at the deadline is timed out."""
    if not sources:
        return []
    # Once per process each preparation takes time (a model load, an SDK import);
    # afterwards it returns at once. It never touches the network.
    prepared = [_prepare(source) for source in sources]
    deadline = time.monotonic() + timeout_ms / 1000
    executor = _executor()
    futures: list[Future[SourceOutcome] | None] = [
        None if failed is not None else executor.submit(_run_source, source, query, top_k, deadline)
        for source, failed in zip(sources, prepared, strict=True)
    ]
    running = [future for future in futures if future is not None]
    # _run_source never raises, so FIRST_EXCEPTION simply means "all done or deadline".
    wait(running, timeout=max(0.0, deadline - time.monotonic()), return_when=FIRST_EXCEPTION)
    for future in running:
        # Never wait for a hung source; a source that has not even started never will.
        future.cancel()
    outcomes: list[SourceOutcome] = []
    for source, failed, future in zip(sources, prepared, futures, strict=True):
        if failed is not None:
            outcomes.append(failed)
        elif future is not None and future.done() and not future.cancelled():
            outcomes.append(future.result())
        else:
            outcomes.append(
                SourceOutcome(
                    SourceReport(
                        source.engine_id,
                        source.provider_id,
                        SOURCE_TIMED_OUT,
                        timeout_ms,
                        0,
                        _error("timeout", f"No answer within {timeout_ms} ms.", True),
                    )
                )
            )
    return outcomes


# --- grouping and fusion -------------------------------------------------------------

_SPACE = re.compile(r"\s+")
_EDGE_PUNCT = " \t\n\"'`.,;:!?()[]{}"


def normalize_text(text: str) -> str:
    """Unicode-normalized, case-folded, whitespace-collapsed, outer punctuation stripped."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    return _SPACE.sub(" ", text).strip(_EDGE_PUNCT)


@dataclass
class Group:
    kind: str
    norm: str
    text: str
    matches: list[Hit] = field(default_factory=list)
    rrf_score: float = 0.0
    best_rank: int = 10**9
    first_source: int = 10**9
    conflicts: list[Group] = field(default_factory=list)
    conflict_subject: str | None = None

    @property
    def sources(self) -> int:
        return len({hit.engine_id for hit in self.matches})

    def to_dict(self) -> dict[str, Any]:
        conflict = None
        if self.conflicts:
            conflict = {
                "subject": self.conflict_subject,
                "with": [{"kind": g.kind, "text": g.text} for g in self.conflicts[:MAX_CONFLICT_REFERENCES]],
            }
        return {
            "kind": self.kind,
            "text": self.text,
            "rrf_score": round(self.rrf_score, 6),
            "matches": [hit.to_dict() for hit in self.matches],
            "conflict": conflict,
        }


def group_and_fuse(outcomes: Sequence[SourceOutcome], *, top_k: int, rrf_k: int = RRF_K) -> list[Group]:
    groups: dict[tuple[str, str], Group] = {}
    for source_index, outcome in enumerate(outcomes):
        voted: set[tuple[str, str]] = set()
        for hit in sorted(outcome.hits, key=lambda h: h.rank):
            norm = normalize_text(hit.text)
            if not norm:
                continue
            key = (hit.kind, norm)
            group = groups.get(key)
            if group is None:
                group = groups[key] = Group(kind=hit.kind, norm=norm, text=hit.text.strip())
            group.matches.append(hit)
            group.best_rank = min(group.best_rank, hit.rank)
            group.first_source = min(group.first_source, source_index)
            # One vote per source per group: a source repeating itself gains nothing.
            if key not in voted:
                voted.add(key)
                group.rrf_score += 1.0 / (rrf_k + hit.rank)
    ordered = sorted(
        groups.values(),
        key=lambda g: (-g.rrf_score, -g.sources, g.best_rank, g.first_source, g.kind, g.norm),
    )
    flag_conflicts(ordered)
    return ordered[:top_k]


# --- contradictions ------------------------------------------------------------------

_NEGATIONS = {
    "not",
    "no",
    "never",
    "don't",
    "doesn't",
    "isn't",
    "aren't",
    "wasn't",
    "weren't",
    "didn't",
    "won't",
    "cannot",
    "can't",
    "does",
    "do",
    "did",
}
_NEGATIVE = {
    "not",
    "no",
    "never",
    "don't",
    "doesn't",
    "isn't",
    "aren't",
    "wasn't",
    "weren't",
    "didn't",
    "won't",
    "cannot",
    "can't",
}
# Predicates that hold one value at a time for a subject: two different values conflict.
_SINGLE_VALUED = re.compile(
    r"^(?P<subject>.+?) (?P<predicate>lives in|lives at|works at|works for|is based in|was born in|"
    r"was born on|is married to|reports to|prefers) (?P<value>.+)$"
)
# "<owner>'s <attribute> is <value>": the attribute holds one value.
_ATTRIBUTE = re.compile(r"^(?P<owner>.+?)'s (?P<attribute>.+?) (?:is|are|was|were) (?P<value>.+)$")


def _tokens(norm: str) -> list[str]:
    return norm.replace(",", " ").split()


def _polarity_key(norm: str) -> tuple[str, bool]:
    tokens = _tokens(norm)
    negative = any(token in _NEGATIVE for token in tokens)
    # Crude stemming so "likes" and "does not like" compare equal.
    kept = [
        token[:-1] if len(token) > 3 and token.endswith("s") else token
        for token in tokens
        if token not in _NEGATIONS
    ]
    return " ".join(kept), negative


def _subject_value(group: Group) -> tuple[str, str] | None:
    # A retired fact (its validity window closed, or superseded) is history, not a
    # contradiction, whether or not the provider names its subject.
    if any(hit.metadata.get("invalid_at") or hit.metadata.get("expired_at") for hit in group.matches):
        return None
    textual = _textual_subject_value(group.norm)
    for hit in group.matches:
        subject, predicate = hit.metadata.get("subject"), hit.metadata.get("predicate")
        if subject and predicate:
            # A relation name (Zep's and Graphiti's LIVES_IN) reads as the words a
            # text memory uses, so a provider's edge and another's sentence about the
            # same subject meet under one key and compare by value.
            key = f"{normalize_text(str(subject))} {normalize_text(str(predicate).replace('_', ' '))}"
            obj = hit.metadata.get("object")
            if obj:
                return key, normalize_text(str(obj))
            if textual and textual[0] == key:
                return textual
            return key, group.norm
    return textual


def _textual_subject_value(norm: str) -> tuple[str, str] | None:
    match = _ATTRIBUTE.match(norm)
    if match:
        return f"{match['owner']}'s {match['attribute']}", match["value"]
    match = _SINGLE_VALUED.match(norm)
    if match:
        return f"{match['subject']} {match['predicate']}", match["value"]
    return None


def flag_conflicts(groups: Sequence[Group]) -> None:
    """Mark groups that disagree about the same subject. Heuristic and conservative:
    a polarity flip of the same statement, or two values for a one-value subject
    (structured subject+predicate from the provider, "<x>'s <attribute> is <v>",
    or a single-valued predicate such as "lives in")."""
    by_polarity: dict[str, list[tuple[bool, Group]]] = {}
    by_subject: dict[str, list[tuple[str, Group]]] = {}
    for group in groups:
        key, negative = _polarity_key(group.norm)
        by_polarity.setdefault(key, []).append((negative, group))
        subject_value = _subject_value(group)
        if subject_value:
            by_subject.setdefault(subject_value[0], []).append((subject_value[1], group))

    def link(a: Group, b: Group, subject: str) -> None:
        if a is b or b in a.conflicts:
            return
        a.conflicts.append(b)
        b.conflicts.append(a)
        a.conflict_subject = a.conflict_subject or subject
        b.conflict_subject = b.conflict_subject or subject

    for key, members in by_polarity.items():
        positives = [g for negative, g in members if not negative]
        negatives = [g for negative, g in members if negative]
        for a in positives:
            for b in negatives:
                link(a, b, key)
    for subject, valued in by_subject.items():
        for i, (value_a, a) in enumerate(valued):
            for value_b, b in valued[i + 1 :]:
                if value_a != value_b:
                    link(a, b, subject)


# --- the whole recall ------------------------------------------------------------------


def aggregate_status(reports: Sequence[SourceReport]) -> str:
    ok = sum(1 for report in reports if report.status == SOURCE_OK)
    if reports and ok == len(reports):
        return "ok"
    return "partial" if ok else "failed"


def federated_recall(
    sources: Sequence[RecallSource], *, query: str, top_k: int, timeout_ms: int, rrf_k: int = RRF_K
) -> dict[str, Any]:
    top_k = max(1, min(top_k, MAX_TOP_K))
    outcomes = fan_out(sources, query=query, top_k=top_k, timeout_ms=timeout_ms)
    reports = [outcome.report for outcome in outcomes]
    groups = group_and_fuse(outcomes, top_k=top_k, rrf_k=rrf_k)
    return {
        "status": aggregate_status(reports),
        "sources": [report.to_dict() for report in reports],
        "results": [group.to_dict() for group in groups],
    }
