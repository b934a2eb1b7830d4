"""Step two of a write: insert or deduplicate prepared writes, inside the caller's
transaction. Concurrent identical writes are serialized by transaction-scoped
advisory locks, so the same content under the same scope keys yields one item."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone
from pgvector.django import CosineDistance

from core.statements import fetch
from memory.enforcement import MemoryAccess, current_q
from memory.models import ItemSentence, MemoryHistory, MemoryItem
from memory.retrieval import lexical
from memory.services.hooks import items_written
from memory.services.write import guards
from memory.services.write.drafts import Prepared, Sentence, WriteOutcome
from memory.services.write.history import history_row, jsonable
from memory.services.write.tx import in_transaction


class NotInTransaction(AssertionError):
    """store() was called outside a transaction (a programming error)."""


def advisory_lock(*parts: str) -> None:
    """Block until no other transaction holds the same lock; released at commit/rollback."""
    advisory_locks(["\x1f".join(parts)])


def advisory_locks(names: list[str]) -> None:
    """Take several transaction-scoped locks in one statement, always in hash order."""
    if not names:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_advisory_xact_lock(h)) FROM "
            "(SELECT DISTINCT hashtextextended(n, 0) AS h FROM unnest(%s::text[]) AS n ORDER BY h) AS locks",
            [names],
        )


def _provenance(access: MemoryAccess, via: str, source: str, dataset: str = "") -> dict[str, Any]:
    data = {"writer": access.actor.as_json(), "via": via, "source": source}
    if dataset:
        # Legal holds on a dataset find its items by this key (memory.holds).
        data["dataset"] = dataset
    return data


def _exact_duplicates(access: MemoryAccess, prepared: list[Prepared]) -> dict[tuple[str, ...], MemoryItem]:
    """Existing current items with the same scope keys and normalized content, for a
    whole batch in one query. Held to the same filters as reads: expired,
    superseded and foreign items never match."""
    if not prepared:
        return {}
    wanted = {p.dedup_keys(access) for p in prepared}
    condition = (
        Q(
            tenant_id=access.tenant_id,
            agent_id=access.agent.pk,
            content_hash__any=sorted({p.content_hash for p in prepared}),
        )
        & current_q()
    )
    # The keys by a statement compiled once (core.statements): compiling the ORM query
    # on every write was about a third of a single remember's Python time. The rows
    # themselves are read only for the keys found, which most writes have none of.
    first: dict[tuple[str, ...], Any] = {}
    for pk, *keys in fetch(("exact duplicates",), condition, _duplicate_keys):
        key = tuple("" if v is None else str(v) for v in keys)
        if key in wanted and key not in first:
            first[key] = pk
    if not first:
        return {}
    items = MemoryItem.objects.defer("embedding", "search_vector").in_bulk(list(first.values()))
    return {key: items[pk] for key, pk in first.items() if pk in items}


# The columns of Prepared.dedup_keys, in its order.
_KEY_COLUMNS = (
    "tenant_id", "agent_id", "user_id", "session_id", "team", "project", "content_hash", "dataset_id",
)  # fmt: skip


def _duplicate_keys(condition: Q) -> Any:
    # The oldest first: the one a duplicate merges into.
    return MemoryItem.objects.filter(condition).order_by("created_at").values_list("pk", *_KEY_COLUMNS)


def _near_duplicate(access: MemoryAccess, prepared: Prepared, embedding: Any) -> MemoryItem | None:
    """When enabled, the closest current item with the same scope keys whose cosine
    similarity reaches FEDMEM_DEDUP_NEAR_THRESHOLD."""
    threshold = settings.FEDMEM_DEDUP_NEAR_THRESHOLD
    if threshold <= 0:
        return None
    # filter(dataset_id=None) is IS NULL too; spelled out for the type checker.
    pk = prepared.dataset_pk
    same_dataset = Q(dataset_id__isnull=True) if pk is None else Q(dataset_id=pk)
    return (
        MemoryItem.objects.current()
        .filter(
            tenant_id=access.tenant_id,
            agent_id=access.agent.pk,
            user_id=prepared.user_id,
            session_id=prepared.session_id,
            team=prepared.team,
            project=prepared.project,
        )
        .filter(same_dataset)
        .annotate(distance=CosineDistance("embedding", embedding))
        .filter(distance__lte=1 - threshold)
        .defer("embedding", "search_vector")
        .order_by("distance")
        .first()
    )


def _merge_duplicate(
    access: MemoryAccess, existing: MemoryItem, prepared: Prepared, history: list[MemoryHistory]
) -> MemoryItem:
    """Widen the existing item instead of storing a second copy: scopes are unioned,
    the stricter classification and any legal hold win, the longer retention wins.
    A held item is never widened (the guards ask memory.holds): the duplicate is
    answered with it unchanged, and the merge it was spared is audited."""
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
    if guards.held_unchanged(access, existing, "dedup_merge"):
        # Held data stays byte-identical; the duplicate is still answered with it.
        return existing
    before = {key: jsonable(getattr(existing, key)) for key in changes}
    for key, value in changes.items():
        setattr(existing, key, value)
    existing.save(update_fields=[*changes, "updated_at"])
    history.append(
        history_row(
            access,
            existing,
            MemoryHistory.Event.SCOPE_ADDED if "scopes" in changes else MemoryHistory.Event.DEDUPLICATED,
            details={"before": before, "after": {key: jsonable(v) for key, v in changes.items()}},
        )
    )
    return existing


def sentence_rows(item_id: Any, sentences: Iterable[Sentence]) -> list[ItemSentence]:
    """The stored rows of an item's sentences, in order."""
    return [
        ItemSentence(item_id=item_id, position=n, start=found.start, end=found.end, embedding=found.embedding)
        for n, found in enumerate(sentences)
    ]


def store(access: MemoryAccess, prepared: list[Prepared], via: str) -> list[WriteOutcome]:
    """Insert or deduplicate each prepared write; must run inside a transaction."""
    if not in_transaction():
        raise NotInTransaction("store() runs inside the write's transaction")
    # Lock every content key (one statement, a fixed order, so two batches sharing
    # items cannot deadlock); the lock makes "check for a duplicate, then insert" atomic.
    advisory_locks(["\x1f".join(("memory-dedup", *p.dedup_keys(access))) for p in prepared])
    outcomes: list[WriteOutcome] = []
    fresh: list[MemoryItem] = []
    sentences: list[ItemSentence] = []
    seen: dict[tuple[str, ...], MemoryItem] = _exact_duplicates(access, prepared)
    history: list[MemoryHistory] = []
    handed: dict[str, Any] = {}
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
            # One microsecond apart in request order: a batch (a transcript, a
            # session's turns) keeps its order, which session context reads.
            created_at=now + timedelta(microseconds=len(fresh)),
            valid_from=now + timedelta(microseconds=len(fresh)),
            retention_until=p.retention_until,
            legal_hold=p.legal_hold,
            occurred_at=p.occurred_at,
            clauses=p.clauses,
        )
        fresh.append(item)
        sentences.extend(sentence_rows(item.pk, p.sentences))
        if p.extraction_inputs is not None:
            handed[str(item.pk)] = p.extraction_inputs
        seen[key] = item
        outcomes.append(WriteOutcome(item, created=True, deduplicated=False))
    if fresh:
        MemoryItem.objects.bulk_create(fresh)
        ItemSentence.objects.bulk_create(sentences)
        history.extend(
            history_row(access, item, MemoryHistory.Event.CREATED, new=item.content) for item in fresh
        )
    if history:
        MemoryHistory.objects.bulk_create(history)
    if fresh:
        items_written([item.pk for item in fresh], inputs=handed)
        # Counted once they are visible: a reader that re-reads its statistics on the
        # count must find the items there. Robust: the count only hastens a refresh of
        # the statistics (STATS_TTL bounds it anyway), and a counters backend that fails
        # must neither turn a stored write into an error nor stop the hooks after it.
        # (A named function: a robust hook's failure is logged by its __qualname__.)
        tenant_id, written = access.tenant_id, len(fresh)

        def count_written() -> None:
            lexical.note_written(tenant_id, written)

        transaction.on_commit(count_written, robust=True)
    return outcomes
