"""Session memory: the message log of one conversation, kept only by the builtin engine."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone

from core.vocabulary import Classification


class SessionMessage(models.Model):
    """One message of an agent's session, in arrival order (the id is monotonic).

    Session memory never leaves the builtin engine, whatever engine the agent's
    policy picks for long-term memory.
    """

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        SYSTEM = "system"
        TOOL = "tool"

    tenant = models.ForeignKey("governance.Tenant", on_delete=models.PROTECT, related_name="+")
    agent = models.ForeignKey("governance.Agent", on_delete=models.PROTECT, related_name="session_messages")
    session_id = models.CharField(max_length=128)
    user_id = models.CharField(max_length=128, blank=True)
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField()
    classification = models.PositiveSmallIntegerField(
        choices=Classification.choices, default=Classification.INTERNAL
    )
    personal_data = models.BooleanField(default=False)
    personal_data_types = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    retention_until = models.DateTimeField(null=True, blank=True)
    legal_hold = models.BooleanField(default=False)

    class Meta:
        db_table = "memory_session_message"
        ordering = ["id"]
        indexes = [models.Index(fields=["agent", "session_id", "id"], name="memory_session_log")]

    def __str__(self) -> str:
        return f"{self.session_id} {self.role}"
