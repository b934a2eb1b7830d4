from __future__ import annotations

import uuid

from django.contrib.auth.models import AbstractUser
from django.db import models


class User(AbstractUser):
    """A person using the console or the API. Roles come from tenant memberships."""

    class Meta:
        db_table = "governance_user"


class Tenant(models.Model):
    """An organization: the hard boundary no query, permission or traversal crosses."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    slug = models.SlugField(max_length=63, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Role(models.TextChoices):
    PLATFORM_ADMIN = "platform_admin", "Platform admin"
    TENANT_ADMIN = "tenant_admin", "Tenant admin"
    DEVELOPER = "developer", "Developer"
    SECURITY_OFFICER = "security_officer", "Security officer"
    AUDITOR = "auditor", "Auditor"


class Membership(models.Model):
    """A user's role in one tenant; a user may hold several roles in several tenants."""

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=32, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "tenant", "role"], name="membership_unique_role"),
        ]
        ordering = ["tenant__name", "role"]

    def __str__(self) -> str:
        return f"{self.user} · {self.role} @ {self.tenant}"
