"""Shared fixtures: named actors (owner / teammate / outsider) and API clients.

One embedded PostgreSQL serves the whole run (started when the test settings load);
pytest-django creates the test database in it once.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from rest_framework.test import APIClient

from governance.models import Agent, Role, Tenant, User
from governance.tests import factories as f


@dataclass
class World:
    tenant: Tenant
    other_tenant: Tenant
    owner: User  # developer who created `agent`
    teammate: User  # developer in the same tenant, no grant on `agent`
    outsider: User  # developer of another tenant
    admin: User  # tenant_admin of `tenant`
    officer: User
    auditor: User
    agent: Agent
    sibling: Agent  # same tenant, created by the admin
    foreign_agent: Agent  # other tenant


@pytest.fixture
def world(db) -> World:
    tenant = f.TenantFactory(slug="acme", name="Acme")
    other = f.TenantFactory(slug="globex", name="Globex")
    owner = f.member(tenant, Role.DEVELOPER, username="owner")
    teammate = f.member(tenant, Role.DEVELOPER, username="teammate")
    outsider = f.member(other, Role.DEVELOPER, username="outsider")
    admin = f.member(tenant, Role.TENANT_ADMIN, username="tadmin")
    officer = f.member(tenant, Role.SECURITY_OFFICER, username="officer")
    auditor = f.member(tenant, Role.AUDITOR, username="auditor")
    agent = f.agent(tenant, owner, name="support-bot")
    sibling = f.agent(tenant, admin, name="ops-agent")
    foreign = f.agent(other, outsider, name="globex-bot")
    return World(tenant, other, owner, teammate, outsider, admin, officer, auditor, agent, sibling, foreign)


def bearer(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


@pytest.fixture
def as_user():
    """APIClient authenticated with a personal key of ``user`` in ``tenant``."""

    def make(user: User, tenant: Tenant | None = None) -> APIClient:
        tenant = tenant or user.memberships.first().tenant
        return bearer(f.user_key(user, tenant))

    return make


@pytest.fixture
def as_agent():
    def make(agent: Agent) -> APIClient:
        return bearer(f.agent_key(agent))

    return make


def assert_error(response, status: int, code: str | None = None) -> dict:
    """Every error answers with the one documented body."""
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code
    return body["error"]
