"""Step one of a write: check a draft against the input rules and the agent's
policy, then do the slow work (personal-data detection, embedding) that must
never run inside a transaction holding row locks."""

from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import Future
from datetime import timedelta
from typing import Any

from django.utils import timezone

from core.errors import ApiError, field_error
from core.vocabulary import Classification, Kind, RecordKind, Scope
from memory import enforcement
from memory.embeddings import embed_texts
from memory.enforcement import MemoryAccess
from memory.extraction.clauses import summaries
from memory.extraction.handoff import write_inputs
from memory.pii import detect_personal_data
from memory.retrieval.speaker import label
from memory.services.write.drafts import MAX_RETENTION_DAYS, MemoryDraft, Prepared, Sentence
from memory.services.write.tx import in_transaction
from memory.text import ContentError, check_content, check_metadata, content_hash, sentence_spans


class InTransaction(AssertionError):
    """Slow analysis was asked for inside a transaction (a programming error)."""


def outside_transaction() -> None:
    """Detection and embedding take tens of milliseconds per text; inside a
    transaction they would hold its row and advisory locks that long."""
    if in_transaction():
        raise InTransaction("prepare() and analyse() must run before the write's transaction opens")


def checked_content(content: str) -> str:
    try:
        return check_content(content)
    except ContentError as exc:
        raise field_error("content", str(exc)) from exc


def validate_draft(access: MemoryAccess, draft: MemoryDraft) -> dict[str, Any]:
    """Structural checks and policy rules that do not need the content analysed."""
    content = checked_content(draft.content)
    scope = draft.scope or access.policy.default_scope
    if scope not in Scope.values:
        raise field_error("scope", f"{scope!r} is not a valid scope.")
    if draft.kind not in Kind.values:
        raise field_error("kind", f"{draft.kind!r} is not a valid kind.")
    if draft.record_kind not in RecordKind.values:
        raise field_error("record_kind", f"{draft.record_kind!r} is not a valid record kind.")
    try:
        classification = (
            Classification.from_name(draft.classification)
            if draft.classification
            else Classification.INTERNAL
        )
    except ValueError as exc:
        raise field_error(
            "classification", f"{draft.classification!r} is not a valid classification."
        ) from exc
    user_id = draft.user_id if draft.user_id is not None else access.default_user_id
    required: dict[str, tuple[str, str]] = {
        Scope.SESSION: ("session_id", draft.session_id),
        Scope.USER: ("user_id", user_id),
        Scope.TEAM: ("team", draft.team),
        Scope.PROJECT: ("project", draft.project),
    }
    if scope in required and not required[scope][1]:
        name = required[scope][0]
        raise field_error(name, f"Required for scope {scope!r}.")
    if draft.retention_days is not None and not 1 <= draft.retention_days <= MAX_RETENTION_DAYS:
        raise field_error("retention_days", f"Must be between 1 and {MAX_RETENTION_DAYS}.")
    if draft.occurred_at is not None and timezone.is_naive(draft.occurred_at):
        # A time without an offset names no instant: refused rather than guessed.
        raise field_error("occurred_at", "Must include a time zone offset (e.g. Z or +02:00).")
    try:
        check_metadata(draft.metadata)
    except ContentError as exc:
        raise field_error("metadata", str(exc)) from exc
    enforcement.check_write(
        access,
        scope=scope,
        kind=draft.kind,
        classification=classification,
        retention_days=draft.retention_days,
        team=draft.team,
        project=draft.project,
    )
    days = enforcement.effective_retention_days(access, draft.retention_days)
    return {
        "content": content,
        "scope": scope,
        "classification": int(classification),
        "user_id": user_id or "",
        "retention_until": timezone.now() + timedelta(days=days) if days else None,
    }


def prepare(access: MemoryAccess, drafts: list[MemoryDraft]) -> list[Prepared | ApiError]:
    """Validate every draft; detect personal data for the valid ones in one batch."""
    checked: list[dict[str, Any] | ApiError] = []
    for draft in drafts:
        try:
            checked.append(validate_draft(access, draft))
        except ApiError as exc:
            checked.append(exc)
    texts = [c["content"] for c in checked if isinstance(c, dict)]
    findings_list, vectors, inputs_list, sentence_lists = analyse(texts)
    # The chain walk's reading of each text, from the parse the detection just made.
    clause_iter = iter(summaries(texts))
    findings = iter(findings_list)
    vector_iter = iter(vectors)
    sentence_iter = iter(sentence_lists)
    inputs = iter(inputs_list)
    out: list[Prepared | ApiError] = []
    for draft, c in zip(drafts, checked, strict=True):
        if not isinstance(c, dict):
            out.append(c)
            continue
        finding = next(findings)
        vector = next(vector_iter)
        sentences = next(sentence_iter)
        extraction_inputs = next(inputs)
        clauses = next(clause_iter)
        personal = finding.personal_data or draft.personal_data
        try:
            enforcement.check_personal_data(access, personal_data=personal, types=finding.types)
        except ApiError as exc:
            out.append(exc)
            continue
        out.append(
            Prepared(
                content=c["content"],
                content_hash=content_hash(c["content"]),
                scope=c["scope"],
                kind=draft.kind,
                record_kind=draft.record_kind,
                classification=c["classification"],
                user_id=c["user_id"],
                session_id=draft.session_id,
                team=draft.team,
                project=draft.project,
                retention_until=c["retention_until"],
                legal_hold=draft.legal_hold or access.policy.legal_hold,
                personal_data=personal,
                personal_data_types=finding.types,
                source=draft.source,
                metadata=draft.metadata,
                shared_with=access.policy.shared_with if c["scope"] == Scope.SHARED_AGENTS else (),
                embedding=vector,
                sentences=tuple(sentences),
                dataset_pk=draft.dataset_pk,
                dataset=draft.dataset,
                occurred_at=draft.occurred_at,
                extraction_inputs=extraction_inputs,
                clauses=clauses,
            )
        )
    return out


def detect_and_read(texts: list[str]) -> tuple[list[Any], list[Any]]:
    """Personal-data findings, then the extraction inputs from the same parse (the
    parse is cached between the two: one parse per text)."""
    return detect_personal_data(texts), write_inputs(texts)


class DetectionBatcher:
    """One thread per process runs :func:`detect_and_read`; writes queue their texts.

    Everything queued while a detection runs goes into the next one together, as
    one ``nlp.pipe`` batch (up to ``batch_size`` texts, more only when a single
    write brings more). A short text's parse costs a third to a half as much CPU
    in a batch of four as alone (spaCy's per-call work is a large part of a
    sentence's parse), and concurrent single writes, which queued one behind the
    other on this thread before, are exactly what arrives together under load.
    Each text's findings and inputs are its own: the recognizers read one text at
    a time, and a batch parses each text as it would alone (tested). If a combined
    run fails, each write's texts run again alone, so only the write whose text
    fails gets the error. One thread, as before: the detection stays off the
    request threads (it overlaps the embedding) and spaCy runs serialized anyway.
    """

    def __init__(self, *, batch_size: int = 32) -> None:
        self.batch_size = batch_size
        self.runs = 0  # detections run, for tests and benchmarks
        self._queue: queue.SimpleQueue[tuple[list[str], Future[tuple[list[Any], list[Any]]]]] = (
            queue.SimpleQueue()
        )
        # A write taken from the queue that did not fit the last run (the batcher
        # thread's own; nothing else touches it).
        self._held: tuple[list[str], Future[tuple[list[Any], list[Any]]]] | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._start_lock = threading.Lock()

    def _ensure_thread(self) -> None:
        # A forked process (a Celery child) inherits the object but not the thread.
        if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
            with self._start_lock:
                if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                    if self._pid != os.getpid():
                        # A fork's copy of the queue holds the parent's writes, not ours; a
                        # thread that died in this process leaves its queue to the next one.
                        self._pid = os.getpid()
                        self._queue = queue.SimpleQueue()
                        self._held = None
                    self._thread = threading.Thread(target=self._run, name="fedmem-pii", daemon=True)
                    self._thread.start()

    def submit(self, texts: list[str]) -> Future[tuple[list[Any], list[Any]]]:
        self._ensure_thread()
        future: Future[tuple[list[Any], list[Any]]] = Future()
        self._queue.put((list(texts), future))
        return future

    def _take(self) -> list[tuple[list[str], Future[tuple[list[Any], list[Any]]]]]:
        first, self._held = self._held, None
        jobs = [first if first is not None else self._queue.get()]  # wait for work
        size = len(jobs[0][0])
        while size < self.batch_size:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if size + len(job[0]) > self.batch_size:
                self._held = job  # first in the next run, so the order of arrival holds
                break
            jobs.append(job)
            size += len(job[0])
        return jobs

    def _run(self) -> None:
        while True:
            jobs = self._take()
            live = [(texts, future) for texts, future in jobs if future.set_running_or_notify_cancel()]
            if not live:
                continue
            self.runs += 1
            try:
                findings, inputs = detect_and_read([text for texts, _ in live for text in texts])
            except BaseException as exc:
                if len(live) == 1:
                    live[0][1].set_exception(exc)
                    continue
                for texts, future in live:  # alone, so one bad text fails only its write
                    try:
                        future.set_result(detect_and_read(texts))
                    except BaseException as alone:
                        future.set_exception(alone)
                continue
            begin = 0
            for texts, future in live:
                end = begin + len(texts)
                future.set_result((findings[begin:end], inputs[begin:end]))
                begin = end


detection = DetectionBatcher()


def sentence_texts(text: str) -> list[tuple[int, int, str]]:
    """(start, end, text as embedded) of each sentence of a text of several; none for
    a text of one. A transcript line's speaker label ("Caroline: ...") opens every
    sentence as embedded, so each says who said it, as the whole line does."""
    spans = sentence_spans(text)
    if len(spans) < 2:
        return []
    said_by = label(text)
    opening = f"{said_by}: " if said_by else ""
    return [(a, b, text[a:b] if n == 0 else opening + text[a:b]) for n, (a, b) in enumerate(spans)]


def analyse(texts: list[str]) -> tuple[list[Any], Any, list[Any], list[list[Sentence]]]:
    """Personal-data findings, embeddings, extraction inputs and sentence vectors
    (texts of several sentences; :class:`memory.models.ItemSentence`) for ``texts``:
    the detection and the inputs (one parse) side by side with the embedding.

    spaCy (detection) runs mostly on one core while ONNX Runtime (embedding) runs
    on threads of its own and releases the GIL, so overlapping the two is what
    keeps a write close to the speed of embedding alone. An embedding computed for
    a text the policy then refuses is simply dropped.
    """
    outside_transaction()
    if not texts:
        return [], [], [], []
    pending = detection.submit(texts)
    # The sentences of a text of several go into the same passes as the texts.
    spans = [sentence_texts(text) for text in texts]
    vectors = embed_texts([*texts, *(piece for found in spans for _, _, piece in found)])
    sentences: list[list[Sentence]] = []
    at = len(texts)
    for found in spans:
        sentences.append([Sentence(a, b, vectors[at + n]) for n, (a, b, _) in enumerate(found)])
        at += len(found)
    findings, inputs = pending.result()
    return findings, vectors[: len(texts)], inputs, sentences
