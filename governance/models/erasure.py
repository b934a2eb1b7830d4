"""Erasure of a data subject (and of named datasets): the request (with its certificate) and the fence.

The subject is kept in clear only while the request is pending — the worker needs
it to find the data — and blanked when the erasure completes; from then on the
request, the fence and the audit trail know the subject only by
:func:`governance.services.audit.subject_hash`.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models

from .restricted import RestrictedQuerySet
from .tenancy import Tenant


class ErasureRequest(models.Model):
    """One request to erase every trace of a subject and/or the knowledge chunks of
    named datasets, in a tenant or one agent (at least one of the two is named)."""

    class Scope(models.TextChoices):
        TENANT = "tenant"
        AGENT = "agent"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="erasure_requests")
    subject = models.CharField(max_length=128, blank=True, help_text="blanked when the erasure completes")
    # Empty when the request names only datasets.
    subject_hash = models.CharField(max_length=64, db_index=True, blank=True)
    # Knowledge datasets (tenant-unique names) whose chunks go too: chunks ingested
    # without a user_id belong to no subject, and only naming their dataset reaches them.
    datasets = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    scope = models.CharField(max_length=16, choices=Scope.choices, default=Scope.TENANT)
    agent = models.ForeignKey(
        "governance.Agent", null=True, blank=True, on_delete=models.PROTECT, related_name="erasure_requests"
    )
    reason = models.CharField(max_length=1000)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    job = models.OneToOneField("governance.Job", on_delete=models.PROTECT, related_name="erasure_request")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    certificate = models.JSONField(default=dict, blank=True)

    objects = RestrictedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"erasure {self.pk} ({self.status})"


class ErasureFence(models.Model):
    """What an erasure removed, so a stale copy captured before it is never promoted
    or re-imported: the subject (hashed), when, and the content hashes erased."""

    request = models.OneToOneField(ErasureRequest, on_delete=models.PROTECT, related_name="fence")
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    subject_hash = models.CharField(max_length=64)
    erased_at = models.DateTimeField()
    content_hashes = ArrayField(models.CharField(max_length=64), default=list, blank=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "subject_hash"], name="erasure_fence_subject")]

    def __str__(self) -> str:
        return f"fence of {self.request_id}"
