"""An agent's engine plan, read from its current policy version.

Its own module because both the router (:mod:`providers.routing`) and the
engine services (:mod:`providers.services`) need it, and the router uses the
services: a plan living in either one would make them import each other.
"""

from __future__ import annotations

from governance.models import Agent, AgentPolicyVersion
from governance.selectors import memory_policy_from_stored
from memory.engines import EnginePlan

Engine = AgentPolicyVersion.Engine


def policy_plan(agent: Agent) -> EnginePlan:
    """The agent's engine choice and required isolation, from its current policy version
    (one query)."""
    row = (
        AgentPolicyVersion.objects.filter(agent=agent)
        .order_by("-version")
        .values("engine", "mem0_instance", "cognee_instance", "policy")
        .first()
    )
    engine = row["engine"] if row else Engine.BUILTIN
    mem0 = row["mem0_instance"] if row and engine in (Engine.MEM0, Engine.HYBRID) else ""
    cognee = row["cognee_instance"] if row and engine in (Engine.COGNEE, Engine.HYBRID) else ""
    return EnginePlan(
        engine=engine,
        memory_engine=mem0 or None,
        knowledge_engine=cognee or None,
        required_isolation=memory_policy_from_stored(
            agent.pk, row["policy"] if row else None
        ).required_isolation,
    )
