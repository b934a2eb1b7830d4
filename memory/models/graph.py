"""The memory graph derived from items by extraction: entities, mentions, causal edges,
and the supersession record that retires one fact in favour of another.

Every row carries its tenant: traversal joins always compare tenants, so two
tenants naming the same entity share nothing.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone
from pgvector.django import VectorField

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
        indexes = [models.Index(fields=["tenant", "entity"], name="memory_mention_entity")]

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
        indexes = [models.Index(fields=["tenant", "item"], name="memory_edge_item")]

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
