"""The --agent / --tenant options the backfill commands share."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from governance.models import Agent, Tenant
from governance.selectors import as_uuid


def add_selection_arguments(parser: Any) -> None:
    parser.add_argument("--agent", help="only this agent's items (agent id)")
    parser.add_argument("--tenant", help="only this tenant's items (tenant slug)")


def selection(options: dict[str, Any]) -> tuple[Any, Any]:
    """(agent id, tenant id) the options name, None where one is not given; an
    unknown agent or tenant is a CommandError."""
    agent_id = tenant_id = None
    if options["agent"]:
        pk = as_uuid(options["agent"])
        agent = Agent.objects.filter(pk=pk).first() if pk else None
        if agent is None:
            raise CommandError(f"no agent with id {options['agent']!r}")
        agent_id = agent.pk
    if options["tenant"]:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"no tenant with slug {options['tenant']!r}")
        tenant_id = tenant.pk
    return agent_id, tenant_id
