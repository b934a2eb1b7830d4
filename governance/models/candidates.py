"""Candidates: portable records a provider engine handed over, waiting for review.

A candidate is not memory: it is never recalled, searched or exported. It becomes
memory only when its owner (the subject, or a tenant admin acting for them)
approves it and someone promotes it, which copies it into the builtin memory with
provenance. The record-kind vocabulary is closed (``core.vocabulary.RecordKind``);
execution state such as LangGraph checkpoints is refused at import.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from core.vocabulary import Kind, RecordKind

from .restricted import RestrictedQuerySet
from .tenancy import Tenant


class Candidate(models.Model):
    """One record from one engine, about one subject, for one agent."""

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"
        PROMOTED = "promoted"

    class ReviewedAs(models.TextChoices):
        SUBJECT = "subject", "The subject themselves"
        TENANT_ADMIN = "tenant_admin", "A tenant admin acting for the subject"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="candidates")
    agent = models.ForeignKey("governance.Agent", on_delete=models.CASCADE, related_name="candidates")
    provider = models.CharField(max_length=63, help_text="engine instance id the record came from")
    external_id = models.CharField(max_length=255)
    record_kind = models.CharField(max_length=16, choices=RecordKind.choices)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.FACT)
    content = models.TextField()
    content_hash = models.CharField(max_length=64)
    subject = models.CharField(max_length=128, help_text="the end user the record is about")
    captured_at = models.DateTimeField(help_text="when the provider's copy was taken")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_as = models.CharField(max_length=16, choices=ReviewedAs.choices, blank=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_reason = models.CharField(max_length=1000, blank=True)
    promoted_item_id = models.UUIDField(null=True, blank=True)
    promoted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = RestrictedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "provider", "external_id"], name="candidate_unique_external_record"
            ),
        ]
        indexes = [models.Index(fields=["tenant", "status", "-created_at"], name="candidate_queue")]

    def __str__(self) -> str:
        return f"{self.provider}:{self.external_id} ({self.status})"
