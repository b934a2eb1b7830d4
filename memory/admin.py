"""Memory rows are read-only in the admin: writes and deletes go through the memory
services, which enforce policy, legal holds and history."""

from django.contrib import admin

from core.admin import ReadOnlyModelAdmin
from memory.models import (
    CausalEdge,
    Entity,
    IdempotencyRecord,
    MemoryHistory,
    MemoryItem,
    Mention,
    SessionMessage,
    Supersession,
)


@admin.register(MemoryItem)
class MemoryItemAdmin(ReadOnlyModelAdmin):
    list_display = [
        "id",
        "agent",
        "scope",
        "kind",
        "classification",
        "legal_hold",
        "created_at",
        "invalid_at",
    ]
    list_filter = ["scope", "kind", "record_kind", "legal_hold"]
    search_fields = ["id", "content_hash"]
    exclude = ["embedding"]


@admin.register(MemoryHistory)
class MemoryHistoryAdmin(ReadOnlyModelAdmin):
    list_display = ["item_id", "event", "created_at"]
    list_filter = ["event"]


@admin.register(SessionMessage)
class SessionMessageAdmin(ReadOnlyModelAdmin):
    list_display = ["agent", "session_id", "role", "created_at"]


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


@admin.register(Supersession)
class SupersessionAdmin(ReadOnlyModelAdmin):
    list_display = ["old_item", "new_item", "reason", "created_at", "reverted_at"]
