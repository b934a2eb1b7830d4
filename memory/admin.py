"""Read-only admin views of memory: changes and deletions go through the memory
services, which enforce policy and legal holds and write history. What end users
said (content, session messages, history text, extracted spans, subject keys)
never shows here: the admin sits outside the tenant gate, and memory is read
through the API or the console, where policy and tenancy apply."""

from django.contrib import admin

from core.admin import ReadOnlyModelAdmin
from governance.admin_base import ContentHiddenAdmin
from memory.models import (
    CausalEdge,
    ContradictionDecision,
    Dataset,
    Entity,
    IdempotencyRecord,
    ItemSentence,
    MemoryHistory,
    MemoryItem,
    Mention,
    SessionMessage,
    SpanLink,
    Supersession,
)


@admin.register(MemoryItem)
class MemoryItemAdmin(ContentHiddenAdmin):
    hidden_fields = (
        "content",
        "embedding",
        "search_vector",
        "user_id",
        "session_id",
        "metadata",
        "provenance",
    )
    list_display = [
        "id",
        "agent",
        "scope",
        "kind",
        "classification",
        "personal_data",
        "legal_hold",
        "created_at",
    ]
    list_filter = ["scope", "kind", "classification", "personal_data", "legal_hold", "tenant"]


@admin.register(ItemSentence)
class ItemSentenceAdmin(ContentHiddenAdmin):
    # A sentence's vector is derived from what was said, like the item's own.
    hidden_fields = ("embedding",)
    list_display = ["item_id", "position", "start", "end"]


@admin.register(MemoryHistory)
class MemoryHistoryAdmin(ContentHiddenAdmin):
    hidden_fields = ("old_content", "new_content", "details")
    list_display = ["item_id", "event", "actor_type", "actor_id", "created_at"]
    list_filter = ["event", "actor_type"]


@admin.register(SessionMessage)
class SessionMessageAdmin(ContentHiddenAdmin):
    hidden_fields = ("content", "session_id", "user_id", "metadata", "embedding")
    list_display = ["id", "agent", "role", "created_at"]


@admin.register(IdempotencyRecord)
class IdempotencyRecordAdmin(ContentHiddenAdmin):
    hidden_fields = ("result",)  # the stored answer repeats the written content
    list_display = ["agent", "endpoint", "key", "status_code", "created_at"]


@admin.register(Entity)
class EntityAdmin(ContentHiddenAdmin):
    # Entity names are spans of what users said (people, places, account names).
    hidden_fields = ("name", "normalized", "aliases", "embedding")
    list_display = ["id", "label", "tenant", "created_at"]


@admin.register(Mention)
class MentionAdmin(ContentHiddenAdmin):
    hidden_fields = ("text",)
    list_display = ["id", "entity_id", "item_id"]


@admin.register(CausalEdge)
class CausalEdgeAdmin(ContentHiddenAdmin):
    hidden_fields = ("cause", "effect", "cause_embedding", "effect_embedding", "cause_terms", "effect_terms")
    list_display = ["id", "cue", "item_id", "created_at"]
    list_filter = ["cue", "extractor"]


@admin.register(SpanLink)
class SpanLinkAdmin(ReadOnlyModelAdmin):
    list_display = ["source_id", "target_id", "method", "score"]
    list_filter = ["method"]


@admin.register(ContradictionDecision)
class ContradictionDecisionAdmin(ContentHiddenAdmin):
    hidden_fields = ("details",)
    list_display = ["new_item_id", "old_item_id", "resolver", "status", "created_at", "undone_at"]
    list_filter = ["resolver", "status"]


@admin.register(Supersession)
class SupersessionAdmin(ReadOnlyModelAdmin):
    list_display = ["old_item_id", "new_item_id", "reason", "created_at", "reverted_at"]


@admin.register(Dataset)
class DatasetAdmin(ReadOnlyModelAdmin):
    list_display = [
        "name",
        "agent",
        "scope",
        "engine",
        "documents",
        "graph_status",
        "legal_hold",
        "created_at",
    ]
    list_filter = ["scope", "engine", "graph_status", "legal_hold", "tenant"]
    search_fields = ["name"]
