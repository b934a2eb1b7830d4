"""Load the demo graph datasets (memory.graph_datasets) into a tenant.

Each domain's facts are written by its own two agents, each fact in its own
session, in organization scope (so every agent of the tenant can follow a chain
across the agents that told it); the agents' policies get the organization scope
for reading and writing. Writes go through the ordinary batch service (policy,
embedding, dedup, history, extraction enqueued on commit); a rerun writes only
what is missing. ``extract_now`` also runs extraction in this process, so the
graph is ready when the call returns (without a worker).
"""

from __future__ import annotations

from typing import Any

from core.vocabulary import Scope
from governance.models import Agent, Tenant
from governance.selectors import memory_policy_for
from governance.services.agents import agent_create
from governance.services.policies import policy_version_create
from memory.enforcement import system_access
from memory.graph_datasets import AGENTS, facts
from memory.models import MemoryItem
from memory.services.items import MemoryDraft, memory_remember_batch
from memory.text import content_hash

SOURCE = "demo-graph"


def _agent(tenant: Tenant, name: str, created_by: Any) -> Agent:
    agent = Agent.objects.filter(tenant=tenant, name=name).first() or agent_create(
        tenant=tenant, name=name, description="Demo graph dataset agent", created_by=created_by
    )
    policy = memory_policy_for(agent)
    org = Scope.ORGANIZATION.value
    if org not in policy.read_scopes or org not in policy.write_scopes:
        data = policy.to_json()
        data["read_scopes"] = [*policy.read_scopes, *([org] if org not in policy.read_scopes else [])]
        data["write_scopes"] = [*policy.write_scopes, *([org] if org not in policy.write_scopes else [])]
        policy_version_create(agent=agent, policy=data, created_by=created_by, note="demo graph datasets")
    return agent


def graph_demo_load(
    *, tenant: Tenant, created_by: Any = None, domains: list[str] | None = None, extract_now: bool = False
) -> dict[str, Any]:
    from memory.extraction.pipeline import extract_item

    wanted = facts(domains)
    by_agent: dict[str, list[Any]] = {}
    for fact in wanted:
        by_agent.setdefault(fact.agent, []).append(fact)
    created: list[Any] = []
    for name in sorted(by_agent):
        agent = _agent(tenant, name, created_by)
        have = set(MemoryItem.objects.filter(agent=agent).values_list("content_hash", flat=True))
        drafts: list[MemoryDraft | Any] = [
            MemoryDraft(
                content=f.content, scope=Scope.ORGANIZATION.value, kind="episodic", session_id=f.session,
                source=SOURCE, metadata={"dataset": f.domain},
            )
            for f in by_agent[name]
            if content_hash(f.content) not in have
        ]  # fmt: skip
        access = system_access(agent)
        for start in range(0, len(drafts), 100):
            results = memory_remember_batch(access=access, drafts=drafts[start : start + 100], via="demo")
            created += [r.outcome.item.pk for r in results if r.outcome is not None and r.outcome.created]
    if extract_now:
        for pk in created:
            extract_item(pk)
    domains_loaded = sorted({f.domain for f in wanted})
    agents = sorted({a for d in domains_loaded for a in AGENTS[d]})
    return {"facts": len(wanted), "created": len(created), "domains": domains_loaded, "agents": agents}
