"""The memory graph derived from items by extraction: entities, mentions, causal edges,
and the supersession record that retires one fact in favour of another.

Every row carries its tenant: traversal joins always compare tenants, so two
tenants naming the same entity share nothing.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.utils import timezone
from pgvector.django import HnswIndex, VectorField

from memory.models.items import EMBEDDING_DIMENSIONS


class Entity(models.Model):
    """A named thing in one tenant, merged across spellings (``normalized`` is the key).

    ``aliases`` keeps every surface form merged into it; the embedding is the one of
    ``name`` and is what merges a new spelling into an existing entity.
    """

    tenant = models.ForeignKey("governance.Tenant", on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=200)
    normalized = models.CharField(max_length=200)
    label = models.CharField(max_length=32, blank=True, help_text="NER label, or NOUN_CHUNK")
    aliases = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memory_entity"
        verbose_name_plural = "entities"
        constraints = [
            models.UniqueConstraint(fields=["tenant", "normalized"], name="memory_entity_unique_name"),
        ]

    def __str__(self) -> str:
        return self.name


class Mention(models.Model):
    """One place an item names an entity (character offsets into the item's content)."""

    tenant = models.ForeignKey("governance.Tenant", on_delete=models.CASCADE, related_name="+")
    item = models.ForeignKey("memory.MemoryItem", on_delete=models.CASCADE, related_name="mentions")
    entity = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="mentions")
    text = models.CharField(max_length=200)
    start = models.PositiveIntegerField()
    end = models.PositiveIntegerField()

    class Meta:
        db_table = "memory_mention"
        constraints = [
            models.UniqueConstraint(fields=["item", "entity", "start"], name="memory_mention_unique"),
        ]
        indexes = [
            models.Index(fields=["tenant", "entity"], name="memory_mention_entity"),
            # Entity bridges read an entity's mentions in item order.
            models.Index(fields=["entity", "item"], name="memory_mention_entity_item"),
        ]

    def __str__(self) -> str:
        return self.text


class CausalEdge(models.Model):
    """Cause span -> effect span, as asserted by one item (the provenance of the link).

    ``*_terms`` are the spans' normalized content lemmas and ``*_embedding`` their
    vectors: together they decide whether one fact's effect is another fact's cause
    (span linking, see memory.reasoning.graph).
    """

    tenant = models.ForeignKey("governance.Tenant", on_delete=models.CASCADE, related_name="+")
    item = models.ForeignKey("memory.MemoryItem", on_delete=models.CASCADE, related_name="causal_edges")
    cause = models.CharField(max_length=500)
    effect = models.CharField(max_length=500)
    cue = models.CharField(max_length=32, help_text="the connective the rule matched")
    extractor = models.CharField(max_length=32, default="rules")
    cause_terms = ArrayField(models.CharField(max_length=64), default=list)
    effect_terms = ArrayField(models.CharField(max_length=64), default=list)
    cause_embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS)
    effect_embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memory_causal_edge"
        ordering = ["id"]
        indexes = [
            models.Index(fields=["tenant", "item"], name="memory_edge_item"),
            # Span linking on write: nearest spans by embedding, overlapping terms.
            HnswIndex(
                name="memory_edge_cause_hnsw",
                fields=["cause_embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
            HnswIndex(
                name="memory_edge_effect_hnsw",
                fields=["effect_embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
            GinIndex(fields=["cause_terms"], name="memory_edge_cause_terms"),
            GinIndex(fields=["effect_terms"], name="memory_edge_effect_terms"),
        ]

    def __str__(self) -> str:
        return f"{self.cause[:30]} -> {self.effect[:30]}"


class Supersession(models.Model):
    """``old_item`` was retired in favour of ``new_item`` (reversible: ``reverted_at``)."""

    tenant = models.ForeignKey("governance.Tenant", on_delete=models.CASCADE, related_name="+")
    old_item = models.ForeignKey(
        "memory.MemoryItem", on_delete=models.CASCADE, related_name="superseded_by_records"
    )
    new_item = models.ForeignKey(
        "memory.MemoryItem", on_delete=models.CASCADE, related_name="supersedes_records"
    )
    reason = models.CharField(max_length=200, blank=True)
    actor = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)
    reverted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "memory_supersession"
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.old_item_id} -> {self.new_item_id}"


class SpanLink(models.Model):
    """Edge ``source`` continues into edge ``target``: the source's effect span and the
    target's cause span name the same event (normalized term overlap, or span
    embeddings above FEDMEM_SPAN_LINK_THRESHOLD).

    Stored when an edge is extracted and deleted with either edge (CASCADE), so a
    forget, purge, re-extraction or erasure takes its links along. Links carry no
    text and no visibility of their own: traversal only follows a link to an edge
    whose item the caller may read (memory.reasoning.graph).
    """

    class Method(models.TextChoices):
        TERMS = "terms"
        VECTOR = "vector"

    tenant = models.ForeignKey("governance.Tenant", on_delete=models.CASCADE, related_name="+")
    source = models.ForeignKey(CausalEdge, on_delete=models.CASCADE, related_name="links_out")
    target = models.ForeignKey(CausalEdge, on_delete=models.CASCADE, related_name="links_in")
    method = models.CharField(max_length=8, choices=Method.choices)
    score = models.FloatField(help_text="Jaccard overlap of the terms, or cosine similarity")

    class Meta:
        db_table = "memory_span_link"
        constraints = [
            models.UniqueConstraint(fields=["source", "target"], name="memory_span_link_unique"),
        ]
        # A walk reads each edge's best links first, in either direction.
        indexes = [
            models.Index(fields=["source", "-score", "target"], name="memory_span_link_out"),
            models.Index(fields=["target", "-score", "source"], name="memory_span_link_in"),
        ]

    def __str__(self) -> str:
        return f"{self.source_id} -> {self.target_id}"


class ContradictionDecision(models.Model):
    """A contradiction resolver's decision on a write: ``new_item`` contradicts
    ``old_item``, which was soft-superseded (``supersession``). Kept with its reason
    so an operator can review it and undo it (which revives the old fact)."""

    class Status(models.TextChoices):
        APPLIED = "applied"
        UNDONE = "undone"

    tenant = models.ForeignKey("governance.Tenant", on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey("governance.Agent", on_delete=models.CASCADE, related_name="+")
    new_item = models.ForeignKey("memory.MemoryItem", on_delete=models.CASCADE, related_name="+")
    old_item = models.ForeignKey("memory.MemoryItem", on_delete=models.CASCADE, related_name="+")
    supersession = models.ForeignKey(
        Supersession, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    resolver = models.CharField(max_length=32)
    reason = models.CharField(max_length=500)
    details = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.APPLIED)
    actor = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)
    undone_at = models.DateTimeField(null=True, blank=True)
    undone_by = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "memory_contradiction"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["tenant", "agent", "created_at"], name="memory_contradiction_agent")]

    def __str__(self) -> str:
        return f"{self.new_item_id} contradicts {self.old_item_id}"
