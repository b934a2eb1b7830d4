"""Infrastructure rows (no domain data): the transactional outbox, shared counters."""

from __future__ import annotations

import uuid

from django.db import models


class OutboxMessage(models.Model):
    """A Celery task to send, written in the same transaction as the change it follows.

    After commit the message is published at once; if that fails (broker down,
    process killed between commit and publish) the relay publishes it later, so a
    committed change never loses its task. The message id is the Celery task id.
    Args hold ids only, never memory content.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    task_name = models.CharField(max_length=200)
    args = models.JSONField(default=list)
    kwargs = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["created_at"], name="outbox_unsent", condition=models.Q(sent_at__isnull=True)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_name} ({'sent' if self.sent_at else 'pending'})"


class Counter(models.Model):
    """One rate-limit or failed-login counter shared by every process
    (``core.counters.DatabaseCounterCache``); ``key`` names the window."""

    key = models.CharField(max_length=250, primary_key=True)
    count = models.BigIntegerField(default=0)
    expires_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["expires_at"], name="core_counter_expires")]

    def __str__(self) -> str:
        return self.key


class Generation(models.Model):
    """A number that moves, in the same transaction, with every change to the
    tables a process-local cache copies (triggers bump it; ``core.generations``).
    A copy made under the number still in the row is current."""

    name = models.CharField(max_length=63, primary_key=True)
    value = models.BigIntegerField()

    def __str__(self) -> str:
        return f"{self.name}={self.value}"
