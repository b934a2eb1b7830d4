from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from .restricted import RestrictedQuerySet
from .tenancy import Tenant


class AgentPermission(models.TextChoices):
    """Per-agent object permissions (django-guardian codenames)."""

    VIEWER = "viewer", "Can read the agent and its memory"
    EDITOR = "editor", "Can change the agent, its keys and its policy"
    CAN_INVOKE = "can_invoke", "Can call the memory API as the agent"


class AgentQuerySet(RestrictedQuerySet["Agent"]):
    """``restrict(principal, permission)`` is the one gate for agents (an
    :class:`AgentPermission` as the action); see governance.permissions."""


class Agent(models.Model):
    """An AI agent (service account) of a tenant; it authenticates with its API keys."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True, max_length=2000)
    is_active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = AgentQuerySet.as_manager()

    class Meta:
        default_permissions = ("add", "change", "delete", "view")
        permissions = AgentPermission.choices
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="agent_unique_name_per_tenant"),
        ]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ApiKeyQuerySet(RestrictedQuerySet["ApiKey"]):
    def active(self) -> ApiKeyQuerySet:
        return self.filter(revoked_at__isnull=True)


class ApiKey(models.Model):
    """A bearer key for an agent or a user, scoped to one tenant.

    The secret is shown once at creation; only its SHA-256 is stored (keys are
    high-entropy random strings, so a slow hash adds nothing). Keys are listed
    by their public prefix.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    agent = models.ForeignKey(
        "Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="api_keys"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="api_keys"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    key_hash = models.CharField(max_length=64)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(agent__isnull=False, user__isnull=True)
                | Q(agent__isnull=True, user__isnull=False),
                name="apikey_exactly_one_owner",
            ),
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
