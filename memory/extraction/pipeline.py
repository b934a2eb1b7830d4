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
        locked = MemoryItem.objects.select_for_update().filter(pk=item_id).only("id", "content").first()
        if locked is None:
            return False
        if locked.content != text:
            # Updated meanwhile: the update enqueued its own extraction.
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


def delete_orphan_entities(tenant_id: Any, entity_ids: Any) -> int:
    """Of ``entity_ids``, those no item mentions any more. An entity name can be
    personal data (a person's name): it must not outlive the last memory that said
    it. Callers pass the entities their change touched, so the check stays small."""
    ids = list(entity_ids)
    if not ids:
        return 0
    deleted, _ = Entity.objects.filter(tenant_id=tenant_id, pk__in=ids, mentions__isnull=True).delete()
    return deleted


def entities_of(item_ids: Any) -> list[Any]:
    return list(
        Mention.objects.filter(item_id__in=list(item_ids)).values_list("entity_id", flat=True).distinct()
    )


def mark_extraction(item_id: Any, *, status: str, error: str) -> None:
    MemoryItem.objects.filter(pk=item_id).update(extraction_status=status, extraction_error=error[:2000])
