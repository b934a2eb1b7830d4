"""The extraction service: one item's text -> mentions of merged entities and causal
edges. Idempotent: a run replaces the item's mentions and edges in one transaction,
so running twice (at-least-once delivery) leaves the same rows."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from pgvector.django import CosineDistance

from memory.embeddings import embed_texts
from memory.extraction.causal import Relation, extract_relations
from memory.extraction.clauses import summarize
from memory.extraction.entities import FoundEntity, find_entities
from memory.extraction.handoff import read_inputs
from memory.extraction.links import link_edges
from memory.extraction.nlp import lemma_docs, parse
from memory.models import CausalEdge, Entity, MemoryItem, Mention
from memory.retrieval.specificity import may_be_one

logger = logging.getLogger(__name__)

# Items whose texts go through the models together: big enough to fill a forward
# pass, small enough that a task's slice stays short on a busy machine.
EXTRACT_BATCH = 16
# Existing entities above the merge threshold looked at for an alias, nearest first.
MERGE_CANDIDATES = 5


def span_terms(texts: list[str], languages: list[str] | None = None) -> list[list[str]]:
    """Each span's content lemmas, lowercased and sorted: what normalized overlap compares.
    Lemmas need no entity recognition, so the spans are parsed without it. A span of
    a language the parser does not read (``languages``: each span's text-search
    configuration) gets its stems without that language's stopwords instead
    (:func:`memory.extraction.cues.span_terms`)."""
    from memory.extraction import cues

    foreign = {i: lang for i, lang in enumerate(languages or []) if lang in cues.languages()}
    english = [text for i, text in enumerate(texts) if i not in foreign]
    lemmas = iter(lemma_docs(english) if english else [])
    out = []
    for i, text in enumerate(texts):
        if i in foreign:
            out.append(cues.span_terms(text, foreign[i]))
            continue
        doc = next(lemmas)
        terms = {
            t.lemma_.lower()
            for t in doc
            if not (t.is_stop or t.is_punct or t.is_space) and any(ch.isalnum() for ch in t.text)
        }
        out.append(sorted(term[:64] for term in terms))
    return out


def _entity_for(tenant_id: Any, found: FoundEntity, vector: Any, cache: dict[str, Entity]) -> Entity:
    """The tenant's entity for ``found``: same normalized name, else the nearest by
    embedding above FEDMEM_ENTITY_MERGE_THRESHOLD (a simple alias), else a new one.
    ``cache`` holds every entity the batch names that existed when its transaction
    began (one query, :func:`store_many`), so a miss is a name new to the tenant.
    ``vector`` is None when the name was known at prepare time (then it is not needed,
    unless the entity went meanwhile: embedded here, a rare race)."""
    if found.normalized in cache:
        return cache[found.normalized]
    if vector is None:
        vector = embed_texts([found.text])[0]
    threshold = settings.FEDMEM_ENTITY_MERGE_THRESHOLD
    # The nearest few above the threshold, and of those the nearest whose identifiers
    # agree: "Flight BA118" is not an alias of "Flight BA117" (cosine 0.96).
    near = (
        Entity.objects.filter(tenant_id=tenant_id)
        .annotate(distance=CosineDistance("embedding", vector))
        .filter(distance__lte=1 - threshold)
        .order_by("distance")[:MERGE_CANDIDATES]
        if threshold < 1
        else []
    )
    entity = next((e for e in near if may_be_one(e.normalized, found.normalized)), None)
    # A concurrent extraction may have created this very name since the batch's
    # lookup: then it is the entity, not an alias of itself.
    if (
        entity is not None
        and entity.normalized != found.normalized
        and found.normalized not in entity.aliases
    ):
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
    # The chain walk's reading of the parse (memory.extraction.clauses); None when the
    # text was not parsed here (the write handed its inputs and stored its own).
    clauses: dict[str, Any] | None = None


# Embeddings of entity and span texts this process computed lately. Facts of one
# tenant name the same services, hosts and symptoms again and again; a text's vector
# does not depend on the batch it was computed in (to float rounding, tested).
VECTOR_CACHE_SIZE = 8192
_vectors: OrderedDict[str, Any] = OrderedDict()
_vectors_lock = threading.Lock()


def cached_embeddings(texts: list[str]) -> list[Any]:
    """One vector per text: from the cache, the rest in one batch."""
    with _vectors_lock:
        have = {t: _vectors[t] for t in dict.fromkeys(texts) if t in _vectors}
        for text in have:
            _vectors.move_to_end(text)
    missing = [t for t in dict.fromkeys(texts) if t not in have]
    if missing:
        made = dict(zip(missing, embed_texts(missing), strict=True))
        with _vectors_lock:
            for text, vector in made.items():
                _vectors[text] = vector
            while len(_vectors) > VECTOR_CACHE_SIZE:
                _vectors.popitem(last=False)
        have.update(made)
    return [have[t] for t in texts]


def known_entities(pairs: set[tuple[Any, str]]) -> set[tuple[Any, str]]:
    """Which (tenant, normalized name) pairs already have an entity: one query."""
    if not pairs:
        return set()
    tenants = {tenant for tenant, _ in pairs}
    names = {name for _, name in pairs}
    rows = Entity.objects.filter(tenant_id__in=tenants, normalized__in=names).values_list(
        "tenant_id", "normalized"
    )
    return {row for row in rows if row in pairs}


def prepare(items: list[MemoryItem], inputs: dict[str, Any] | None = None) -> list[Prepared]:
    """Parse, find and embed for many items at once: one ``nlp.pipe`` over their
    texts, one over their cause/effect spans, one batched embedding of the entities
    and spans not seen before. ``inputs`` (item id -> what the write read from its
    own parse, :mod:`memory.extraction.handoff`) spares the texts' parse. The result
    is the same as item by item, and with or without ``inputs`` (tested)."""
    texts = [item.content for item in items]
    handed = [
        read_inputs(text, (inputs or {}).get(str(item.pk))) for item, text in zip(items, texts, strict=True)
    ]
    to_parse = [text for text, got in zip(texts, handed, strict=True) if got is None]
    parsed = iter(parse(to_parse) if to_parse else [])
    founds, relations, clauses = [], [], []
    for text, got in zip(texts, handed, strict=True):
        summary = None
        if got is None:
            doc = next(parsed)
            got = (find_entities(text, doc), extract_relations(text, doc))
            summary = summarize(text, doc)
        founds.append(got[0])
        relations.append(got[1])
        clauses.append(summary)
    spans = [[r.cause for _, r in rels] + [r.effect for _, r in rels] for rels in relations]
    all_spans = [span for item_spans in spans for span in item_spans]
    # A span is read in its item's language (stored with the item, detected from its
    # text): a short span alone is too short to tell.
    span_languages = [
        item.text_language for item, item_spans in zip(items, spans, strict=True) for _ in item_spans
    ]
    all_terms = span_terms(all_spans, span_languages)
    # An entity whose name the tenant already has needs no vector: store() finds it
    # by name. Every spelling of a new name gets its own (a name merged into another
    # entity as an alias is looked up by its own spelling's vector each time).
    known = known_entities(
        {(item.tenant_id, e.normalized) for item, found in zip(items, founds, strict=True) for e in found}
    )
    entity_texts = list(
        dict.fromkeys(
            e.text
            for item, found in zip(items, founds, strict=True)
            for e in found
            if (item.tenant_id, e.normalized) not in known
        )
    )
    vectors = cached_embeddings(entity_texts + all_spans) if entity_texts or all_spans else []
    by_text = dict(zip(entity_texts, vectors[: len(entity_texts)], strict=True))
    span_vectors = vectors[len(entity_texts) :]
    out = []
    span_at = 0
    for item, text, found, rels, item_spans, summary in zip(
        items, texts, founds, relations, spans, clauses, strict=True
    ):
        out.append(
            Prepared(
                item_id=item.pk,
                tenant_id=item.tenant_id,
                text=text,
                found=found,
                relations=rels,
                entity_vectors=[
                    by_text[e.text] if (item.tenant_id, e.normalized) not in known else None for e in found
                ],
                span_vectors=span_vectors[span_at : span_at + len(item_spans)],
                terms=all_terms[span_at : span_at + len(item_spans)],
                clauses=summary,
            )
        )
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
    return store_many([prepared])[0]


def store_many(batch: list[Prepared]) -> list[bool]:
    """Replace the mentions and edges of every item of ``batch`` in one transaction,
    set-based: one row lock, one delete per table, one entity lookup, one insert per
    table, one span-linking statement, one status update, whatever the batch size.
    The result equals :func:`store` item by item in ``batch`` order (tested): an edge
    links to the edges of items before it in the batch, not to those after it.
    Returns, per prepared item, False when the item is gone. Raises on any failure
    with nothing stored; the caller then stores item by item, so one bad item does
    not fail its neighbours."""
    if not batch:
        return []
    own_transaction = not connection.in_atomic_block
    with transaction.atomic():
        if own_transaction:
            # Derived rows, status included, commit together: a commit lost in a
            # server crash leaves the items pending, and the extraction sweep queues
            # them again. So this transaction does not wait for its WAL flush. Never
            # inside a caller's transaction: that may be a write.
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit = off")
        # The row locks serialize two deliveries of the same task; taken in key order
        # so two batches sharing items cannot deadlock.
        locked = {
            row.pk: row
            for row in MemoryItem.objects.select_for_update()
            .filter(pk__in=[p.item_id for p in batch])
            .order_by("pk")
            .only("id", "tenant_id", "content", "extraction_status", "legal_hold")
        }
        refused = _refused_under_hold(
            [row for row in locked.values() if row.extraction_status == MemoryItem.Extraction.DONE]
        )
        results, todo, taken = [], [], set()
        for prepared in batch:
            row = locked.get(_as_pk(prepared.item_id))
            results.append(row is not None)
            if row is None or row.pk in taken:
                continue
            taken.add(row.pk)
            if row.content != prepared.text:
                continue  # updated meanwhile: the update enqueued its own extraction
            if row.pk in refused:
                continue
            todo.append(prepared)
        if todo:
            _replace_derived(todo)
    return results


def _replace_derived(batch: list[Prepared]) -> None:
    ids = [p.item_id for p in batch]
    previous: dict[Any, set[Any]] = {}
    for tenant_id, entity_id in (
        Mention.objects.filter(item_id__in=ids).values_list("tenant_id", "entity_id").distinct()
    ):
        previous.setdefault(tenant_id, set()).add(entity_id)
    Mention.objects.filter(item_id__in=ids).delete()
    CausalEdge.objects.filter(item_id__in=ids).delete()
    # Every entity the batch names that already exists, in one query (per tenant:
    # a sweep may hand several tenants' items to one task).
    tenants = list(dict.fromkeys(p.tenant_id for p in batch))
    caches: dict[Any, dict[str, Entity]] = {tenant_id: {} for tenant_id in tenants}
    names = {f.normalized for p in batch for f in p.found}
    if names:
        for entity in Entity.objects.filter(tenant_id__in=tenants, normalized__in=names):
            caches[entity.tenant_id][entity.normalized] = entity
    mentions: dict[tuple[Any, Any, int], Mention] = {}
    edges: list[CausalEdge] = []
    for p in batch:
        for entity_found, vector in zip(p.found, p.entity_vectors, strict=True):
            entity = _entity_for(p.tenant_id, entity_found, vector, caches[p.tenant_id])
            mentions[(p.item_id, entity.pk, entity_found.start)] = Mention(
                tenant_id=p.tenant_id,
                item_id=p.item_id,
                entity=entity,
                text=entity_found.text[:200],
                start=entity_found.start,
                end=entity_found.end,
            )
        n = len(p.relations)
        edges.extend(
            CausalEdge(
                tenant_id=p.tenant_id,
                item_id=p.item_id,
                cause=rel.cause,
                effect=rel.effect,
                cue=rel.cue,
                extractor=name,
                cause_terms=p.terms[i],
                effect_terms=p.terms[n + i],
                cause_embedding=p.span_vectors[i],
                effect_embedding=p.span_vectors[n + i],
            )
            for i, (name, rel) in enumerate(p.relations)
        )
    Mention.objects.bulk_create(mentions.values())
    created = CausalEdge.objects.bulk_create(edges)
    # The old edges' links went with them (CASCADE); the new ones link now.
    for tenant_id in tenants:
        link_edges(tenant_id, [edge for edge in created if edge.tenant_id == tenant_id])
    MemoryItem.objects.filter(pk__in=ids).update(
        extraction_status=MemoryItem.Extraction.DONE, extraction_error=""
    )
    summarized = [MemoryItem(pk=p.item_id, clauses=p.clauses) for p in batch if p.clauses is not None]
    if summarized:
        MemoryItem.objects.bulk_update(summarized, ["clauses"])
    for tenant_id, entity_ids in previous.items():
        delete_orphan_entities(tenant_id, entity_ids)


def _refused_under_hold(items: list[MemoryItem]) -> set[Any]:
    """Re-extraction replaces an item's mentions and causal edges: a held item keeps
    the graph it had (memory.holds decides), and each attempt is audited. Returns
    the keys of the held ``items``; one query for the holds of each tenant and one
    for the items they cover."""
    from governance.models import Tenant
    from memory.holds import Holds, audit_blocked

    refused: set[Any] = set()
    for tenant_id in dict.fromkeys(item.tenant_id for item in items):
        mine = [item for item in items if item.tenant_id == tenant_id]
        holds = Holds(tenant_id)
        held = {item.pk for item in mine if item.legal_hold}
        if holds:
            rows = MemoryItem.objects.filter(pk__in=[item.pk for item in mine])
            held |= set(holds.held(rows).values_list("pk", flat=True))
        for item in mine:
            if item.pk not in held:
                continue
            audit_blocked(
                tenant=Tenant.objects.get(pk=item.tenant_id),
                actor=None,
                operation="re_extraction",
                holds=holds.covering_item(item),
                count=1,
                flagged=int(item.legal_hold),
                target=("memory.memoryitem", str(item.pk)),
            )
        refused |= held
    return refused


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
