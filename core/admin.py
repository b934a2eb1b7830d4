from django.contrib import admin

from core.models import OutboxMessage


class ReadOnlyModelAdmin(admin.ModelAdmin):
    """For rows that only services may write (audit, memory): the admin reads them."""

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(OutboxMessage)
class OutboxMessageAdmin(admin.ModelAdmin):
    list_display = ["task_name", "created_at", "sent_at", "attempts", "last_error"]
    list_filter = ["task_name"]
    readonly_fields = ["task_name", "args", "kwargs", "created_at", "sent_at", "attempts", "last_error"]
