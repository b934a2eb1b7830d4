"""The one place the agent memory policy is enforced.

Every read and write path of the builtin engine (API, batch, session messages,
demo seeding, and later MCP and federation) resolves a :class:`MemoryAccess` and
asks this module:

* :func:`check_write` — may this draft be stored at all (scope, kind,
  classification, retention, teams/projects, personal data)? A refusal is a 403
  ``memory_policy_violation`` naming the rule, raised before anything is stored;
* :func:`read_scopes` and :func:`visible_q` — which rows a read may see. The
  result is a SQL condition (tenant, scope keys, classification, validity and
  expiry), applied by the database before any ranking;
* :func:`modifiable_q` — which rows an update, delete or purge may touch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from django.utils import timezone

from core import generations
from core.errors import ErrorCode, Forbidden, InvalidInput
from core.vocabulary import AGENT_OWNED_SCOPES, Classification, Scope
from governance.models import Agent
from governance.models.agents import AgentPermission
from governance.permissions import is_agent
from governance.policy import MemoryPolicy
from governance.principals import identity_generation
from governance.selectors import access_agent


class PolicyViolation(Forbidden):
    code = ErrorCode.MEMORY_POLICY_VIOLATION

    def __init__(self, rule: str, message: str, **details: Any) -> None:
        super().__init__(
            f"Refused by the agent's memory policy ({rule}): {message}", details={"rule": rule, **details}
        )
        self.rule = rule


@dataclass(frozen=True)
class Actor:
    """Who performed a memory operation, as history and provenance record it."""

    type: str  # agent | user | system
    id: str
    name: str

    def as_json(self) -> dict[str, str]:
        return {"type": self.type, "id": self.id, "name": self.name}


SYSTEM_ACTOR = Actor("system", "", "system")


@dataclass(frozen=True)
class MemoryAccess:
    """An agent's memory as one caller may use it: the agent, its policy, the actor."""

    agent: Agent
    policy: MemoryPolicy
    actor: Actor
    # The subject a user caller's user-scoped reads and writes default to; agents
    # serve many end users and must name one.
    default_user_id: str = ""
    # The policy version's engine choice: (engine, mem0_instance, cognee_instance),
    # read with the policy in the same query (see memory.engines.plan_for).
    engine: tuple[str, str, str] = ("builtin", "", "")

    @property
    def tenant_id(self) -> Any:
        return self.agent.tenant_id


def memory_access(principal: Any, agent_id: Any) -> MemoryAccess:
    """Resolve the caller's access to an agent's memory: the agent's own key or a
    user holding can_invoke on it (anything else is the gate's 404), plus policy."""
    agent = access_agent(principal, agent_id, AgentPermission.CAN_INVOKE)
    if is_agent(principal):
        actor = Actor("agent", str(agent.pk), agent.name)
        default_user = ""
    else:
        actor = Actor("user", str(principal.pk), principal.get_username())
        default_user = principal.get_username()
    policy, engine = _policy_and_engine(agent, generation=identity_generation(principal))
    return MemoryAccess(agent=agent, policy=policy, actor=actor, default_user_id=default_user, engine=engine)


def memory_access_for(agent: Agent, actor: Actor, *, default_user_id: str = "") -> MemoryAccess:
    """Access for work a caller queued (a large ingest's job): the caller as the actor
    of record, the agent's policy as it is when the work runs."""
    policy, engine = _policy_and_engine(agent)
    return MemoryAccess(
        agent=agent, policy=policy, actor=actor, default_user_id=default_user_id, engine=engine
    )


def system_access(agent: Agent) -> MemoryAccess:
    """Access for platform-internal work (demo seeding, maintenance), still policy-bound."""
    policy, engine = _policy_and_engine(agent)
    return MemoryAccess(agent=agent, policy=policy, actor=SYSTEM_ACTOR, engine=engine)


# Per agent: the policy in force and its engine choice, each valid while the governance
# generation it was read under stands (policy versions are among the rows whose
# every change moves it; core.generations). Frozen values: handed out as they are.
_policies: generations.Cache[tuple[MemoryPolicy, tuple[str, str, str]]] = generations.Cache(copies=False)


def _policy_and_engine(
    agent: Agent, *, generation: int | None = None
) -> tuple[MemoryPolicy, tuple[str, str, str]]:
    """The policy in force and its version's engine choice, in one query, or none
    when it was read under ``generation`` (the request's key's) before."""
    from governance.models import AgentPolicyVersion
    from governance.selectors import memory_policy_from_stored

    cached = _policies.get(agent.pk, generation)
    if cached is not None:
        return cached
    row = (
        AgentPolicyVersion.objects.newest_first(agent)
        .values("policy", "engine", "mem0_instance", "cognee_instance")
        .first()
    )
    if row is None:
        found = memory_policy_from_stored(agent.pk, None), ("builtin", "", "")
    else:
        found = (
            memory_policy_from_stored(agent.pk, row["policy"]),
            (row["engine"], row["mem0_instance"], row["cognee_instance"]),
        )
    _policies.put(agent.pk, generation, found)
    return found


# --- writes -----------------------------------------------------------------------


def check_write(
    access: MemoryAccess,
    *,
    scope: str,
    kind: str | None = None,
    classification: Classification | None = None,
    retention_days: int | None = None,
    team: str = "",
    project: str = "",
) -> None:
    policy = access.policy
    if scope not in policy.write_scopes:
        raise PolicyViolation(
            "write_scopes", f"scope {scope!r} is not writable (allowed: {', '.join(policy.write_scopes)})."
        )
    _check_scope_grants(policy, scope, team=team, project=project, action="write")
    if scope == Scope.SESSION and not policy.modes.session:
        raise PolicyViolation("modes.session", "session memory is turned off for this agent.")
    if kind is not None and kind not in policy.allowed_kinds:
        raise PolicyViolation(
            "allowed_kinds", f"kind {kind!r} is not allowed (allowed: {', '.join(policy.allowed_kinds)})."
        )
    if classification is not None and classification > policy.max_classification_level:
        raise PolicyViolation(
            "max_classification",
            f"classification {Classification(classification).label!r} is above the agent's maximum "
            f"{policy.max_classification!r}.",
        )
    if (
        retention_days is not None
        and policy.retention_days is not None
        and retention_days > policy.retention_days
    ):
        raise PolicyViolation(
            "retention_days",
            f"retention of {retention_days} days is longer than the policy's {policy.retention_days}.",
        )


def check_personal_data(access: MemoryAccess, *, personal_data: bool, types: tuple[str, ...]) -> None:
    if personal_data and not access.policy.allow_personal_data:
        raise PolicyViolation(
            "allow_personal_data",
            "the content holds personal data and this agent may not store any.",
            personal_data_types=list(types),
        )


def _check_scope_grants(policy: MemoryPolicy, scope: str, *, team: str, project: str, action: str) -> None:
    if scope == Scope.GLOBAL and not policy.global_access:
        raise PolicyViolation("global_access", f"this agent may not {action} global memory.")
    if scope == Scope.TEAM and team and team not in policy.teams:
        raise PolicyViolation("teams", f"team {team!r} is not one of the agent's teams.")
    if scope == Scope.PROJECT and project and project not in policy.projects:
        raise PolicyViolation("projects", f"project {project!r} is not one of the agent's projects.")


def effective_retention_days(access: MemoryAccess, requested: int | None) -> int | None:
    return requested if requested is not None else access.policy.retention_days


# --- reads ------------------------------------------------------------------------


def read_scopes(access: MemoryAccess, requested: list[str] | None) -> tuple[str, ...]:
    """The scopes a read covers: the requested ones (all must be readable) or the policy's."""
    policy = access.policy
    scopes = tuple(dict.fromkeys(requested)) if requested else policy.read_scopes
    refused = [scope for scope in scopes if scope not in policy.read_scopes]
    if refused:
        raise PolicyViolation(
            "read_scopes", f"scope {refused[0]!r} is not readable (allowed: {', '.join(policy.read_scopes)})."
        )
    if Scope.GLOBAL in scopes and not policy.global_access:
        raise PolicyViolation("global_access", "this agent may not read global memory.")
    return scopes


@dataclass(frozen=True)
class Keys:
    """Narrowing keys of a read. In a recall, a scope whose key is missing contributes
    nothing (no session_id: no session memory) so one end user's memories never
    surface in another's conversation; listing and export are not narrowed."""

    user_id: str | None = None
    session_id: str | None = None
    team: str | None = None
    project: str | None = None
    narrow: bool = False


def current_q(at: Any = None, *, include_superseded: bool = False) -> Q:
    """Valid at ``at`` (default now). Retention is always measured against now: an
    expired item is gone, also for a question about the past."""
    now = timezone.now()
    moment = at or now
    q = Q(valid_from__lte=moment) & (Q(retention_until__isnull=True) | Q(retention_until__gt=now))
    if not include_superseded:
        q &= Q(invalid_at__isnull=True) | Q(invalid_at__gt=moment)
    return q


def _scope_q(access: MemoryAccess, scope: str, keys: Keys) -> Q | None:
    agent_id = access.agent.pk
    policy = access.policy
    has = Q(scopes__contains=[scope])
    if scope in AGENT_OWNED_SCOPES:
        q = has & Q(agent_id=agent_id)
        if scope == Scope.SESSION:
            if keys.session_id:
                q &= Q(session_id=keys.session_id)
            elif keys.narrow:
                return None
        if scope == Scope.USER:
            if keys.user_id:
                q &= Q(user_id=keys.user_id)
            elif keys.narrow:
                return None
        return q
    if scope == Scope.SHARED_AGENTS:
        return has & (Q(agent_id=agent_id) | Q(shared_with__contains=[agent_id]))
    if scope == Scope.TEAM:
        q = has & (Q(agent_id=agent_id) | Q(team__in=list(policy.teams)))
        return q & Q(team=keys.team) if keys.team else q
    if scope == Scope.PROJECT:
        q = has & (Q(agent_id=agent_id) | Q(project__in=list(policy.projects)))
        return q & Q(project=keys.project) if keys.project else q
    # organization and global: every agent of the tenant (global also needs the grant,
    # checked in read_scopes). The tenant stays a hard boundary either way.
    return has


def visible_q(
    access: MemoryAccess,
    scopes: tuple[str, ...],
    keys: Keys = Keys(),
    *,
    at: Any = None,
    include_expired: bool = False,
    include_superseded: bool = False,
) -> Q:
    """Rows a read may see. Always: the agent's tenant, classification at or below the
    policy's maximum, and (unless asked otherwise) valid now and not past retention."""
    q = Q(tenant_id=access.tenant_id, classification__lte=access.policy.max_classification_level)
    if not include_expired:
        q &= current_q(at, include_superseded=include_superseded)
    by_scope = [part for part in (_scope_q(access, scope, keys) for scope in scopes) if part is not None]
    if not by_scope:
        if keys.narrow:
            # Every scope asked for needs a key the request lacks: a client mistake,
            # not an empty memory (and a raw statement cannot compile an empty IN).
            raise _missing_keys(scopes)
        return Q(pk__isnull=True)
    either = by_scope[0]
    for part in by_scope[1:]:
        either |= part
    return q & either


def _missing_keys(scopes: tuple[str, ...]) -> InvalidInput:
    fields: dict[str, list[str]] = {}
    if Scope.SESSION in scopes:
        fields["session_id"] = ["Required when scopes name session memory and nothing else readable."]
    if Scope.USER in scopes:
        fields["user_id"] = ["Required when scopes name user memory and nothing else readable."]
    return InvalidInput(f"Invalid input: {', '.join(sorted(fields))}.", details={"fields": fields})


def modifiable_q(access: MemoryAccess) -> Q:
    """Rows an update or delete may touch: the agent's own items, in a writable scope,
    within its tenant and classification. Shared items written by another agent are
    read-only to this one."""
    policy = access.policy
    return Q(
        tenant_id=access.tenant_id,
        agent_id=access.agent.pk,
        scopes__overlap=list(policy.write_scopes),
        classification__lte=policy.max_classification_level,
    )
