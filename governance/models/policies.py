"""Agent memory policy: immutable, numbered versions; the newest one is in force.

Each change makes a new row (restore copies an old version into a new one), so
the history of what an agent was allowed to do is never rewritten. The JSON is
validated by :class:`governance.policy.MemoryPolicy` before it is stored.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .restricted import RestrictedQuerySet


class AgentPolicyVersion(models.Model):
    """One version of an agent's memory policy (engine choice plus rules as JSON)."""

    class Engine(models.TextChoices):
        BUILTIN = "builtin"
        MEM0 = "mem0"
        COGNEE = "cognee"
        HYBRID = "hybrid"

    agent = models.ForeignKey("governance.Agent", on_delete=models.CASCADE, related_name="policy_versions")
    version = models.PositiveIntegerField()
    engine = models.CharField(max_length=16, choices=Engine.choices, default=Engine.BUILTIN)
    # Engine instance ids (providers.EngineInstance) as plain slugs: governance sits below
    # providers, and a removed instance must not rewrite the policy history.
    mem0_instance = models.CharField(max_length=63, blank=True)
    cognee_instance = models.CharField(max_length=63, blank=True)
    policy = models.JSONField(default=dict, blank=True)
    note = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = RestrictedQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "version"], name="policy_unique_version_per_agent"),
        ]
        ordering = ["agent", "-version"]

    def __str__(self) -> str:
        return f"{self.agent_id} v{self.version}"
