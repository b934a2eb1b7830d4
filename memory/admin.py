"""Read-only admin views of memory: changes and deletions go through the memory
services, which enforce policy and legal holds and write history."""

from django.contrib import admin

from memory.models import MemoryHistory, MemoryItem, SessionMessage


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(MemoryItem)
class MemoryItemAdmin(ReadOnlyAdmin):
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
class MemoryHistoryAdmin(ReadOnlyAdmin):
    list_display = ["item_id", "event", "actor_type", "actor_id", "created_at"]
    list_filter = ["event", "actor_type"]


@admin.register(SessionMessage)
class SessionMessageAdmin(ReadOnlyAdmin):
    list_display = ["session_id", "agent", "role", "content", "created_at"]
    search_fields = ["session_id", "content"]
