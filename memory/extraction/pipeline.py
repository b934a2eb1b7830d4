"""The extraction service: one item's text -> mentions of merged entities and causal
edges. Idempotent: a run replaces the item's mentions and edges in one transaction,
so running twice (at-least-once delivery) leaves the same rows."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from pgvector.django import CosineDistance

from memory.embeddings import embed_texts
from memory.extraction.causal import Relation, extract_relations
from memory.extraction.entities import FoundEntity, find_entities
from memory.extraction.links import link_edges
from memory.extraction.nlp import parse
from memory.models import CausalEdge, Entity, MemoryItem, Mention

logger = logging.getLogger(__name__)

# Items whose texts go through the models together: big enough to fill a forward
# pass, small enough that a task's slice stays short on a busy machine.
EXTRACT_BATCH = 16


def span_terms(texts: list[str]) -> list[list[str]]:
    """Each span's content lemmas, lowercased and sorted: what normalized overlap compares."""
    out = []
    for doc in parse(texts) if texts else []:
        terms = {
            t.lemma_.lower()
            for t in doc
            if not (t.is_stop or t.is_punct or t.is_space) and any(ch.isalnum() for ch in t.text)
        }
        out.append(sorted(term[:64] for term in terms))
    return out


def _entity_for(tenant_id: Any, found: FoundEntity, vector: Any, cache: dict[str, Entity]) -> Entity:
    """The tenant's entity for ``found``: same normalized name, else the nearest by
    embedding above FEDMEM_ENTITY_MERGE_THRESHOLD (a simple alias), else a new one."""
    if found.normalized in cache:
        return cache[found.normalized]
    entity = Entity.objects.filter(tenant_id=tenant_id, normalized=found.normalized).first()
    if entity is None:
        threshold = settings.FEDMEM_ENTITY_MERGE_THRESHOLD
        entity = (
            Entity.objects.filter(tenant_id=tenant_id)
            .annotate(distance=CosineDistance("embedding", vector))
            .filter(distance__lte=1 - threshold)
            .order_by("distance")
            .first()
            if threshold < 1
            else None
        )
        if entity is not None and found.normalized not in entity.aliases:
            entity.aliases = [*entity.aliases, found.normalized]
            entity.save(update_fields=["aliases"])
    if entity is None:
        # ignore_conflicts: a concurrent extraction may create the same name first.
        Entity.objects.bulk_create(
            [
                Entity(
                    tenant_id=tenant_id,
                    name=found.text[:200],
                    normalized=found.normalized,
                    label=found.label,
                    embedding=vector,
                )
            ],
            ignore_conflicts=True,
        )
        entity = Entity.objects.get(tenant_id=tenant_id, normalized=found.normalized)
    cache[found.normalized] = entity
    return entity


@dataclass
class Prepared:
    """What the models say about one item's text, computed before any lock is taken."""

    item_id: Any
    tenant_id: Any
    text: str
    found: list[FoundEntity]
    relations: list[tuple[str, Relation]]
    entity_vectors: Any
    span_vectors: Any
    terms: list[list[str]]


def prepare(items: list[MemoryItem]) -> list[Prepared]:
    """Parse, find and embed for many items at once: one ``nlp.pipe`` over their
    texts, one over their cause/effect spans, one batched embedding of every
    entity and span. The result is the same as item by item (tested)."""
    texts = [item.content for item in items]
    docs = parse(texts)
    founds = [find_entities(text, doc) for text, doc in zip(texts, docs, strict=True)]
    relations = [extract_relations(text, doc) for text, doc in zip(texts, docs, strict=True)]
    spans = [[r.cause for _, r in rels] + [r.effect for _, r in rels] for rels in relations]
    all_spans = [span for item_spans in spans for span in item_spans]
    all_terms = span_terms(all_spans)
    wanted = [e.text for found in founds for e in found] + all_spans
    vectors = embed_texts(wanted) if wanted else []
    out = []
    entity_at, span_at = 0, 0
    first_span = len(wanted) - len(all_spans)  # spans follow every entity text
    for item, text, found, rels, item_spans in zip(items, texts, founds, relations, spans, strict=True):
        out.append(
            Prepared(
                item_id=item.pk,
                tenant_id=item.tenant_id,
                text=text,
                found=found,
                relations=rels,
                entity_vectors=vectors[entity_at : entity_at + len(found)],
                span_vectors=vectors[first_span + span_at : first_span + span_at + len(item_spans)],
                terms=all_terms[span_at : span_at + len(item_spans)],
            )
        )
        entity_at += len(found)
        span_at += len(item_spans)
    return out


def load_items(item_ids: list[Any]) -> list[MemoryItem]:
    """The items of ``item_ids`` that still exist, in the order asked."""
    rows = MemoryItem.objects.filter(pk__in=list(item_ids)).defer("embedding", "search_vector").in_bulk()
    return [rows[pk] for pk in (_as_pk(i) for i in item_ids) if pk in rows]


def _as_pk(item_id: Any) -> Any:
    field = MemoryItem._meta.pk
    assert field is not None
    return field.to_python(item_id)


def extract_item(item_id: Any) -> bool:
    """Extract one item (False when it no longer exists). Raises on failure; the
    caller (the task) records the error and retries."""
    items = load_items([item_id])
    if not items:
        return False
    return store(prepare(items)[0])


def store(prepared: Prepared) -> bool:
    """Replace one item's mentions and edges with ``prepared`` in one transaction
    (False when the item is gone)."""
    item_id, text, found, relations = prepared.item_id, prepared.text, prepared.found, prepared.relations
    tenant_id, terms, span_vectors = prepared.tenant_id, prepared.terms, prepared.span_vectors
    with transaction.atomic():
        # The row lock serializes two deliveries of the same task.
        locked = (
            MemoryItem.objects.select_for_update()
            .filter(pk=item_id)
            .only("id", "tenant_id", "content", "extraction_status", "legal_hold")
            .first()
        )
        if locked is None:
            return False
        if locked.content != text:
            # Updated meanwhile: the update enqueued its own extraction.
            return True
        if locked.extraction_status == MemoryItem.Extraction.DONE and _refused_under_hold(locked):
            return True
        previous = entities_of([item_id])
        Mention.objects.filter(item_id=item_id).delete()
        CausalEdge.objects.filter(item_id=item_id).delete()
        cache: dict[str, Entity] = {}
        mentions = {}
        for entity_found, vector in zip(found, prepared.entity_vectors, strict=True):
            entity = _entity_for(tenant_id, entity_found, vector, cache)
            mentions[(entity.pk, entity_found.start)] = Mention(
                tenant_id=tenant_id,
                item_id=item_id,
                entity=entity,
                text=entity_found.text[:200],
                start=entity_found.start,
                end=entity_found.end,
            )
        Mention.objects.bulk_create(mentions.values())
        n = len(relations)
        created = CausalEdge.objects.bulk_create(
            CausalEdge(
                tenant_id=tenant_id,
                item_id=item_id,
                cause=rel.cause,
                effect=rel.effect,
                cue=rel.cue,
                extractor=name,
                cause_terms=terms[i],
                effect_terms=terms[n + i],
                cause_embedding=span_vectors[i],
                effect_embedding=span_vectors[n + i],
            )
            for i, (name, rel) in enumerate(relations)
        )
        # The old edges' links went with them (CASCADE); the new ones link now.
        link_edges(tenant_id, created)
        MemoryItem.objects.filter(pk=item_id).update(
            extraction_status=MemoryItem.Extraction.DONE, extraction_error=""
        )
        delete_orphan_entities(tenant_id, previous)
    return True


def _refused_under_hold(item: MemoryItem) -> bool:
    """Re-extraction replaces an item's mentions and causal edges: a held item keeps
    the graph it had (memory.holds decides), and the attempt is audited."""
    from governance.models import Tenant
    from memory.holds import Holds, audit_blocked

    holds = Holds(item.tenant_id)
    if not holds.item_is_held(item):
        return False
    audit_blocked(
        tenant=Tenant.objects.get(pk=item.tenant_id),
        actor=None,
        operation="re_extraction",
        holds=holds.covering_item(item),
        count=1,
        flagged=int(item.legal_hold),
        target=("memory.memoryitem", str(item.pk)),
    )
    return True


def delete_orphan_entities(tenant_id: Any, entity_ids: Any) -> int:
    """Settle ``entity_ids`` after items were deleted: those no item mentions any more
    go, and the others are re-derived from the mentions that remain.

    An entity name can be personal data (a person's name): it must not outlive the
    last memory that said it. That holds for the spellings too: an entity keeps only
    the aliases its remaining mentions spell, and an entity whose own name came from
    a deleted mention takes its name from a remaining one (or folds into the entity
    that already has that name). Callers pass the entities their change touched, so
    the work stays small. Returns how many entities were deleted."""
    ids = list(entity_ids)
    if not ids:
        return 0
    deleted, _ = Entity.objects.filter(tenant_id=tenant_id, pk__in=ids, mentions__isnull=True).delete()
    _rederive_entities(tenant_id, ids)
    return deleted


def _rederive_entities(tenant_id: Any, ids: list[Any]) -> None:
    from memory.extraction.entities import normalize

    forms: dict[Any, list[tuple[str, str]]] = {}
    remaining = (
        Mention.objects.filter(tenant_id=tenant_id, entity_id__in=ids)
        .order_by("item__created_at", "item_id", "start")
        .values_list("entity_id", "text")
    )
    for entity_id, text in remaining:
        norm = normalize(text)
        if norm and all(norm != seen for _, seen in forms.get(entity_id, [])):
            forms.setdefault(entity_id, []).append((text, norm))
    for entity in Entity.objects.filter(tenant_id=tenant_id, pk__in=list(forms)).defer("embedding"):
        spelled = forms[entity.pk]
        norms = [norm for _, norm in spelled]
        if entity.normalized in norms:
            aliases = [norm for norm in norms if norm != entity.normalized]
            if aliases != list(entity.aliases):
                Entity.objects.filter(pk=entity.pk).update(aliases=aliases)
            continue
        # The entity's own name was spelled only by deleted mentions.
        name, norm = spelled[0]
        aliases = [n for n in norms if n != norm]
        other = Entity.objects.filter(tenant_id=tenant_id, normalized=norm).exclude(pk=entity.pk).first()
        if other is not None:
            _fold_into(entity, other, aliases)
            continue
        Entity.objects.filter(pk=entity.pk).update(
            name=name[:200], normalized=norm, aliases=aliases, embedding=embed_texts([name[:200]])[0]
        )


def _fold_into(entity: Entity, other: Entity, aliases: list[str]) -> None:
    """Move ``entity``'s mentions to ``other`` (same name now) and delete it."""
    taken = set(Mention.objects.filter(entity=other).values_list("item_id", "start"))
    moving = list(Mention.objects.filter(entity=entity).values_list("pk", "item_id", "start"))
    clash = [pk for pk, item_id, start in moving if (item_id, start) in taken]
    Mention.objects.filter(pk__in=clash).delete()
    Mention.objects.filter(entity=entity).update(entity=other)
    merged = [*other.aliases, *(a for a in aliases if a != other.normalized and a not in other.aliases)]
    Entity.objects.filter(pk=other.pk).update(aliases=merged)
    entity.delete()


def entities_of(item_ids: Any) -> list[Any]:
    return list(
        Mention.objects.filter(item_id__in=list(item_ids)).values_list("entity_id", flat=True).distinct()
    )


def mark_extraction(item_id: Any, *, status: str, error: str) -> None:
    MemoryItem.objects.filter(pk=item_id).update(extraction_status=status, extraction_error=error[:2000])
