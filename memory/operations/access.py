"""The one gate every surface passes to reach an agent's memory."""

from __future__ import annotations

from typing import Any

from core.errors import Forbidden, NotFound
from governance.models.agents import AgentPermission
from governance.selectors import access_agent
from memory.enforcement import MemoryAccess, memory_access


def agent_memory_access(principal: Any, agent_id: Any) -> MemoryAccess:
    """The caller's access to an agent's memory (REST, MCP and console alike)."""
    try:
        return memory_access(principal, agent_id)
    except NotFound:
        # Someone who may see the agent learns nothing new from a 403; everyone else
        # gets the gate's 404, so foreign ids stay unprobeable.
        try:
            access_agent(principal, agent_id, AgentPermission.VIEWER)
        except NotFound:
            raise
        raise Forbidden("You may view this agent but not use its memory (needs can_invoke).") from None
