"""Legal holds: a compliance order that the data it covers must not be deleted.

A hold names one target — a subject (end user id), an agent, a scope level
(optionally of one agent), a dataset or one memory item. While it is active
(``released_at`` empty) nothing it covers may be deleted, purged, expired,
erased or forgotten by a provider. Which memory rows a hold covers is decided in
one place, :mod:`memory.holds`, because governance does not import memory.
Releasing needs a second security officer (the database refuses the placer).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from .restricted import RestrictedQuerySet
from .tenancy import Tenant


class LegalHoldQuerySet(RestrictedQuerySet["LegalHold"]):
    def active(self) -> LegalHoldQuerySet:
        return self.filter(released_at__isnull=True)


class LegalHold(models.Model):
    """One legal hold on one target of one tenant."""

    class Target(models.TextChoices):
        SUBJECT = "subject"
        AGENT = "agent"
        SCOPE = "scope"
        DATASET = "dataset"
        ITEM = "item"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="legal_holds")
    target = models.CharField(max_length=16, choices=Target.choices)
    # The keyed hash of the end user id (governance.services.audit.subject_hash), never
    # the id itself: a hold outlives its release and the subject's erasure.
    subject = models.CharField(
        max_length=128, blank=True, help_text="keyed hash of the subject (target subject)"
    )
    agent = models.ForeignKey(
        "governance.Agent", null=True, blank=True, on_delete=models.PROTECT, related_name="legal_holds"
    )
    scope = models.CharField(max_length=16, blank=True)
    dataset = models.CharField(max_length=200, blank=True)
    # A plain id: memory sits above governance, and the hold outlives nothing it covers.
    item_id = models.UUIDField(null=True, blank=True)
    reason = models.CharField(max_length=1000)
    placed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    placed_at = models.DateTimeField(auto_now_add=True)
    released_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    released_at = models.DateTimeField(null=True, blank=True)
    release_reason = models.CharField(max_length=1000, blank=True)

    objects = LegalHoldQuerySet.as_manager()

    class Meta:
        ordering = ["-placed_at"]
        indexes = [models.Index(fields=["tenant", "released_at"], name="legal_hold_tenant_active")]
        constraints = [
            # Two-person rule, enforced by the database as well as the service.
            models.CheckConstraint(
                condition=Q(released_by__isnull=True) | ~Q(released_by=F("placed_by")),
                name="legal_hold_two_person_release",
            ),
            models.CheckConstraint(
                condition=Q(released_by__isnull=True, released_at__isnull=True)
                | Q(released_by__isnull=False, released_at__isnull=False),
                name="legal_hold_release_complete",
            ),
        ]

    def __str__(self) -> str:
        return f"hold {self.pk} on {self.target}"

    @property
    def is_active(self) -> bool:
        return self.released_at is None
