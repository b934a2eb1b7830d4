"""The closed memory vocabularies shared by governance (policy) and memory (records).

They live here because governance must name them without importing the memory
app (dependencies point one way: memory -> governance -> core).
"""

from __future__ import annotations

from django.db import models


class Scope(models.TextChoices):
    """Where a memory is visible; see docs/memory-api.md for who reads each one."""

    SESSION = "session"
    USER = "user"
    AGENT = "agent"
    SHARED_AGENTS = "shared_agents"
    PROJECT = "project"
    TEAM = "team"
    ORGANIZATION = "organization"
    GLOBAL = "global"


# Scopes whose items belong to the writing agent; the others are shared in the tenant.
AGENT_OWNED_SCOPES = frozenset({Scope.SESSION, Scope.USER, Scope.AGENT})


class Kind(models.TextChoices):
    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"
    PREFERENCE = "preference"
    FACT = "fact"


class RecordKind(models.TextChoices):
    MESSAGE = "message"
    FACT = "fact"
    SUMMARY = "summary"
    EPISODE = "episode"
    PINNED_CONTEXT = "pinned_context"
    DOCUMENT = "document"
    ENTITY = "entity"
    EDGE = "edge"


class Classification(models.IntegerChoices):
    """Ordered sensitivity levels; stored as integers so SQL can compare them."""

    PUBLIC = 0, "public"
    INTERNAL = 1, "internal"
    CONFIDENTIAL = 2, "confidential"
    RESTRICTED = 3, "restricted"

    @classmethod
    def from_name(cls, name: str) -> Classification:
        for member in cls:
            if member.label == name:
                return member
        raise ValueError(f"unknown classification {name!r}")


CLASSIFICATION_NAMES = [str(c.label) for c in Classification]
