"""Agents, their object permissions and their API keys."""

from __future__ import annotations

import secrets

from django.db import IntegrityError, transaction
from django.utils import timezone
from guardian.shortcuts import assign_perm, remove_perm

from core.errors import Conflict, InvalidInput
from governance.authentication import KEY_PREFIX, hash_key
from governance.models import Agent, ApiKey, Membership, Tenant, User
from governance.models.agents import AgentPermission

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
        raise Conflict(
            f"An agent named {name!r} already exists in this tenant.", code="agent_exists"
        ) from exc
    if created_by is not None:
        for permission in AgentPermission:
            assign_perm(f"governance.{permission}", created_by, agent)
    return agent


@transaction.atomic
def agent_update(
    *, agent: Agent, name: str | None = None, description: str | None = None, is_active: bool | None = None
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
        raise Conflict(
            f"An agent named {agent.name!r} already exists in this tenant.", code="agent_exists"
        ) from exc
    return agent


@transaction.atomic
def agent_grant(*, agent: Agent, user: User, permission: str) -> None:
    if not Membership.objects.filter(user=user, tenant=agent.tenant).exists():
        # A grant to an outsider would be inert (the gate requires membership); refuse it loudly.
        raise InvalidInput("That user is not a member of the agent's tenant.", code="not_a_member")
    assign_perm(f"governance.{AgentPermission(permission)}", user, agent)


@transaction.atomic
def agent_revoke(*, agent: Agent, user: User, permission: str) -> None:
    remove_perm(f"governance.{AgentPermission(permission)}", user, agent)


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
        raise Conflict(f"At most {MAX_ACTIVE_KEYS} active keys; revoke one first.", code="too_many_keys")
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
    return key, secret


@transaction.atomic
def api_key_revoke(*, key: ApiKey) -> ApiKey:
    # Row lock so two revocations record one time.
    key = ApiKey.objects.select_for_update().get(pk=key.pk)
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key
