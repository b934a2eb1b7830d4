"""Demo data: a tenant, one user per role, two agents with keys.

Idempotent. Credentials live in ``FEDMEM_DATA_DIR/demo-credentials.json`` (0600,
never in git) so each run prints the same logins; if that file is lost, the demo
passwords and keys are reset and written anew.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from governance.models import Agent, ApiKey, Role, User
from governance.services.agents import agent_create, api_key_create
from governance.services.tenancy import membership_grant, tenant_get_or_create

DEMO_TENANT = ("demo", "Demo Co")
DEMO_USERS: list[tuple[str, str]] = [
    ("admin", Role.PLATFORM_ADMIN),
    ("tenant-admin", Role.TENANT_ADMIN),
    ("developer", Role.DEVELOPER),
    ("officer", Role.SECURITY_OFFICER),
    ("officer2", Role.SECURITY_OFFICER),
    ("auditor", Role.AUDITOR),
]
DEMO_AGENTS: list[tuple[str, str]] = [
    ("support-bot", "Answers customer tickets; remembers preferences and past incidents."),
    ("ops-agent", "Watches deployments and records what caused each outage."),
]


def credentials_path() -> Path:
    return Path(settings.DATA_DIR) / "demo-credentials.json"


def _load() -> dict[str, Any]:
    path = credentials_path()
    if path.exists():
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
    return {}


def _save(data: dict[str, Any]) -> None:
    path = credentials_path()
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    path.chmod(0o600)


def demo_seed() -> dict[str, Any]:
    """Create or refresh the demo tenant; return {'users': {...}, 'agents': {...}}."""
    data = _seed(_load())
    # Written after the rows commit; if it were lost, the next run resets and rewrites it.
    _save(data)
    data["memories"] = _seed_memories(data)
    return data


# Apps above governance seed their own demo data for the demo agents (memory
# registers its memories when it loads): governance does not import them.
_MEMORY_SEEDERS: list[Callable[..., dict[str, Any]]] = []


def register_demo_memory_seeder(seeder: Callable[..., dict[str, Any]]) -> None:
    if seeder not in _MEMORY_SEEDERS:
        _MEMORY_SEEDERS.append(seeder)


def _seed_memories(data: dict[str, Any]) -> int:
    ids = [info["id"] for info in data["agents"].values()]
    agents = {agent.name: agent for agent in Agent.objects.filter(pk__in=ids)}
    return sum(int(seeder(agents=agents).get("memories", 0)) for seeder in _MEMORY_SEEDERS)


@transaction.atomic
def _seed(saved: dict[str, Any]) -> dict[str, Any]:
    users_out: dict[str, dict[str, str]] = {}
    agents_out: dict[str, dict[str, str]] = {}
    tenant = tenant_get_or_create(slug=DEMO_TENANT[0], name=DEMO_TENANT[1])

    for username, role in DEMO_USERS:
        user, created = User.objects.get_or_create(username=username)
        password = saved.get("users", {}).get(username, {}).get("password")
        if created or not password or not user.check_password(password):
            password = secrets.token_urlsafe(9)
            user.set_password(password)
            user.is_staff = role == Role.PLATFORM_ADMIN
            user.is_superuser = role == Role.PLATFORM_ADMIN
            user.save()
        membership_grant(user=user, tenant=tenant, role=role)
        users_out[username] = {"password": password, "role": str(role)}

    developer = User.objects.get(username="developer")
    for name, description in DEMO_AGENTS:
        agent = Agent.objects.filter(tenant=tenant, name=name).first()
        if agent is None:
            agent = agent_create(tenant=tenant, name=name, description=description, created_by=developer)
        remembered = saved.get("agents", {}).get(name, {})
        key = ApiKey.objects.active().filter(agent=agent, prefix=remembered.get("prefix", "")).first()
        secret = remembered.get("key")
        if key is None or not secret:
            key, secret = api_key_create(tenant=tenant, agent=agent, name="demo", created_by=developer)
        agents_out[name] = {"id": str(agent.pk), "key": secret, "prefix": key.prefix}

    return {"tenant": DEMO_TENANT[0], "users": users_out, "agents": agents_out}
