"""Writes to the builtin memory: remember (one or a batch), update, forget, purge.

Each function is one state change over the write pipeline
(:mod:`memory.services.write`): it prepares (validates, enforces the policy, does
the slow personal-data detection and embedding) *before* opening a transaction,
then stores rows, history and idempotency bookkeeping in one transaction;
changes to existing items pass the guards (row lock, legal hold, the audit of a
refusal). Concurrent identical writes are serialized by transaction-scoped
advisory locks, so the same Idempotency-Key, or the same content under the same
scope keys, yields exactly one item.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Func, Q, Value
from django.db.models.expressions import RawSQL
from django.utils import timezone

from core.errors import (
    ApiError,
    ConfirmationRequired,
    IdempotencyKeyReused,
    MemoryNotFound,
    field_error,
)
from core.vocabulary import Scope
from memory import enforcement
from memory.enforcement import MemoryAccess
from memory.extraction.clauses import summaries
from memory.extraction.nlp import split_sentences
from memory.extraction.pipeline import delete_orphan_entities, entities_of
from memory.holds import Holds, audit_blocked
from memory.models import IdempotencyRecord, ItemSentence, MemoryHistory, MemoryItem, SessionMessage
from memory.services.contradictions import contradictions_check, wants_check
from memory.services.hooks import items_written
from memory.services.write import guards
from memory.services.write.drafts import MAX_BATCH, MAX_RETENTION_DAYS, MemoryDraft, Prepared, WriteOutcome
from memory.services.write.guards import MemoryHeld
from memory.services.write.history import history_row, history_rows_sql
from memory.services.write.prepare import analyse, checked_content, prepare, validate_draft
from memory.services.write.store import advisory_lock, sentence_rows, store
from memory.text import content_hash

__all__ = [
    "MAX_BATCH",
    "MAX_RETENTION_DAYS",
    "BatchResult",
    "MemoryDraft",
    "MemoryHeld",
    "PurgeReport",
    "WriteOutcome",
    "batch_status",
    "field_error",
    "memory_forget",
    "memory_purge",
    "memory_remember",
    "memory_remember_batch",
    "memory_remember_split",
    "memory_update",
    "split_drafts",
    "store_one",
    "validate_draft",
]


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


# --- idempotency ------------------------------------------------------------------


def _idempotency_record(access: MemoryAccess, endpoint: str, key: str) -> IdempotencyRecord | None:
    ttl = timedelta(hours=settings.FEDMEM_IDEMPOTENCY_TTL_HOURS)
    return IdempotencyRecord.objects.filter(
        agent_id=access.agent.pk, endpoint=endpoint, key=key, created_at__gt=timezone.now() - ttl
    ).first()


def _check_replay(record: IdempotencyRecord, request_hash: str) -> None:
    if record.request_hash != request_hash:
        raise IdempotencyKeyReused("This Idempotency-Key was already used with a different request body.")


def _item_by_id(access: MemoryAccess, item_id: Any) -> MemoryItem:
    item = MemoryItem.objects.filter(pk=item_id, tenant_id=access.tenant_id).first()
    if item is None:
        raise MemoryNotFound("The memory this Idempotency-Key created no longer exists.")
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


def _check_contradictions(access: MemoryAccess, written: list[tuple[Any, WriteOutcome]]) -> None:
    """The contradiction check for fresh items whose draft or policy asks for it."""
    for draft, outcome in written:
        if outcome.created and wants_check(access, draft.check_contradictions):
            outcome.contradictions = contradictions_check(access=access, item=outcome.item)


# --- public services --------------------------------------------------------------


def store_one(*, access: MemoryAccess, draft: MemoryDraft, prepared: Prepared, via: str) -> WriteOutcome:
    """Inside the caller's transaction: store one prepared draft, then the contradiction
    check its draft or the policy asks for (for writers that own their transaction)."""
    outcome = store(access, [prepared], via)[0]
    _check_contradictions(access, [(draft, outcome)])
    return outcome


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
    prepared = prepare(access, [draft])[0]
    if isinstance(prepared, ApiError):
        raise prepared
    with transaction.atomic():
        if idempotency_key:
            advisory_lock("memory-idempotency", str(access.agent.pk), "remember", idempotency_key)
            record = _idempotency_record(access, "remember", idempotency_key)
            if record is not None:
                # A concurrent twin finished first: answer with its item.
                return _replay_one(access, record, request_hash)
        outcome = store_one(access=access, draft=draft, prepared=prepared, via=via)
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
    drafts: Sequence[MemoryDraft | ApiError],
    idempotency_key: str | None = None,
    via: str = "batch",
) -> list[BatchResult]:
    """Store up to 100 memories; an invalid or refused one gets its own error and the
    others are stored. Items arriving already invalid (parse errors) are passed in
    as their ApiError so the results keep the request's order."""
    if not 1 <= len(drafts) <= MAX_BATCH:
        raise field_error("items", f"Send between 1 and {MAX_BATCH} items.")
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
    prepared_iter = iter(prepare(access, valid))
    results: list[BatchResult] = []
    ready: list[tuple[int, Prepared]] = []
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
            advisory_lock("memory-idempotency", str(access.agent.pk), "batch", idempotency_key)
            record = _idempotency_record(access, "batch", idempotency_key)
            if record is not None:
                return _replay_batch(access, record, request_hash)
        outcomes = store(access, [p for _, p in ready], via)
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
    text = checked_content(draft.content)
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
            results.append(BatchResult(index, error=MemoryNotFound("This memory no longer exists.")))
    return results


def memory_update(*, access: MemoryAccess, item_id: Any, content: str) -> MemoryItem:
    """Replace an item's content: re-embedded, created_at kept, old and new text in history."""
    began = timezone.now()
    guards.modifiable(access, item_id, lock=False)  # 404 before the slow work
    text = checked_content(content)
    findings, vectors, inputs, sentences = analyse([text])
    finding, vector = findings[0], vectors[0]
    clauses = summaries([text])[0]  # from the parse the detection just made
    enforcement.check_personal_data(access, personal_data=finding.personal_data, types=finding.types)
    with guards.modifying(access, item_id, "update", since=began) as item:
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
        item.clauses = clauses
        item.save(
            update_fields=[
                "content", "content_hash", "embedding", "personal_data", "personal_data_types",
                "extraction_status", "extraction_error", "clauses", "updated_at",
            ]
        )  # fmt: skip
        # The old text's sentences go; the new one's, if it has several, come.
        ItemSentence.objects.filter(item=item).delete()
        ItemSentence.objects.bulk_create(sentence_rows(item.pk, sentences[0]))
        history_row(access, item, MemoryHistory.Event.UPDATED, old=old, new=text).save()
        items_written([item.pk], inputs={str(item.pk): inputs[0]} if inputs[0] else None)
    return item


def memory_forget(*, access: MemoryAccess, item_id: Any) -> None:
    """Delete one item (refused while it is under legal hold)."""
    with guards.modifying(access, item_id, "delete") as item:
        history_row(access, item, MemoryHistory.Event.DELETED, old=item.content).save()
        touched = entities_of([item.pk])
        item.delete()  # mentions and causal edges go with it (CASCADE)
        delete_orphan_entities(access.tenant_id, touched)


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
        raise field_error("scope", f"{scope!r} is not a valid scope.")
    if not confirm:
        raise ConfirmationRequired(
            "Purging deletes memories for good; repeat the request with confirm=true.",
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
        history_rows_sql(access, only_here, MemoryHistory.Event.PURGED, scope=scope, with_old=True)
        history_rows_sql(access, elsewhere, MemoryHistory.Event.SCOPE_REMOVED, scope=scope, with_old=False)
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
