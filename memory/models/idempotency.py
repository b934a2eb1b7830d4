"""Idempotency-Key bookkeeping: which request a key was first used for and what it produced."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class IdempotencyRecord(models.Model):
    """The outcome of the first request carrying an ``Idempotency-Key`` for one agent.

    ``result`` holds ids and statuses only, never content, so the record leaks
    nothing that erasure would have to chase beyond the row itself.
    """

    tenant = models.ForeignKey("governance.Tenant", on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey("governance.Agent", on_delete=models.CASCADE, related_name="+")
    endpoint = models.CharField(max_length=32)
    key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField()
    result = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memory_idempotency"
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "endpoint", "key"], name="memory_idempotency_unique_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.endpoint}:{self.key}"
