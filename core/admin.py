"""Django admin building blocks of the core: read-only admins for rows that only
services write, and the outbox's admin. The platform-staff gate, content hiding and
audited edits live in ``governance.admin_base`` (they need memberships and the
audit trail, which the core does not know)."""

from __future__ import annotations

from django.contrib import admin

from core.models import Counter, Generation, OutboxMessage


class ReadOnlyModelAdmin(admin.ModelAdmin):
    """For rows that only services may write (audit, memory): the admin reads them."""

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(OutboxMessage)
class OutboxMessageAdmin(ReadOnlyModelAdmin):
    """Task arguments may name items and subjects; the relay is the only writer."""

    list_display = ["task_name", "created_at", "sent_at", "attempts", "last_error"]
    list_filter = ["task_name"]


@admin.register(Counter)
class CounterAdmin(ReadOnlyModelAdmin):
    """Rate-limit and lockout windows: an operator sees who is being throttled; only
    the counting code writes them."""

    list_display = ["key", "count", "expires_at"]
    search_fields = ["key"]


@admin.register(Generation)
class GenerationAdmin(ReadOnlyModelAdmin):
    """The numbers the identity triggers move (core.generations); written by triggers only."""

    list_display = ["name", "value"]
