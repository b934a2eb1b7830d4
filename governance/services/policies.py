"""Agent memory policy versions (the PUT/restore routes come with the governance issue)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Max

from core.errors import InvalidInput
from governance.models import Agent, AgentPolicyVersion, User
from governance.policy import MemoryPolicy, PolicyError


@transaction.atomic
def policy_version_create(
    *,
    agent: Agent,
    policy: dict[str, Any],
    engine: str = AgentPolicyVersion.Engine.BUILTIN,
    created_by: User | None = None,
    note: str = "",
) -> AgentPolicyVersion:
    """Store a new immutable version; it is in force from the commit on."""
    try:
        validated = MemoryPolicy.from_json(policy)
    except PolicyError as exc:
        raise InvalidInput(str(exc), details={"fields": {f"policy.{exc.field}": [str(exc)]}}) from exc
    # Lock the agent row so two concurrent changes get distinct version numbers.
    Agent.objects.select_for_update().filter(pk=agent.pk).first()
    latest = AgentPolicyVersion.objects.filter(agent=agent).aggregate(n=Max("version"))["n"] or 0
    return AgentPolicyVersion.objects.create(
        agent=agent,
        version=latest + 1,
        engine=AgentPolicyVersion.Engine(engine),
        policy=validated.to_json(),
        created_by=created_by,
        note=note,
    )
