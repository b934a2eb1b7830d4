"""Agents, their object permissions and their API keys."""

from __future__ import annotations

import secrets
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from guardian.shortcuts import assign_perm, get_user_perms, remove_perm

from core.errors import AgentExists, InvalidInput, NotAMember, TooManyKeys
from governance.authentication import KEY_PREFIX, hash_key
from governance.models import Agent, ApiKey, Membership, Tenant, User
from governance.models.agents import AgentPermission
from governance.services.audit import audit_record

MAX_ACTIVE_KEYS = 20


@transaction.atomic
def agent_create(*, tenant: Tenant, name: str, description: str = "", created_by: User | None) -> Agent:
    name = name.strip()
    if not name:
        raise InvalidInput(
            "The agent needs a name.", details={"fields": {"name": ["This field may not be blank."]}}
        )
    try:
        with transaction.atomic():
            agent = Agent.objects.create(
                tenant=tenant, name=name, description=description, created_by=created_by
            )
    except IntegrityError as exc:
        raise AgentExists(f"An agent named {name!r} already exists in this tenant.") from exc
    if created_by is not None:
        for permission in AgentPermission:
            assign_perm(f"governance.{permission}", created_by, agent)
    audit_record(
        tenant=tenant, actor=created_by, action="agent.created", target=agent, data={"name": agent.name}
    )
    return agent


@transaction.atomic
def agent_update(
    *,
    agent: Agent,
    actor: Any,
    name: str | None = None,
    description: str | None = None,
    is_active: bool | None = None,
) -> Agent:
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    if name is not None:
        agent.name = name.strip()
        if not agent.name:
            raise InvalidInput(
                "The agent needs a name.", details={"fields": {"name": ["This field may not be blank."]}}
            )
    if description is not None:
        agent.description = description
    if is_active is not None:
        agent.is_active = is_active
    try:
        with transaction.atomic():
            agent.save()
    except IntegrityError as exc:
        raise AgentExists(f"An agent named {agent.name!r} already exists in this tenant.") from exc
    changed = {k: v for k, v in {"name": name, "is_active": is_active}.items() if v is not None}
    audit_record(tenant=agent.tenant, actor=actor, action="agent.updated", target=agent, data=changed)
    return agent


@transaction.atomic
def agent_grant(*, agent: Agent, user: User, permission: str, actor: Any) -> None:
    if not Membership.objects.filter(user=user, tenant=agent.tenant).exists():
        # A grant to an outsider would be inert (the gate requires membership); refuse it loudly.
        raise NotAMember("That user is not a member of the agent's tenant.")
    if str(AgentPermission(permission)) not in get_user_perms(user, agent):
        assign_perm(f"governance.{AgentPermission(permission)}", user, agent)
        audit_record(
            tenant=agent.tenant,
            actor=actor,
            action="agent.permission.granted",
            target=agent,
            data={"user_id": user.pk, "permission": str(permission)},
        )


@transaction.atomic
def agent_revoke(*, agent: Agent, user: User, permission: str, actor: Any) -> None:
    if str(AgentPermission(permission)) in get_user_perms(user, agent):
        remove_perm(f"governance.{AgentPermission(permission)}", user, agent)
        audit_record(
            tenant=agent.tenant,
            actor=actor,
            action="agent.permission.revoked",
            target=agent,
            data={"user_id": user.pk, "permission": str(permission)},
        )


def _new_secret() -> tuple[str, str]:
    prefix = secrets.token_hex(6)
    return prefix, f"{KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"


@transaction.atomic
def api_key_create(
    *,
    tenant: Tenant,
    name: str,
    agent: Agent | None = None,
    user: User | None = None,
    created_by: User | None = None,
) -> tuple[ApiKey, str]:
    """Create a key and return it with its secret — the only time the secret exists."""
    if (agent is None) == (user is None):
        raise ValueError("a key belongs to exactly one agent or one user")
    name = name.strip()
    if not name:
        raise InvalidInput(
            "The key needs a name.", details={"fields": {"name": ["This field may not be blank."]}}
        )
    owner_keys = (
        ApiKey.objects.active().filter(agent=agent)
        if agent
        else ApiKey.objects.active().filter(user=user, tenant=tenant)
    )
    if owner_keys.count() >= MAX_ACTIVE_KEYS:
        raise TooManyKeys(f"At most {MAX_ACTIVE_KEYS} active keys; revoke one first.")
    prefix, secret = _new_secret()
    key = ApiKey.objects.create(
        tenant=tenant,
        agent=agent,
        user=user,
        name=name,
        prefix=prefix,
        key_hash=hash_key(secret),
        created_by=created_by,
    )
    owner = {"agent_id": str(agent.pk)} if agent else {"user_id": user.pk}  # type: ignore[union-attr]
    audit_record(
        tenant=tenant,
        actor=created_by,
        action="api_key.created",
        target=key,
        data={"prefix": key.prefix, "name": key.name, **owner},
    )
    return key, secret


@transaction.atomic
def api_key_revoke(*, key: ApiKey, actor: Any) -> ApiKey:
    # Row lock so two revocations record one time.
    key = ApiKey.objects.select_for_update().get(pk=key.pk)
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        audit_record(
            tenant=key.tenant, actor=actor, action="api_key.revoked", target=key, data={"prefix": key.prefix}
        )
    return key
