"""Backfill of graph extraction: enqueue the existing ``memory.extract_items`` task
for items written before extraction existed, left pending, or failed. Backfill of
sentence vectors for items written before them.

Safe to repeat: the task is idempotent (a run replaces an item's derived rows),
and each batch is published through the outbox only after its status reset commits.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from core.tasks import enqueue_on_commit
from memory.embeddings import embed_texts
from memory.models import ItemSentence, MemoryItem
from memory.services.write.drafts import Sentence
from memory.services.write.prepare import sentence_texts
from memory.services.write.store import sentence_rows

SELECTIONS = ("pending", "failed", "all")


def _skip_held(items: Any) -> Any:
    from governance.models import Tenant
    from memory.holds import Holds, audit_blocked

    keep = items.none()
    for tenant_id in items.order_by().values_list("tenant_id", flat=True).distinct():
        holds = Holds(tenant_id)
        mine = items.filter(tenant_id=tenant_id)
        held = holds.held(mine)
        count = held.count()
        if count:
            audit_blocked(
                tenant=Tenant.objects.get(pk=tenant_id),
                actor=None,
                operation="re_extraction",
                holds=holds.holds_by_id(holds.covering(held)),
                count=count,
                flagged=held.filter(legal_hold=True).count(),
            )
        keep |= items.filter(pk__in=holds.unheld(mine).values("pk"))
    return keep


def extraction_backfill(*, which: str, agent_id: Any = None, tenant_id: Any = None, batch: int = 100) -> int:
    """Enqueue extraction for the selected items, ``batch`` ids per task; returns
    how many items were enqueued. ``failed`` and ``all`` reset the status to
    pending (with the error cleared) so progress shows on the items."""
    if which not in SELECTIONS:
        raise ValueError(f"which must be one of {', '.join(SELECTIONS)}")
    items = MemoryItem.objects.all()
    if which != "all":
        items = items.filter(extraction_status=which)
    if agent_id is not None:
        items = items.filter(agent_id=agent_id)
    if tenant_id is not None:
        items = items.filter(tenant_id=tenant_id)
    if which != "pending":
        # Re-extracting replaces the derived graph and resets the row: held items keep theirs.
        items = _skip_held(items)
    ids = [str(pk) for pk in items.order_by("created_at", "id").values_list("pk", flat=True)]
    for start in range(0, len(ids), batch):
        chunk = ids[start : start + batch]
        with transaction.atomic():
            if which != "pending":
                MemoryItem.objects.filter(pk__in=chunk).update(
                    extraction_status=MemoryItem.Extraction.PENDING, extraction_error=""
                )
            enqueue_on_commit("memory.extract_items", chunk)
    return len(ids)


def extraction_sweep(*, stale_after: timedelta, batch: int = 100, limit: int = 5000) -> int:
    """Re-queue items left ``pending`` for longer than ``stale_after``; returns how many.

    Extraction is queued after every write, but a message can be lost: a worker
    stopped while a retry waited for its countdown (the filesystem broker keeps
    no unacknowledged messages), a broker wiped by a restart, a task that failed
    before it could record the failure (the database refusing connections). The
    bound must exceed the retries' backoff (about a minute), so an item still
    being retried is left alone. Each item is re-queued at most once per bound,
    and the task skips items that settled meanwhile, so an overlapping or repeated
    sweep costs a query, not a second extraction. At most ``limit`` per sweep.
    """
    now = timezone.now()
    cutoff = now - stale_after
    stale = MemoryItem.objects.filter(extraction_status=MemoryItem.Extraction.PENDING).filter(
        Q(extraction_requeued_at__lt=cutoff) | Q(extraction_requeued_at__isnull=True, updated_at__lt=cutoff)
    )
    ids = [str(pk) for pk in stale.order_by("updated_at").values_list("pk", flat=True)[:limit]]
    for start in range(0, len(ids), batch):
        chunk = ids[start : start + batch]
        with transaction.atomic():
            MemoryItem.objects.filter(pk__in=chunk).update(extraction_requeued_at=now)
            enqueue_on_commit("memory.extract_items", chunk, only_pending=True)
    return len(ids)


def sentence_backfill(
    *,
    agent_id: Any = None,
    tenant_id: Any = None,
    batch: int = 256,
    progress: Callable[[int, int, int], None] | None = None,
) -> tuple[int, int]:
    """Sentence vectors (:class:`memory.models.ItemSentence`) for the items of several
    sentences written before recall read them; returns (items, sentences) written.

    Safe to repeat and to run beside writes: an item that has its rows is skipped,
    each batch is embedded outside any transaction, and its rows are stored only
    for items still holding the content that was embedded (an update meanwhile
    writes its own). The vectors are derived from the content, like the item's
    own embedding, and nothing of the item changes: held items get them too.
    ``progress`` hears (items read, items written, sentences written) after each batch."""
    items = MemoryItem.objects.filter(~Exists(ItemSentence.objects.filter(item_id=OuterRef("pk"))))
    if agent_id is not None:
        items = items.filter(agent_id=agent_id)
    if tenant_id is not None:
        items = items.filter(tenant_id=tenant_id)
    rows = items.order_by("pk").values_list("pk", "content", "content_hash")
    read = written = sentences = 0
    last = None
    while True:
        page = list((rows.filter(pk__gt=last) if last is not None else rows)[:batch])
        if not page:
            return written, sentences
        last = page[-1][0]
        read += len(page)
        work = [(pk, digest, found) for pk, content, digest in page if (found := sentence_texts(content))]
        if not work:
            if progress is not None:
                progress(read, written, sentences)
            continue
        vectors = iter(embed_texts([piece for _, _, found in work for _, _, piece in found]))
        made = {}
        for pk, _, found in work:
            made[pk] = sentence_rows(pk, [Sentence(a, b, next(vectors)) for a, b, _ in found])
        with transaction.atomic():
            unchanged = set(
                MemoryItem.objects.select_for_update()
                .filter(pk__in=[pk for pk, digest, _ in work], content_hash__in=[d for _, d, _ in work])
                .filter(~Exists(ItemSentence.objects.filter(item_id=OuterRef("pk"))))
                .values_list("pk", "content_hash")
            )
            keep = [pk for pk, digest, _ in work if (pk, digest) in unchanged]
            ItemSentence.objects.bulk_create([row for pk in keep for row in made[pk]])
        written += len(keep)
        sentences += sum(len(made[pk]) for pk in keep)
        if progress is not None:
            progress(read, written, sentences)
