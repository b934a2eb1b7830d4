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
with :func:`register_builtin_source`.
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


def _run_source(source: RecallSource, query: str, top_k: int, deadline: float) -> SourceOutcome:
    """Runs in a worker thread; never raises."""
    started = time.perf_counter()

    def report(status: str, *, count: int = 0, error: dict[str, Any] | None = None) -> SourceReport:
        return SourceReport(
            source.engine_id,
            source.provider_id,
            status,
            int((time.perf_counter() - started) * 1000),
            count,
            error,
        )

    try:
        hits = source.recall(query, top_k, deadline)[:top_k]
    except SourceFailure as exc:
        return SourceOutcome(report(exc.status, error=_error(exc.reason, exc.message, exc.retryable)))
    except EngineTimeout as exc:
        return SourceOutcome(report(SOURCE_TIMED_OUT, error=_error(exc.reason, exc.message, True)))
    except EngineUnavailable as exc:
        return SourceOutcome(report(SOURCE_UNAVAILABLE, error=_error(exc.reason, exc.message, exc.retryable)))
    except AdapterError as exc:
        return SourceOutcome(report(SOURCE_ERROR, error=_error(exc.reason, exc.message, exc.retryable)))
    except Exception as exc:  # a source bug must not take the other sources down
        return SourceOutcome(
            report(SOURCE_ERROR, error=_error("source_error", exc.__class__.__name__, False))
        )
    finally:
        _close_thread_connections()
    for position, hit in enumerate(hits, start=1):
        if hit.rank < 1:
            hit.rank = position
    return SourceOutcome(report(SOURCE_OK, count=len(hits)), hits)


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
    deadline = time.monotonic() + timeout_ms / 1000
    executor = _executor()
    futures: list[Future[SourceOutcome]] = [
        executor.submit(_run_source, source, query, top_k, deadline) for source in sources
    ]
    # _run_source never raises, so FIRST_EXCEPTION simply means "all done or deadline".
    wait(futures, timeout=max(0.0, deadline - time.monotonic()), return_when=FIRST_EXCEPTION)
    for future in futures:
        # Never wait for a hung source; a source that has not even started never will.
        future.cancel()
    outcomes: list[SourceOutcome] = []
    for source, future in zip(sources, futures, strict=True):
        if future.done() and not future.cancelled():
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
    for hit in group.matches:
        subject, predicate = hit.metadata.get("subject"), hit.metadata.get("predicate")
        if subject and predicate:
            return f"{normalize_text(str(subject))} {normalize_text(str(predicate))}", group.norm
    match = _ATTRIBUTE.match(group.norm)
    if match:
        return f"{match['owner']}'s {match['attribute']}", match["value"]
    match = _SINGLE_VALUED.match(group.norm)
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
