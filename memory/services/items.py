"""Writes to the builtin memory: remember (one or a batch), update, forget, purge.

Each function is one state change: it validates, enforces the policy, does the
slow work (personal-data detection and embedding) *before* opening a
transaction, then stores rows, history and idempotency bookkeeping in one
transaction. Concurrent identical writes are serialized by transaction-scoped
advisory locks, so the same Idempotency-Key, or the same content under the same
scope keys, yields exactly one item.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Func, Q, Value
from django.db.models.expressions import RawSQL
from django.utils import timezone
from pgvector.django import CosineDistance

from core.errors import ApiError, Conflict, InvalidInput, NotFound, Unprocessable
from core.vocabulary import Classification, Kind, RecordKind, Scope
from memory import enforcement
from memory.embeddings import embed_texts
from memory.enforcement import MemoryAccess
from memory.extraction.pipeline import delete_orphan_entities, entities_of
from memory.holds import Holds, audit_blocked
from memory.models import IdempotencyRecord, MemoryHistory, MemoryItem, SessionMessage
from memory.pii import detect_personal_data
from memory.services.hooks import items_written
from memory.text import ContentError, check_content, check_metadata, content_hash

MAX_BATCH = 100
MAX_RETENTION_DAYS = 36500


@dataclass(frozen=True)
class MemoryDraft:
    """One write as the caller asked for it (None: take the policy's default)."""

    content: str
    scope: str | None = None
    kind: str = "fact"
    record_kind: str = "fact"
    classification: str | None = None
    user_id: str | None = None
    session_id: str = ""
    team: str = ""
    project: str = ""
    retention_days: int | None = None
    legal_hold: bool = False
    personal_data: bool = False
    source: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    # Knowledge chunks: the dataset row's pk and name (set by memory.services.knowledge only).
    dataset_pk: int | None = None
    dataset: str = ""
    # None: as the agent's policy says (check_contradictions).
    check_contradictions: bool | None = None

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class WriteOutcome:
    item: MemoryItem
    created: bool
    deduplicated: bool
    replayed: bool = False
    # Decisions of the contradiction check (memory.services.contradictions), if it ran.
    contradictions: list[Any] | None = None


@dataclass
class BatchResult:
    index: int
    outcome: WriteOutcome | None = None
    error: ApiError | None = None

    @property
    def status(self) -> str:
        if self.error is not None:
            return "error"
        assert self.outcome is not None
        return "deduplicated" if self.outcome.deduplicated else "created"


@dataclass(frozen=True, eq=False)
class _Prepared:
    """A draft that passed every check, with its derived fields."""

    content: str
    content_hash: str
    scope: str
    kind: str
    record_kind: str
    classification: int
    user_id: str
    session_id: str
    team: str
    project: str
    retention_until: Any
    legal_hold: bool
    personal_data: bool
    personal_data_types: tuple[str, ...]
    source: str
    metadata: dict[str, Any]
    shared_with: tuple[str, ...]
    embedding: Any
    dataset_pk: int | None = None
    dataset: str = ""

    def dedup_keys(self, access: MemoryAccess) -> tuple[str, ...]:
        # A knowledge chunk is a duplicate only within its own dataset.
        return (
            str(access.tenant_id), str(access.agent.pk), self.user_id, self.session_id,
            self.team, self.project, self.content_hash, str(self.dataset_pk or ""),
        )  # fmt: skip


def _field_error(name: str, message: str) -> InvalidInput:
    return InvalidInput(f"Invalid input: {name}.", details={"fields": {name: [message]}})


def _checked_content(content: str) -> str:
    try:
        return check_content(content)
    except ContentError as exc:
        raise _field_error("content", str(exc)) from exc


def _validate(access: MemoryAccess, draft: MemoryDraft) -> dict[str, Any]:
    """Structural checks and policy rules that do not need the content analysed."""
    content = _checked_content(draft.content)
    scope = draft.scope or access.policy.default_scope
    if scope not in Scope.values:
        raise _field_error("scope", f"{scope!r} is not a valid scope.")
    if draft.kind not in Kind.values:
        raise _field_error("kind", f"{draft.kind!r} is not a valid kind.")
    if draft.record_kind not in RecordKind.values:
        raise _field_error("record_kind", f"{draft.record_kind!r} is not a valid record kind.")
    try:
        classification = (
            Classification.from_name(draft.classification)
            if draft.classification
            else Classification.INTERNAL
        )
    except ValueError as exc:
        raise _field_error(
            "classification", f"{draft.classification!r} is not a valid classification."
        ) from exc
    user_id = draft.user_id if draft.user_id is not None else access.default_user_id
    required = {
        Scope.SESSION: ("session_id", draft.session_id),
        Scope.USER: ("user_id", user_id),
        Scope.TEAM: ("team", draft.team),
        Scope.PROJECT: ("project", draft.project),
    }
    if scope in required and not required[scope][1]:
        name = required[scope][0]
        raise _field_error(name, f"Required for scope {scope!r}.")
    if draft.retention_days is not None and not 1 <= draft.retention_days <= MAX_RETENTION_DAYS:
        raise _field_error("retention_days", f"Must be between 1 and {MAX_RETENTION_DAYS}.")
    try:
        check_metadata(draft.metadata)
    except ContentError as exc:
        raise _field_error("metadata", str(exc)) from exc
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


def _prepare(access: MemoryAccess, drafts: list[MemoryDraft]) -> list[_Prepared | ApiError]:
    """Validate every draft; detect personal data for the valid ones in one batch."""
    checked: list[dict[str, Any] | ApiError] = []
    for draft in drafts:
        try:
            checked.append(_validate(access, draft))
        except ApiError as exc:
            checked.append(exc)
    texts = [c["content"] for c in checked if isinstance(c, dict)]
    findings_list, vectors = _analyse(texts)
    findings = iter(findings_list)
    vector_iter = iter(vectors)
    out: list[_Prepared | ApiError] = []
    for draft, c in zip(drafts, checked, strict=True):
        if not isinstance(c, dict):
            out.append(c)
            continue
        finding = next(findings)
        vector = next(vector_iter)
        personal = finding.personal_data or draft.personal_data
        try:
            enforcement.check_personal_data(access, personal_data=personal, types=finding.types)
        except ApiError as exc:
            out.append(exc)
            continue
        out.append(
            _Prepared(
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
                dataset_pk=draft.dataset_pk,
                dataset=draft.dataset,
            )
        )
    return out


_analysis_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fedmem-pii")


def _analyse(texts: list[str]) -> tuple[list[Any], Any]:
    """Personal-data findings and embeddings for ``texts``, computed side by side.

    spaCy (detection) runs mostly on one core while torch (embedding) spreads
    over the others and releases the GIL, so overlapping the two is what keeps a
    write close to the speed of embedding alone. An embedding computed for a
    text the policy then refuses is simply dropped.
    """
    if not texts:
        return [], []
    pending = _analysis_pool.submit(detect_personal_data, texts)
    vectors = embed_texts(texts)
    return pending.result(), vectors


# --- locking and idempotency -------------------------------------------------------


def _advisory_lock(*parts: str) -> None:
    """Block until no other transaction holds the same lock; released at commit/rollback."""
    _advisory_locks(["\x1f".join(parts)])


def _advisory_locks(names: list[str]) -> None:
    """Take several transaction-scoped locks in one statement, always in hash order."""
    if not names:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_advisory_xact_lock(h)) FROM "
            "(SELECT DISTINCT hashtextextended(n, 0) AS h FROM unnest(%s::text[]) AS n ORDER BY h) AS locks",
            [names],
        )


def _idempotency_record(access: MemoryAccess, endpoint: str, key: str) -> IdempotencyRecord | None:
    ttl = timedelta(hours=settings.FEDMEM_IDEMPOTENCY_TTL_HOURS)
    return IdempotencyRecord.objects.filter(
        agent_id=access.agent.pk, endpoint=endpoint, key=key, created_at__gt=timezone.now() - ttl
    ).first()


def _check_replay(record: IdempotencyRecord, request_hash: str) -> None:
    if record.request_hash != request_hash:
        raise Unprocessable(
            "This Idempotency-Key was already used with a different request body.",
            code="idempotency_key_reused",
        )


def _item_by_id(access: MemoryAccess, item_id: Any) -> MemoryItem:
    item = MemoryItem.objects.filter(pk=item_id, tenant_id=access.tenant_id).first()
    if item is None:
        raise NotFound("The memory this Idempotency-Key created no longer exists.", code="memory_not_found")
    return item


def _save_idempotency(
    access: MemoryAccess, endpoint: str, key: str, request_hash: str, status_code: int, result: dict[str, Any]
) -> None:
    ttl = timedelta(hours=settings.FEDMEM_IDEMPOTENCY_TTL_HOURS)
    # An expired record for the same key is replaced, not an error.
    IdempotencyRecord.objects.filter(
        agent_id=access.agent.pk, endpoint=endpoint, key=key, created_at__lte=timezone.now() - ttl
    ).delete()
    IdempotencyRecord.objects.create(
        tenant_id=access.tenant_id,
        agent=access.agent,
        endpoint=endpoint,
        key=key,
        request_hash=request_hash,
        status_code=status_code,
        result=result,
    )


# --- storing ----------------------------------------------------------------------


def _provenance(access: MemoryAccess, via: str, source: str, dataset: str = "") -> dict[str, Any]:
    data = {"writer": access.actor.as_json(), "via": via, "source": source}
    if dataset:
        # Legal holds on a dataset find its items by this key (memory.holds).
        data["dataset"] = dataset
    return data


def _exact_duplicates(access: MemoryAccess, prepared: list[_Prepared]) -> dict[tuple[str, ...], MemoryItem]:
    """Existing current items with the same scope keys and normalized content, for a
    whole batch in one query. Held to the same filters as reads: expired,
    superseded and foreign items never match."""
    if not prepared:
        return {}
    wanted = {p.dedup_keys(access) for p in prepared}
    found: dict[tuple[str, ...], MemoryItem] = {}
    candidates = (
        MemoryItem.objects.current()
        .filter(
            tenant_id=access.tenant_id,
            agent_id=access.agent.pk,
            content_hash__in=sorted({p.content_hash for p in prepared}),
        )
        .defer("embedding", "search_vector")
        .order_by("created_at")
    )
    for item in candidates:
        key = (
            str(item.tenant_id), str(item.agent_id), item.user_id, item.session_id,
            item.team, item.project, item.content_hash, str(item.dataset_id or ""),
        )  # fmt: skip
        if key in wanted and key not in found:
            found[key] = item
    return found


def _near_duplicate(access: MemoryAccess, prepared: _Prepared, embedding: Any) -> MemoryItem | None:
    """When enabled, the closest current item with the same scope keys whose cosine
    similarity reaches FEDMEM_DEDUP_NEAR_THRESHOLD."""
    threshold = settings.FEDMEM_DEDUP_NEAR_THRESHOLD
    if threshold <= 0:
        return None
    return (
        MemoryItem.objects.current()
        .filter(
            tenant_id=access.tenant_id,
            agent_id=access.agent.pk,
            user_id=prepared.user_id,
            session_id=prepared.session_id,
            team=prepared.team,
            project=prepared.project,
            dataset_id=prepared.dataset_pk,
        )
        .annotate(distance=CosineDistance("embedding", embedding))
        .filter(distance__lte=1 - threshold)
        .defer("embedding", "search_vector")
        .order_by("distance")
        .first()
    )


def _merge_duplicate(
    access: MemoryAccess, existing: MemoryItem, prepared: _Prepared, history: list[MemoryHistory]
) -> MemoryItem:
    """Widen the existing item instead of storing a second copy: scopes are unioned,
    the stricter classification and any legal hold win, the longer retention wins.
    A held item is never widened (memory.holds decides): the duplicate is answered
    with it unchanged, and the merge it would have made is audited as blocked."""
    changes: dict[str, Any] = {}
    if prepared.scope not in existing.scopes:
        changes["scopes"] = [*existing.scopes, prepared.scope]
    if prepared.classification > existing.classification:
        changes["classification"] = prepared.classification
    if prepared.legal_hold and not existing.legal_hold:
        changes["legal_hold"] = True
    if existing.retention_until is not None and (
        prepared.retention_until is None or prepared.retention_until > existing.retention_until
    ):
        changes["retention_until"] = prepared.retention_until
    if prepared.personal_data and not existing.personal_data:
        changes["personal_data"] = True
        changes["personal_data_types"] = sorted(
            set(existing.personal_data_types) | set(prepared.personal_data_types)
        )
    if not changes:
        return existing
    holds = Holds(access.tenant_id)
    if holds.item_is_held(existing):
        # Held data stays byte-identical; the duplicate is still answered with it.
        audit_blocked(
            tenant=access.agent.tenant,
            actor=access.actor,
            operation="dedup_merge",
            holds=holds.covering_item(existing),
            count=1,
            flagged=int(existing.legal_hold),
            target=("memory.memoryitem", str(existing.pk)),
        )
        return existing
    before = {key: _jsonable(getattr(existing, key)) for key in changes}
    for key, value in changes.items():
        setattr(existing, key, value)
    existing.save(update_fields=[*changes, "updated_at"])
    history.append(
        _history(
            access,
            existing,
            MemoryHistory.Event.SCOPE_ADDED if "scopes" in changes else MemoryHistory.Event.DEDUPLICATED,
            details={"before": before, "after": {key: _jsonable(v) for key, v in changes.items()}},
        )
    )
    return existing


def _jsonable(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return list(value) if isinstance(value, tuple) else value


def _history(
    access: MemoryAccess,
    item: MemoryItem,
    event: str,
    *,
    old: str = "",
    new: str = "",
    details: dict[str, Any] | None = None,
) -> MemoryHistory:
    return MemoryHistory(
        tenant_id=item.tenant_id,
        agent_id=item.agent_id,
        item_id=item.pk,
        event=event,
        actor_type=access.actor.type,
        actor_id=access.actor.id,
        old_content=old,
        new_content=new,
        # The subject rides along so erasure finds the history of items already deleted.
        details={**(details or {}), "user_id": item.user_id},
    )


def _store(access: MemoryAccess, prepared: list[_Prepared], via: str) -> list[WriteOutcome]:
    """Insert or deduplicate each prepared write; must run inside a transaction."""
    # Lock every content key (one statement, a fixed order, so two batches sharing
    # items cannot deadlock); the lock makes "check for a duplicate, then insert" atomic.
    _advisory_locks(["\x1f".join(("memory-dedup", *p.dedup_keys(access))) for p in prepared])
    outcomes: list[WriteOutcome] = []
    fresh: list[MemoryItem] = []
    seen: dict[tuple[str, ...], MemoryItem] = _exact_duplicates(access, prepared)
    history: list[MemoryHistory] = []
    now = timezone.now()
    for p in prepared:
        vector = p.embedding
        key = p.dedup_keys(access)
        existing = seen.get(key) or _near_duplicate(access, p, vector)
        if existing is not None and existing.pk in {item.pk for item in fresh}:
            # A duplicate inside this very batch: widen the pending row in memory.
            if p.scope not in existing.scopes:
                existing.scopes = [*existing.scopes, p.scope]
            outcomes.append(WriteOutcome(existing, created=False, deduplicated=True))
            continue
        if existing is not None:
            merged = _merge_duplicate(access, existing, p, history)
            seen[key] = merged
            outcomes.append(WriteOutcome(merged, created=False, deduplicated=True))
            continue
        item = MemoryItem(
            tenant_id=access.tenant_id,
            agent=access.agent,
            user_id=p.user_id,
            session_id=p.session_id,
            team=p.team,
            project=p.project,
            scope=p.scope,
            scopes=[p.scope],
            shared_with=list(p.shared_with),
            content=p.content,
            kind=p.kind,
            record_kind=p.record_kind,
            classification=p.classification,
            personal_data=p.personal_data,
            personal_data_types=list(p.personal_data_types),
            source=p.source,
            provenance=_provenance(access, via, p.source, p.dataset),
            dataset_id=p.dataset_pk,
            metadata=p.metadata,
            content_hash=p.content_hash,
            embedding=vector,
            created_at=now,
            valid_from=now,
            retention_until=p.retention_until,
            legal_hold=p.legal_hold,
        )
        fresh.append(item)
        seen[key] = item
        outcomes.append(WriteOutcome(item, created=True, deduplicated=False))
    if fresh:
        MemoryItem.objects.bulk_create(fresh)
        history.extend(
            _history(access, item, MemoryHistory.Event.CREATED, new=item.content) for item in fresh
        )
    if history:
        MemoryHistory.objects.bulk_create(history)
    if fresh:
        items_written([item.pk for item in fresh])
    return outcomes


def _check_contradictions(access: MemoryAccess, written: list[tuple[Any, WriteOutcome]]) -> None:
    """The contradiction check for fresh items whose draft or policy asks for it."""
    from memory.services.contradictions import contradictions_check, wants_check

    for draft, outcome in written:
        if outcome.created and wants_check(access, draft.check_contradictions):
            outcome.contradictions = contradictions_check(access=access, item=outcome.item)


# --- public services --------------------------------------------------------------


def memory_remember(
    *, access: MemoryAccess, draft: MemoryDraft, idempotency_key: str | None = None, via: str = "api"
) -> WriteOutcome:
    """Store one memory (or answer with its existing duplicate)."""
    request_hash = draft.fingerprint()
    if idempotency_key:
        # Fast path for a retry: no embedding, no lock.
        record = _idempotency_record(access, "remember", idempotency_key)
        if record is not None:
            return _replay_one(access, record, request_hash)
    prepared = _prepare(access, [draft])[0]
    if isinstance(prepared, ApiError):
        raise prepared
    with transaction.atomic():
        if idempotency_key:
            _advisory_lock("memory-idempotency", str(access.agent.pk), "remember", idempotency_key)
            record = _idempotency_record(access, "remember", idempotency_key)
            if record is not None:
                # A concurrent twin finished first: answer with its item.
                return _replay_one(access, record, request_hash)
        outcome = _store(access, [prepared], via)[0]
        _check_contradictions(access, [(draft, outcome)])
        if idempotency_key:
            _save_idempotency(
                access,
                "remember",
                idempotency_key,
                request_hash,
                201 if outcome.created else 200,
                {"item_id": str(outcome.item.pk), "deduplicated": outcome.deduplicated},
            )
    return outcome


def _replay_one(access: MemoryAccess, record: IdempotencyRecord, request_hash: str) -> WriteOutcome:
    _check_replay(record, request_hash)
    item = _item_by_id(access, record.result["item_id"])
    return WriteOutcome(
        item,
        created=record.status_code == 201,
        deduplicated=bool(record.result["deduplicated"]),
        replayed=True,
    )


def memory_remember_batch(
    *,
    access: MemoryAccess,
    drafts: list[MemoryDraft | ApiError],
    idempotency_key: str | None = None,
    via: str = "batch",
) -> list[BatchResult]:
    """Store up to 100 memories; an invalid or refused one gets its own error and the
    others are stored. Items arriving already invalid (parse errors) are passed in
    as their ApiError so the results keep the request's order."""
    if not 1 <= len(drafts) <= MAX_BATCH:
        raise _field_error("items", f"Send between 1 and {MAX_BATCH} items.")
    request_hash = hashlib.sha256(
        json.dumps(
            [d.fingerprint() if isinstance(d, MemoryDraft) else f"error:{d.message}" for d in drafts]
        ).encode()
    ).hexdigest()
    if idempotency_key:
        record = _idempotency_record(access, "batch", idempotency_key)
        if record is not None:
            return _replay_batch(access, record, request_hash)
    valid = [d for d in drafts if isinstance(d, MemoryDraft)]
    prepared_iter = iter(_prepare(access, valid))
    results: list[BatchResult] = []
    ready: list[tuple[int, _Prepared]] = []
    for index, draft in enumerate(drafts):
        if isinstance(draft, ApiError):
            results.append(BatchResult(index, error=draft))
            continue
        prepared = next(prepared_iter)
        if isinstance(prepared, ApiError):
            results.append(BatchResult(index, error=prepared))
        else:
            results.append(BatchResult(index))
            ready.append((index, prepared))
    with transaction.atomic():
        if idempotency_key:
            _advisory_lock("memory-idempotency", str(access.agent.pk), "batch", idempotency_key)
            record = _idempotency_record(access, "batch", idempotency_key)
            if record is not None:
                return _replay_batch(access, record, request_hash)
        outcomes = _store(access, [p for _, p in ready], via)
        for (index, _), outcome in zip(ready, outcomes, strict=True):
            results[index].outcome = outcome
        _check_contradictions(
            access, [(drafts[index], outcome) for (index, _), outcome in zip(ready, outcomes, strict=True)]
        )
        if idempotency_key:
            _save_idempotency(
                access,
                "batch",
                idempotency_key,
                request_hash,
                batch_status(results),
                {"results": [_batch_result_json(r) for r in results]},
            )
    return results


def memory_remember_split(
    *, access: MemoryAccess, draft: MemoryDraft, idempotency_key: str | None = None
) -> list[BatchResult]:
    """Store a paragraph as one fact per sentence: each sentence is its own item, all
    with the same provenance and a ``metadata.split`` naming the paragraph and position."""
    drafts: list[MemoryDraft | ApiError] = list(split_drafts(draft))
    return memory_remember_batch(access=access, drafts=drafts, idempotency_key=idempotency_key, via="split")


def split_drafts(draft: MemoryDraft) -> list[MemoryDraft]:
    """One draft per sentence of ``draft``, linked by ``metadata.split``."""
    from dataclasses import replace

    from memory.extraction.nlp import split_sentences

    text = _checked_content(draft.content)
    sentences = split_sentences(text)[:MAX_BATCH] or [text]
    paragraph = content_hash(text)
    return [
        replace(
            draft,
            content=sentence,
            metadata={**draft.metadata, "split": {"paragraph": paragraph, "index": i, "of": len(sentences)}},
        )
        for i, sentence in enumerate(sentences)
    ]


def batch_status(results: list[BatchResult]) -> int:
    return 201 if any(r.outcome is not None and r.outcome.created for r in results) else 200


def _batch_result_json(result: BatchResult) -> dict[str, Any]:
    if result.error is not None:
        return {
            "status": "error",
            "error": {
                "status": result.error.status_code,
                "code": result.error.code,
                "message": result.error.message,
                "details": result.error.details,
            },
        }
    assert result.outcome is not None
    return {"status": result.status, "item_id": str(result.outcome.item.pk)}


def _replay_batch(access: MemoryAccess, record: IdempotencyRecord, request_hash: str) -> list[BatchResult]:
    _check_replay(record, request_hash)
    stored = record.result["results"]
    ids = [r["item_id"] for r in stored if "item_id" in r]
    items = {str(item.pk): item for item in MemoryItem.objects.filter(pk__in=ids, tenant_id=access.tenant_id)}
    results = []
    for index, entry in enumerate(stored):
        if entry["status"] == "error":
            err = entry["error"]
            error = ApiError(err["message"], details=err["details"], code=err["code"])
            error.status_code = err["status"]
            results.append(BatchResult(index, error=error))
        elif entry["item_id"] in items:
            outcome = WriteOutcome(
                items[entry["item_id"]],
                created=entry["status"] == "created",
                deduplicated=entry["status"] == "deduplicated",
                replayed=True,
            )
            results.append(BatchResult(index, outcome=outcome))
        else:
            results.append(
                BatchResult(index, error=NotFound("This memory no longer exists.", code="memory_not_found"))
            )
    return results


def _modifiable(access: MemoryAccess, item_id: Any, *, lock: bool) -> MemoryItem:
    from governance.selectors import as_uuid

    pk = as_uuid(item_id)
    # The agent's own items in a writable scope, and (like every read) current and
    # not expired: an item GET cannot see cannot be changed or deleted by id either.
    own = MemoryItem.objects.current().filter(enforcement.modifiable_q(access))
    qs = own.filter(pk=pk) if pk else MemoryItem.objects.none()
    item = (qs.select_for_update() if lock else qs).first()
    if item is None:
        raise NotFound("Memory not found.", code="memory_not_found")
    return item


class MemoryHeld(Conflict):
    """The item is under legal hold; ``holds`` are the hold rows covering it."""

    code = "memory_legal_hold"

    def __init__(self, item: MemoryItem, holds: list[Any]) -> None:
        self.item = item
        self.holds = holds
        super().__init__(
            "This memory is under legal hold and cannot be changed or deleted.",
            details={"item_id": str(item.pk)},
        )


def _refuse_if_held(item: MemoryItem) -> None:
    holds = Holds(item.tenant_id)
    if holds.item_is_held(item):
        raise MemoryHeld(item, holds.covering_item(item))


def _audit_held(access: MemoryAccess, exc: MemoryHeld, operation: str) -> None:
    # After the refused transaction rolled back, so the record of the attempt stays.
    audit_blocked(
        tenant=access.agent.tenant,
        actor=access.actor,
        operation=operation,
        holds=exc.holds,
        count=1,
        flagged=int(exc.item.legal_hold),
        target=("memory.memoryitem", str(exc.item.pk)),
    )


def memory_update(*, access: MemoryAccess, item_id: Any, content: str) -> MemoryItem:
    """Replace an item's content: re-embedded, created_at kept, old and new text in history."""
    _modifiable(access, item_id, lock=False)  # 404 before the slow work
    text = _checked_content(content)
    findings, vectors = _analyse([text])
    finding, vector = findings[0], vectors[0]
    enforcement.check_personal_data(access, personal_data=finding.personal_data, types=finding.types)
    try:
        return _update_locked(access, item_id, text=text, finding=finding, vector=vector)
    except MemoryHeld as exc:
        _audit_held(access, exc, "update")
        raise


@transaction.atomic
def _update_locked(access: MemoryAccess, item_id: Any, *, text: str, finding: Any, vector: Any) -> MemoryItem:
    item = _modifiable(access, item_id, lock=True)
    _refuse_if_held(item)
    old = item.content
    if old == text:
        return item
    item.content = text
    item.content_hash = content_hash(text)
    item.embedding = vector
    item.personal_data = finding.personal_data
    item.personal_data_types = list(finding.types)
    # New text, new extraction: the derived graph is stale until the task reruns.
    item.extraction_status = MemoryItem.Extraction.PENDING
    item.extraction_error = ""
    item.save(
        update_fields=[
            "content", "content_hash", "embedding", "personal_data", "personal_data_types",
            "extraction_status", "extraction_error", "updated_at",
        ]
    )  # fmt: skip
    _history(access, item, MemoryHistory.Event.UPDATED, old=old, new=text).save()
    items_written([item.pk])
    return item


def memory_forget(*, access: MemoryAccess, item_id: Any) -> None:
    """Delete one item (refused while it is under legal hold)."""
    try:
        with transaction.atomic():
            item = _modifiable(access, item_id, lock=True)
            _refuse_if_held(item)
            _history(access, item, MemoryHistory.Event.DELETED, old=item.content).save()
            touched = entities_of([item.pk])
            item.delete()  # mentions and causal edges go with it (CASCADE)
            delete_orphan_entities(access.tenant_id, touched)
    except MemoryHeld as exc:
        _audit_held(access, exc, "delete")
        raise


@dataclass(frozen=True)
class PurgeReport:
    scope: str
    deleted: int
    unscoped: int
    kept_legal_hold: int
    session_messages_deleted: int


def memory_purge(
    *,
    access: MemoryAccess,
    scope: str,
    confirm: bool,
    team: str = "",
    project: str = "",
    session_id: str = "",
    user_id: str = "",
) -> PurgeReport:
    """Delete the agent's memories in one scope (optionally narrowed by keys).

    Needs ``confirm=True``. Items also visible in another scope lose this scope and
    stay; items under legal hold are kept untouched and counted.
    """
    if scope not in Scope.values:
        raise _field_error("scope", f"{scope!r} is not a valid scope.")
    if not confirm:
        raise InvalidInput(
            "Purging deletes memories for good; repeat the request with confirm=true.",
            code="confirmation_required",
            details={"fields": {"confirm": ["Must be true to purge."]}},
        )
    enforcement.check_write(access, scope=scope, team=team, project=project)
    targets = MemoryItem.objects.filter(enforcement.modifiable_q(access), scopes__contains=[scope])
    narrowing = {"team": team, "project": project, "session_id": session_id, "user_id": user_id}
    targets = targets.filter(**{key: value for key, value in narrowing.items() if value})
    with transaction.atomic():
        # Lock the rows first so a concurrent write to them waits for the purge.
        holds = Holds(access.tenant_id)
        rows = list(holds.annotate(targets.select_for_update()).values_list("pk", "held", "scopes"))
        kept = sum(1 for _, held, _ in rows if held)
        if kept:
            # Committed with the purge: the held rows stay, the attempt is on record.
            audit_blocked(
                tenant=access.agent.tenant,
                actor=access.actor,
                operation="purge",
                holds=holds.holds_by_id(
                    holds.covering(targets.filter(pk__in=[pk for pk, h, _ in rows if h]))
                ),
                count=kept,
                target=("governance.agent", str(access.agent.pk)),
            )
        only_here = [pk for pk, held, scopes in rows if not held and scopes == [scope]]
        elsewhere = [pk for pk, held, scopes in rows if not held and scopes != [scope]]
        _history_for(access, only_here, MemoryHistory.Event.PURGED, scope=scope, with_old=True)
        _history_for(access, elsewhere, MemoryHistory.Event.SCOPE_REMOVED, scope=scope, with_old=False)
        unscoped = MemoryItem.objects.filter(pk__in=elsewhere).update(
            scopes=Func(F("scopes"), Value(scope), function="array_remove"), updated_at=timezone.now()
        )
        # `scope` names the level an item was first written at; once that level is
        # purged, it names the first level the item still has.
        MemoryItem.objects.filter(pk__in=elsewhere, scope=scope).update(scope=RawSQL("scopes[1]", []))
        # The total also counts cascaded mentions and causal edges: report items only.
        touched = entities_of(only_here)
        _, per_model = MemoryItem.objects.filter(pk__in=only_here).delete()
        deleted = per_model.get(MemoryItem._meta.label, 0)
        delete_orphan_entities(access.tenant_id, touched)
        messages = 0
        if scope == Scope.SESSION:
            msg_q = Q(tenant_id=access.tenant_id, agent_id=access.agent.pk)
            if session_id:
                msg_q &= Q(session_id=session_id)
            if user_id:
                msg_q &= Q(user_id=user_id)
            messages, _ = holds.unheld(SessionMessage.objects.filter(msg_q)).delete()
    return PurgeReport(
        scope=scope,
        deleted=deleted,
        unscoped=unscoped,
        kept_legal_hold=kept,
        session_messages_deleted=messages,
    )


def _history_for(access: MemoryAccess, ids: list[Any], event: str, *, scope: str, with_old: bool) -> None:
    """One history row per affected item, written in SQL so contents never pass through Python."""
    if not ids:
        return
    old = "content" if with_old else "''"
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO memory_history (tenant_id, agent_id, item_id, event, actor_type, actor_id,
                                        old_content, new_content, details, created_at)
            SELECT tenant_id, agent_id, id, %s, %s, %s, {old}, '',
                   jsonb_build_object('scope', %s::text, 'user_id', user_id), now()
            FROM memory_item WHERE id = ANY(%s)
            """,  # noqa: S608 - {old} is one of two fixed fragments; values are parameters
            [event, access.actor.type, access.actor.id, scope, list(ids)],
        )


def memory_remember_routed(
    *, access: MemoryAccess, draft: MemoryDraft, trace_parent: str | None = None
) -> dict[str, Any] | None:
    """Hand a write to the engine the agent's policy sends memory to (Mem0 under the
    ``mem0`` and ``hybrid`` engines), after the same policy checks as a builtin write.
    None: the write stays builtin (a builtin policy, or session memory, which always does).
    Mem0 queues its adds: the answer then says ``queued`` with Mem0's event id."""
    from memory import engines

    plan = engines.plan_for(access)
    router = engines.router()
    if plan.memory_engine is None or router is None:
        return None
    if (draft.scope or access.policy.default_scope) == Scope.SESSION:
        return None
    checked = _validate(access, draft)
    finding = detect_personal_data([checked["content"]])[0]
    enforcement.check_personal_data(
        access, personal_data=finding.personal_data or draft.personal_data, types=finding.types
    )
    return router.remember(access, plan, draft, trace_parent=trace_parent)


@dataclass
class RoutedResult:
    """One write of a batch under a policy that sends memory elsewhere: handed to the
    engine (``engine``), kept builtin (session memory: ``outcome``) or refused."""

    index: int
    engine: dict[str, Any] | None = None
    outcome: WriteOutcome | None = None
    error: ApiError | None = None

    @property
    def status(self) -> str:
        if self.error is not None:
            return "error"
        if self.engine is not None:
            return str(self.engine["status"])
        assert self.outcome is not None
        return "deduplicated" if self.outcome.deduplicated else "created"


def memory_remember_batch_routed(
    *, access: MemoryAccess, drafts: list[MemoryDraft | ApiError], trace_parent: str | None = None
) -> list[RoutedResult] | None:
    """A batch (or a split paragraph) under a mem0 / hybrid policy: each write goes to
    Mem0 in order, session memory stays builtin, each gets its own result. None: the
    policy keeps memory builtin (use memory_remember_batch)."""
    from memory import engines

    if engines.plan_for(access).memory_engine is None or engines.router() is None:
        return None
    if not 1 <= len(drafts) <= MAX_BATCH:
        raise _field_error("items", f"Send between 1 and {MAX_BATCH} items.")
    results: list[RoutedResult] = []
    for index, draft in enumerate(drafts):
        if isinstance(draft, ApiError):
            results.append(RoutedResult(index, error=draft))
            continue
        try:
            routed = memory_remember_routed(access=access, draft=draft, trace_parent=trace_parent)
            if routed is None:
                results.append(
                    RoutedResult(index, outcome=memory_remember(access=access, draft=draft, via="batch"))
                )
            else:
                results.append(RoutedResult(index, engine=routed))
        except ApiError as exc:
            results.append(RoutedResult(index, error=exc))
    return results
