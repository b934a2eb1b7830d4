from django.contrib import admin

from core.models import OutboxMessage


@admin.register(OutboxMessage)
class OutboxMessageAdmin(admin.ModelAdmin):
    list_display = ["task_name", "created_at", "sent_at", "attempts", "last_error"]
    list_filter = ["task_name"]
    readonly_fields = ["task_name", "args", "kwargs", "created_at", "sent_at", "attempts", "last_error"]
