from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from .restricted import RestrictedQuerySet
from .tenancy import Tenant


class Job(models.Model):
    """A unit of long work run by a Celery worker, with progress the console and API show."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="jobs")
    kind = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    progress = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    message = models.CharField(max_length=500, blank=True)
    error = models.TextField(blank=True)
    result = models.JSONField(default=dict, blank=True)
    worker = models.CharField(max_length=200, blank=True, help_text="host:pid of the worker that ran it")
    attempts = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The agent the work is about (a knowledge graph build, a candidate import):
    # whoever may view the agent may follow the job; tenant-wide kinds leave it empty.
    agent = models.ForeignKey(
        "governance.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = RestrictedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tenant", "status", "-created_at"], name="job_tenant_status")]

    def __str__(self) -> str:
        return f"{self.kind} {self.status}"
