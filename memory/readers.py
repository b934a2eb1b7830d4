"""One read model for every surface: what a caller may read of the builtin memory.

A :class:`MemoryReader` is a set of agent memories, each read through its own
policy (:func:`memory.enforcement.visible_q`), always inside one tenant. The API
and MCP read one agent's memory (:meth:`MemoryReader.of`, from the caller's
:class:`~memory.enforcement.MemoryAccess`); the console reads every agent its
user may view (:func:`memory.browse.console_reader`). Both hand the same object
to the traversal view and to the console's listings, so visibility is decided in
one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q

from core.errors import MemoryNotFound
from core.vocabulary import Scope
from governance.models import Agent
from governance.selectors import as_uuid
from memory.enforcement import MemoryAccess, PolicyViolation, read_scopes, visible_q
from memory.reasoning import graph


def lenient_scopes(access: MemoryAccess) -> tuple[str, ...]:
    """The policy's readable scopes; a policy listing global without the grant reads
    the rest, never global (the console lists, it does not refuse)."""
    try:
        return read_scopes(access, None)
    except PolicyViolation:
        return tuple(s for s in access.policy.read_scopes if s != Scope.GLOBAL)


@dataclass(frozen=True)
class MemoryReader:
    """Agents' memories as one caller may read them, each through its own policy.

    ``lenient``: a policy that cannot be read as written (global without the grant)
    drops the scope instead of refusing (the console); the API refuses (403)."""

    tenant_id: Any
    accesses: tuple[MemoryAccess, ...]
    lenient: bool = False

    @classmethod
    def of(cls, access: MemoryAccess) -> MemoryReader:
        """One agent's memory, as the API and MCP read it."""
        return cls(tenant_id=access.tenant_id, accesses=(access,))

    @property
    def agents(self) -> tuple[Agent, ...]:
        return tuple(access.agent for access in self.accesses)

    def agent(self, agent_id: Any) -> Agent | None:
        pk = as_uuid(agent_id)
        return next((a for a in self.agents if a.pk == pk), None)

    def scopes(self, access: MemoryAccess) -> tuple[str, ...]:
        return lenient_scopes(access) if self.lenient else read_scopes(access, None)

    def q(
        self,
        *,
        at: datetime | None = None,
        include_superseded: bool = False,
        scopes: tuple[str, ...] | None = None,
    ) -> Q:
        """Visible items: the union of every agent's condition (``scopes``: only these,
        for a one-agent reader whose caller named them)."""
        parts = [
            visible_q(
                access,
                scopes if scopes is not None else self.scopes(access),
                at=at,
                include_superseded=include_superseded,
            )
            for access in self.accesses
        ]
        if not parts:
            return Q(pk__in=[])
        either = parts[0]
        for part in parts[1:]:
            either |= part
        return either

    def view(
        self,
        *,
        at: datetime | None = None,
        include_superseded: bool = False,
        scopes: tuple[str, ...] | None = None,
    ) -> graph.View:
        """What a traversal of memory.reasoning may touch (tenant from any access)."""
        if not self.accesses:
            raise MemoryNotFound("Memory not found.")
        q = self.q(at=at, include_superseded=include_superseded, scopes=scopes)
        return graph.View(self.accesses[0], q)
