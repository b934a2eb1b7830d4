"""Read-only admin views of memory: changes and deletions go through the memory
services, which enforce policy and legal holds and write history."""

from django.contrib import admin

from core.admin import ReadOnlyModelAdmin
from memory.models import (
    CausalEdge,
    ContradictionDecision,
    Dataset,
    Entity,
    IdempotencyRecord,
    MemoryHistory,
    MemoryItem,
    Mention,
    SessionMessage,
    SpanLink,
    Supersession,
)


@admin.register(MemoryItem)
class MemoryItemAdmin(ReadOnlyModelAdmin):
    list_display = [
        "content",
        "agent",
        "scope",
        "kind",
        "classification",
        "personal_data",
        "legal_hold",
        "created_at",
    ]
    list_filter = ["scope", "kind", "classification", "personal_data", "legal_hold", "tenant"]
    search_fields = ["content", "user_id", "session_id"]
    exclude = ["embedding"]


@admin.register(MemoryHistory)
class MemoryHistoryAdmin(ReadOnlyModelAdmin):
    list_display = ["item_id", "event", "actor_type", "actor_id", "created_at"]
    list_filter = ["event", "actor_type"]


@admin.register(SessionMessage)
class SessionMessageAdmin(ReadOnlyModelAdmin):
    list_display = ["session_id", "agent", "role", "content", "created_at"]
    search_fields = ["session_id", "content"]


@admin.register(IdempotencyRecord)
class IdempotencyRecordAdmin(ReadOnlyModelAdmin):
    list_display = ["agent", "endpoint", "key", "status_code", "created_at"]


@admin.register(Entity)
class EntityAdmin(ReadOnlyModelAdmin):
    list_display = ["name", "label", "tenant", "created_at"]
    search_fields = ["normalized"]
    exclude = ["embedding"]


@admin.register(Mention)
class MentionAdmin(ReadOnlyModelAdmin):
    list_display = ["entity", "item", "text"]


@admin.register(CausalEdge)
class CausalEdgeAdmin(ReadOnlyModelAdmin):
    list_display = ["cause", "effect", "cue", "item", "created_at"]
    list_filter = ["cue", "extractor"]
    exclude = ["cause_embedding", "effect_embedding"]


@admin.register(SpanLink)
class SpanLinkAdmin(ReadOnlyModelAdmin):
    list_display = ["source", "target", "method", "score"]
    list_filter = ["method"]


@admin.register(ContradictionDecision)
class ContradictionDecisionAdmin(ReadOnlyModelAdmin):
    list_display = ["new_item", "old_item", "resolver", "status", "created_at", "undone_at"]
    list_filter = ["resolver", "status"]


@admin.register(Supersession)
class SupersessionAdmin(ReadOnlyModelAdmin):
    list_display = ["old_item", "new_item", "reason", "created_at", "reverted_at"]


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
