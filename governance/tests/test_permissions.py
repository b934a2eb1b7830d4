"""The agent permission gate: tenants are a hard boundary, roles and grants decide the rest."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, Permission

from governance.models import Agent, ApiKey, Membership, Role
from governance.models.agents import AgentPermission
from governance.permissions import AgentPrincipal
from governance.services.agents import agent_grant, agent_revoke
from governance.tests import factories as f

V, E, INVOKE = AgentPermission.VIEWER, AgentPermission.EDITOR, AgentPermission.CAN_INVOKE


def visible(principal, permission=V):
    return set(Agent.objects.restrict(principal, permission).values_list("name", flat=True))


def test_owner_sees_own_agent_with_every_permission(world):
    for permission in (V, E, INVOKE):
        assert visible(world.owner, permission) == {"support-bot"}


def test_teammate_without_grant_sees_nothing(world):
    assert visible(world.teammate) == set()


def test_grant_then_revoke(world):
    agent_grant(agent=world.agent, user=world.teammate, permission=V, actor=world.owner)
    assert visible(world.teammate, V) == {"support-bot"}
    assert visible(world.teammate, INVOKE) == set()  # viewer does not imply invoke
    agent_revoke(agent=world.agent, user=world.teammate, permission=V, actor=world.owner)
    assert visible(world.teammate, V) == set()


def test_invoke_implies_view_but_not_edit(world):
    agent_grant(agent=world.agent, user=world.teammate, permission=INVOKE, actor=world.owner)
    assert visible(world.teammate, V) == {"support-bot"}
    assert visible(world.teammate, E) == set()


def test_tenant_admin_sees_every_agent_of_own_tenant_only(world):
    for permission in (V, E, INVOKE):
        assert visible(world.admin, permission) == {"support-bot", "ops-agent"}


def test_compliance_roles_read_but_do_not_edit_or_invoke(world):
    for user in (world.officer, world.auditor):
        assert visible(user, V) == {"support-bot", "ops-agent"}
        assert visible(user, E) == set()
        assert visible(user, INVOKE) == set()


def test_outsider_never_sees_another_tenants_agents(world):
    assert visible(world.outsider) == {"globex-bot"}


def test_global_model_permission_does_not_leak_across_tenants(world):
    """Guardian's accept_global_perms default would return every agent of every tenant."""
    for codename in ("viewer", "editor", "can_invoke", "view_agent"):
        world.outsider.user_permissions.add(Permission.objects.get(codename=codename))
    world.outsider = type(world.outsider).objects.get(pk=world.outsider.pk)  # drop the perm cache
    assert visible(world.outsider, V) == {"globex-bot"}
    assert visible(world.outsider, E) == {"globex-bot"}


def test_superuser_flag_does_not_bypass_tenants(world):
    world.outsider.is_superuser = True
    world.outsider.save()
    assert visible(world.outsider) == {"globex-bot"}


def test_grant_to_a_non_member_is_refused(world):
    import pytest

    from core.errors import InvalidInput

    with pytest.raises(InvalidInput):
        agent_grant(agent=world.agent, user=world.outsider, permission=V, actor=world.owner)


def test_leaving_the_tenant_hides_granted_agents(world):
    assert visible(world.owner) == {"support-bot"}
    Membership.objects.filter(user=world.owner).delete()
    assert visible(world.owner) == set()


def test_agent_principal_sees_itself_for_read_and_invoke_only(world):
    key = ApiKey.objects.create(
        tenant=world.tenant, agent=world.agent, name="k", prefix="p" * 12, key_hash="h"
    )
    principal = AgentPrincipal(world.agent, key)
    assert visible(principal, V) == {"support-bot"}
    assert visible(principal, INVOKE) == {"support-bot"}
    assert visible(principal, E) == set()


def test_anonymous_sees_nothing(world):
    assert visible(AnonymousUser()) == set()


def test_gate_is_one_query_for_users(world, django_assert_max_num_queries):
    with django_assert_max_num_queries(1):
        list(Agent.objects.restrict(world.owner, V))


def test_platform_admin_has_admin_powers_in_its_tenant(world):
    platform_admin = f.member(world.tenant, Role.PLATFORM_ADMIN, username="padmin")
    assert visible(platform_admin, E) == {"support-bot", "ops-agent"}
