"""The memory item: one remembered piece of content with its scope keys and governance fields."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Case, Q, When
from django.utils import timezone
from pgvector.django import HnswIndex, VectorField

from core.vocabulary import Classification, Kind, RecordKind, Scope
from memory.retrieval.language import CONFIGS, SIMPLE, detect

# The column's dimension. A configured embedding model must produce exactly this
# many numbers (checked at start-up); a different size needs a new migration.
EMBEDDING_DIMENSIONS = 384
# The text-search configuration of a query that no item's language decides (the
# console's filter over several tenants parses with every stored language instead).
TEXT_SEARCH_CONFIG = "english"


def search_vector_expression() -> Case:
    """``content`` analysed with the item's own configuration (``text_language``).

    A CASE over constant configurations, because a generated column must be
    immutable and casting a text column to ``regconfig`` is not."""
    return Case(
        *(
            When(text_language=config, then=SearchVector("content", config=config))
            for config in CONFIGS
            if config != SIMPLE
        ),
        default=SearchVector("content", config=SIMPLE),
    )


class MemoryItemQuerySet(models.QuerySet["MemoryItem"]):
    def bulk_create(self, objs: Any, *args: Any, **kwargs: Any) -> list[MemoryItem]:
        """As Django's, with each new item's text language detected first (see save)."""
        objs = list(objs)
        for obj in objs:
            obj.text_language = detect(obj.content)
        return super().bulk_create(objs, *args, **kwargs)

    def current(self, *, at: object | None = None) -> MemoryItemQuerySet:
        """Valid at ``at`` (default now) and not past retention: what every read sees."""
        moment = at or timezone.now()
        return self.filter(
            Q(valid_from__lte=moment),
            Q(invalid_at__isnull=True) | Q(invalid_at__gt=moment),
            Q(retention_until__isnull=True) | Q(retention_until__gt=moment),
        )


class MemoryItem(models.Model):
    """A memory of one agent in one tenant.

    Scope keys (agent, user_id, session_id, team, project) say whose memory it is;
    ``scopes`` says at which levels it is visible (an exact duplicate written at
    another scope with the same keys widens ``scopes`` instead of adding a row;
    ``scope`` keeps the level it was first written at). ``invalid_at`` retires an
    item without deleting it (soft supersede); ``retention_until`` is when it
    expires. Embedding and full-text vector are derived from ``content`` and
    change with it.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # PROTECT: memory is only ever deleted through the memory services, which
    # honour legal holds; deleting a tenant or agent that still has memory fails.
    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    agent = models.ForeignKey("governance.Agent", on_delete=models.PROTECT, related_name="memory_items")
    user_id = models.CharField(
        max_length=128, blank=True, help_text="the subject (end user) the memory is about"
    )
    session_id = models.CharField(max_length=128, blank=True)
    team = models.CharField(max_length=128, blank=True)
    project = models.CharField(max_length=128, blank=True)
    scope = models.CharField(max_length=16, choices=Scope.choices)
    scopes = ArrayField(models.CharField(max_length=16, choices=Scope.choices), default=list)
    shared_with = ArrayField(
        models.UUIDField(), default=list, blank=True, help_text="agents a shared_agents item is shared with"
    )

    content = models.TextField()
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.FACT)
    record_kind = models.CharField(max_length=16, choices=RecordKind.choices, default=RecordKind.FACT)
    classification = models.PositiveSmallIntegerField(
        choices=Classification.choices, default=Classification.INTERNAL
    )
    personal_data = models.BooleanField(default=False)
    personal_data_types = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    source = models.CharField(max_length=200, blank=True)
    provenance = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    content_hash = models.CharField(max_length=64, help_text="sha256 of the normalized content")

    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS)
    # The text-search configuration the content is stemmed with, detected from the
    # content on every save (memory.retrieval.language); "simple" when unknown.
    text_language = models.CharField(max_length=16, default=SIMPLE, editable=False)
    search_vector = models.GeneratedField(
        expression=search_vector_expression(),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)
    valid_from = models.DateTimeField(default=timezone.now)
    invalid_at = models.DateTimeField(null=True, blank=True)
    # When the fact happened or was said, as the writer states it (a conversation
    # turn's session time, an event's date); unlike created_at it is not the
    # moment of storage. Recall ranks items inside a time the query names higher
    # (memory.retrieval.when); validity and retention never read it.
    occurred_at = models.DateTimeField(null=True, blank=True)
    retention_until = models.DateTimeField(null=True, blank=True)
    # Last time a recall or search returned the item (idle retention); refreshed at
    # most hourly by the retrieval statement itself, so recalls stay read-cheap.
    last_recalled_at = models.DateTimeField(null=True, blank=True)
    legal_hold = models.BooleanField(default=False)
    # Knowledge chunks (record kind ``document``) name their dataset; deleted with it.
    dataset = models.ForeignKey(
        "memory.Dataset", null=True, blank=True, on_delete=models.PROTECT, related_name="items"
    )

    class Extraction(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        FAILED = "failed"

    # Set by the extraction task (memory.tasks.extract_items) after each write; a
    # queued write is "pending", never reported as settled.
    extraction_status = models.CharField(max_length=8, choices=Extraction.choices, default=Extraction.PENDING)
    extraction_error = models.TextField(blank=True)
    # What the causal chain walk reads of the content's parse (memory.extraction.clauses),
    # stored by the write or the extraction so a query does not parse again. Derived
    # from the content, tied to it by a digest and cleared whenever it is saved.
    clauses = models.JSONField(null=True, blank=True, editable=False)
    # When the extraction sweep last re-queued this item (memory.services.backfill):
    # a pending item is re-queued once per bound, not on every sweep.
    extraction_requeued_at = models.DateTimeField(null=True, blank=True)

    objects = MemoryItemQuerySet.as_manager()

    class Meta:
        db_table = "memory_item"
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["tenant", "agent", "-created_at"], name="memory_item_agent_recent"),
            # The console's newest-first keyset pages over a whole tenant: without it every
            # page sorts the tenant's rows (~300 ms at 100k items).
            models.Index(fields=["tenant", "-created_at", "-id"], name="memory_item_tenant_recent"),
            models.Index(fields=["tenant", "content_hash"], name="memory_item_hash"),
            # A session's items in write order: session context in hybrid recall finds
            # each candidate's neighbours with one probe each, however long the session.
            # The id breaks ties of created_at as the probes' (created_at, id) bound and
            # order do: without it the bound was a filter, and a probe for the next item
            # read and sorted every later item of the session.
            models.Index(
                fields=["agent", "session_id", "created_at", "id"], name="memory_item_session_order"
            ),
            # The items inside a time a query names (recall's time candidates).
            models.Index(
                fields=["tenant", "occurred_at"],
                name="memory_item_occurred",
                condition=Q(occurred_at__isnull=False),
            ),
            # The extraction sweep reads only pending items; the rest of the table is settled.
            models.Index(
                fields=["updated_at"],
                name="memory_item_extraction_pending",
                condition=Q(extraction_status="pending"),
            ),
            # GIN's fast-update buffers new entries in a pending list that every search
            # must read in full; at the 4 MB default it made full-text lookups several
            # times slower under steady writes. A small list keeps searches fast while
            # still batching index maintenance.
            GinIndex(fields=["search_vector"], name="memory_item_search_gin", gin_pending_list_limit=256),
            # The languages of a tenant and their sizes (BM25's per-language corpus
            # statistics), counted from the index alone.
            models.Index(fields=["tenant", "text_language"], name="memory_item_tenant_language"),
            # Cosine, matching `<=>` in retrieval. Built in its own migration: on a
            # large table it is the slow step and must be re-runnable on its own.
            HnswIndex(
                name="memory_item_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(classification__lte=Classification.RESTRICTED), name="memory_item_classification"
            ),
            models.CheckConstraint(condition=~Q(scopes=[]), name="memory_item_has_scope"),
        ]

    def __str__(self) -> str:
        return f"{self.scope}:{self.content[:40]}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # The language follows the content: whenever the content is saved, so is it.
        fields = kwargs.get("update_fields")
        # A summary of the old text is stale: the new text's extraction stores its own.
        if fields is not None and "content" in fields and "clauses" not in fields:
            self.clauses = None
            fields = [*fields, "clauses"]
        if fields is None or "content" in fields:
            self.text_language = detect(self.content)
            if fields is not None:
                kwargs["update_fields"] = [*fields, "text_language"]
        super().save(*args, **kwargs)

    @property
    def classification_name(self) -> str:
        return str(Classification(self.classification).label)


class ItemSentence(models.Model):
    """One sentence of an item that holds several, embedded on its own.

    An item's embedding is the mean of all it says, so a turn that answers in one
    sentence among three ("Caroline: Thanks! I went to the LGBTQ support group
    yesterday. It was powerful.") sits between its topics; hybrid recall also
    scores the item by its best sentence (``FEDMEM_HYBRID_SENTENCE_WEIGHT``). Rows
    exist only for items of two or more sentences, are written with the item
    (and rewritten when its content changes), and go with it (cascade; erasure
    lists them from the catalog). The text is not stored twice: ``start`` and
    ``end`` point into the item's content.
    """

    # Indexed by the unique (item, position) constraint below.
    item = models.ForeignKey(MemoryItem, on_delete=models.CASCADE, related_name="sentences", db_index=False)
    position = models.PositiveSmallIntegerField()
    start = models.PositiveIntegerField()
    end = models.PositiveIntegerField()
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS)

    class Meta:
        db_table = "memory_item_sentence"
        constraints = [
            # Also the index recall's per-candidate lookup reads (item_id first).
            models.UniqueConstraint(fields=["item", "position"], name="memory_item_sentence_position"),
        ]

    def __str__(self) -> str:
        return f"{self.item_id}#{self.position}"
