"""An agent's engine plan, outside a request.

Its own module because both the router (:mod:`providers.routing`) and the
engine services (:mod:`providers.services`) need it, and the router uses the
services: a plan living in either one would make them import each other. The
plan itself is derived in one place, :func:`memory.engines.plan_for`, from the
policy version an access is built with (one query).
"""

from __future__ import annotations

from governance.models import Agent
from memory.enforcement import system_access
from memory.engines import EnginePlan, plan_for


def policy_plan(agent: Agent) -> EnginePlan:
    """The agent's engine choice and required isolation, from its current policy version."""
    return plan_for(system_access(agent))
