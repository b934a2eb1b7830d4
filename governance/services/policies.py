"""Agent memory policy versions: change and restore, each a new immutable version.

Every change writes ``memory.policy.change`` (or ``memory.policy.restore``) to the
audit trail in the same transaction; a change of engine or engine instance also
writes ``memory.engine.change`` and a change of who the agent shares with
(``shared_with``, ``teams``, ``projects``, ``global_access``) writes ``memory.share``,
so the two decisions compliance asks about can be filtered without diffing JSON.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.db import transaction
from django.db.models import Max

from core.errors import InvalidInput, PolicyVersionNotFound, field_error
from governance.models import Agent, AgentPolicyVersion, User
from governance.policy import DEFAULT_POLICY, MemoryPolicy, PolicyError
from governance.services.audit import audit_record

SHARE_KEYS = ("shared_with", "teams", "projects", "global_access")
# Which instance field an engine choice needs, and the adapter kind that instance must have.
_ENGINE_INSTANCES = {
    AgentPolicyVersion.Engine.MEM0: ("mem0_instance",),
    AgentPolicyVersion.Engine.COGNEE: ("cognee_instance",),
}
_INSTANCE_PROVIDER = {"mem0_instance": "mem0", "cognee_instance": "cognee"}


def _validated_engine(*, agent: Agent, engine: str, mem0_instance: str, cognee_instance: str) -> None:
    """The engine choice names instances that exist for the agent's tenant.

    Governance sits below providers in the dependency order, so the engine model is
    looked up through the app registry instead of imported.
    """
    if engine not in AgentPolicyVersion.Engine.values:
        raise field_error("engine", "must be one of " + ", ".join(AgentPolicyVersion.Engine.values))
    given = {"mem0_instance": mem0_instance, "cognee_instance": cognee_instance}
    required = _ENGINE_INSTANCES.get(AgentPolicyVersion.Engine(engine), ())
    for field in required:
        if not given[field]:
            raise field_error(field, f"required when engine is {engine!r}")
    if engine == AgentPolicyVersion.Engine.HYBRID and not (mem0_instance or cognee_instance):
        raise field_error("mem0_instance", "hybrid needs mem0_instance or cognee_instance")
    if engine == AgentPolicyVersion.Engine.BUILTIN:
        for field, value in given.items():
            if value:
                raise field_error(field, "must be empty when engine is 'builtin'")
    engine_model = apps.get_model("providers", "EngineInstance")
    for field, value in given.items():
        if value and not (
            engine_model.objects.visible_to_tenant(agent.tenant)
            .filter(pk=value, provider=_INSTANCE_PROVIDER[field])
            .exists()
        ):
            raise field_error(field, f"no {_INSTANCE_PROVIDER[field]} engine instance {value!r}")


def _latest(agent: Agent) -> AgentPolicyVersion | None:
    return AgentPolicyVersion.objects.filter(agent=agent).order_by("-version").first()


def _store(
    *,
    agent: Agent,
    actor: Any,
    engine: str,
    mem0_instance: str,
    cognee_instance: str,
    policy: MemoryPolicy,
    note: str,
    restored_from: int | None,
) -> AgentPolicyVersion:
    # Lock the agent row so two concurrent changes get distinct version numbers and
    # each audits against the version it really replaced.
    Agent.objects.select_for_update().filter(pk=agent.pk).first()
    previous = _latest(agent)
    old_policy = MemoryPolicy.from_json(previous.policy) if previous else DEFAULT_POLICY
    old_engine = (
        (previous.engine, previous.mem0_instance, previous.cognee_instance)
        if previous
        else (AgentPolicyVersion.Engine.BUILTIN.value, "", "")
    )
    number = (AgentPolicyVersion.objects.filter(agent=agent).aggregate(n=Max("version"))["n"] or 0) + 1
    row = AgentPolicyVersion.objects.create(
        agent=agent,
        version=number,
        engine=AgentPolicyVersion.Engine(engine),
        mem0_instance=mem0_instance,
        cognee_instance=cognee_instance,
        policy=policy.to_json(),
        created_by=actor if isinstance(actor, User) else None,
        note=note,
    )
    old_json, new_json = old_policy.to_json(), policy.to_json()
    changed = sorted(key for key in new_json if new_json[key] != old_json[key])
    audit_record(
        tenant=agent.tenant,
        actor=actor,
        action="memory.policy.restore" if restored_from is not None else "memory.policy.change",
        target=agent,
        data={"version": number, "changed": changed, "restored_from": restored_from},
    )
    new_engine = (row.engine, mem0_instance, cognee_instance)
    if new_engine != old_engine:
        audit_record(
            tenant=agent.tenant,
            actor=actor,
            action="memory.engine.change",
            target=agent,
            data={
                "version": number,
                "from": dict(zip(("engine", "mem0_instance", "cognee_instance"), old_engine, strict=True)),
                "to": dict(zip(("engine", "mem0_instance", "cognee_instance"), new_engine, strict=True)),
            },
        )
    share_changes = {
        key: {"from": old_json[key], "to": new_json[key]} for key in SHARE_KEYS if key in changed
    }
    if share_changes:
        audit_record(
            tenant=agent.tenant,
            actor=actor,
            action="memory.share",
            target=agent,
            data={"version": number, **share_changes},
        )
    return row


@transaction.atomic
def policy_version_create(
    *,
    agent: Agent,
    policy: dict[str, Any],
    engine: str = AgentPolicyVersion.Engine.BUILTIN,
    mem0_instance: str = "",
    cognee_instance: str = "",
    created_by: Any = None,
    note: str = "",
) -> AgentPolicyVersion:
    """Store a new immutable version; it is in force from the commit on."""
    try:
        validated = MemoryPolicy.from_json(policy)
    except PolicyError as exc:
        raise InvalidInput(str(exc), details={"fields": {f"policy.{exc.field}": [str(exc)]}}) from exc
    _validated_engine(
        agent=agent, engine=engine, mem0_instance=mem0_instance, cognee_instance=cognee_instance
    )
    return _store(
        agent=agent,
        actor=created_by,
        engine=engine,
        mem0_instance=mem0_instance,
        cognee_instance=cognee_instance,
        policy=validated,
        note=note,
        restored_from=None,
    )


@transaction.atomic
def policy_version_restore(*, agent: Agent, version: int, actor: Any, note: str = "") -> AgentPolicyVersion:
    """Make a new version equal to an old one (history is never rewritten)."""
    old = AgentPolicyVersion.objects.filter(agent=agent, version=version).first()
    if old is None:
        raise PolicyVersionNotFound(f"Policy version {version} does not exist.")
    return _store(
        agent=agent,
        actor=actor,
        engine=old.engine,
        mem0_instance=old.mem0_instance,
        cognee_instance=old.cognee_instance,
        # An old version stored under a larger vocabulary is revalidated, never trusted.
        policy=MemoryPolicy.from_json(old.policy),
        note=note or f"restored from version {version}",
        restored_from=version,
    )
