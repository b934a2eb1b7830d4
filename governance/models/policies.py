"""Agent memory policy: immutable, numbered versions; the newest one is in force.

Each change makes a new row (restore copies an old version into a new one), so
the history of what an agent was allowed to do is never rewritten. The JSON is
validated by :class:`governance.policy.MemoryPolicy` before it is stored.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from .restricted import RestrictedQuerySet


class PolicyVersionQuerySet(RestrictedQuerySet["AgentPolicyVersion"]):
    """The one place that knows "the policy in force" is the newest version."""

    def newest_first(self, agent: Any) -> PolicyVersionQuerySet:
        """An agent's versions, the one in force first (``.first()`` is it, or None)."""
        return self.filter(agent=agent).order_by("-version")

    def in_force(self) -> PolicyVersionQuerySet:
        """The version in force of every agent in the queryset, one row each."""
        return self.order_by("agent_id", "-version").distinct("agent_id")


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

    objects = PolicyVersionQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "version"], name="policy_unique_version_per_agent"),
        ]
        ordering = ["agent", "-version"]

    def __str__(self) -> str:
        return f"{self.agent_id} v{self.version}"
