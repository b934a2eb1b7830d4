"""Every mutation of a memory item, kept after the item itself is gone."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class MemoryHistory(models.Model):
    """One mutation (event, actor, old/new text, when) of one memory item.

    ``item_id`` is a plain column, not a foreign key, so the trail of a deleted
    item survives its deletion; erasure redacts the text columns.
    """

    class Event(models.TextChoices):
        CREATED = "created"
        DEDUPLICATED = "deduplicated"
        UPDATED = "updated"
        SCOPE_ADDED = "scope_added"
        SCOPE_REMOVED = "scope_removed"
        DELETED = "deleted"
        PURGED = "purged"
        SUPERSEDED = "superseded"
        REVIVED = "revived"

    tenant = models.ForeignKey("governance.Tenant", on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(
        "governance.Agent", null=True, on_delete=models.SET_NULL, related_name="memory_history"
    )
    item_id = models.UUIDField()
    event = models.CharField(max_length=16, choices=Event.choices)
    actor_type = models.CharField(max_length=8, help_text="agent, user or system")
    actor_id = models.CharField(max_length=64, blank=True)
    old_content = models.TextField(blank=True)
    new_content = models.TextField(blank=True)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memory_history"
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["item_id", "created_at"], name="memory_history_item")]
        verbose_name_plural = "memory history"

    def __str__(self) -> str:
        return f"{self.item_id} {self.event}"
