"""The extraction service: one item's text -> mentions of merged entities and causal
edges. Idempotent: a run replaces the item's mentions and edges in one transaction,
so running twice (at-least-once delivery) leaves the same rows."""

from __future__ import annotations

import logging
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


def extract_item(item_id: Any) -> bool:
    """Extract one item (False when it no longer exists). Raises on failure; the
    caller (the task) records the error and retries."""
    item = MemoryItem.objects.filter(pk=item_id).defer("embedding", "search_vector").first()
    if item is None:
        return False
    text = item.content
    doc = parse([text])[0]
    found = find_entities(text, doc)
    relations: list[tuple[str, Relation]] = extract_relations(text, doc)
    spans = [r.cause for _, r in relations] + [r.effect for _, r in relations]
    vectors = embed_texts([e.text for e in found] + spans) if (found or spans) else []
    entity_vectors = vectors[: len(found)]
    span_vectors = vectors[len(found) :]
    terms = span_terms(spans)
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
        for entity_found, vector in zip(found, entity_vectors, strict=True):
            entity = _entity_for(item.tenant_id, entity_found, vector, cache)
            mentions[(entity.pk, entity_found.start)] = Mention(
                tenant_id=item.tenant_id,
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
                tenant_id=item.tenant_id,
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
        link_edges(item.tenant_id, created)
        MemoryItem.objects.filter(pk=item_id).update(
            extraction_status=MemoryItem.Extraction.DONE, extraction_error=""
        )
        delete_orphan_entities(item.tenant_id, previous)
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
