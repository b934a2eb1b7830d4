"""A deactivated agent keeps its memory but nobody acts as it: every memory route
answers 409 ``agent_inactive`` to callers who may see the agent, 404 to the rest, and
nothing is written. Found by the authorization matrix (fedmem_site/tests)."""

from __future__ import annotations

from conftest import assert_error
from governance.services.agents import agent_update
from memory.models import MemoryItem
from memory.tests.conftest import memories_url, recall_url, remember


def test_a_deactivated_agent_cannot_be_used_by_anyone(world, as_user, access):
    remember(access, "The invoice desk opens at nine.")
    agent_update(agent=world.agent, actor=world.admin, is_active=False)
    before = MemoryItem.objects.count()
    for user in (world.owner, world.admin):
        client = as_user(user)
        assert_error(
            client.post(memories_url(world.agent), {"content": "A new fact."}, format="json"),
            409,
            "agent_inactive",
        )
        assert_error(
            client.post(recall_url(world.agent), {"query": "invoice"}, format="json"), 409, "agent_inactive"
        )
        fed = client.post(
            f"/v1/memory/agents/{world.agent.pk}/federated/recall", {"query": "x"}, format="json"
        )
        assert_error(fed, 409, "agent_inactive")
        # Managing the agent still works: it can be seen and reactivated.
        assert client.get(f"/v1/agents/{world.agent.pk}").status_code == 200
    assert MemoryItem.objects.count() == before
    assert_error(as_user(world.outsider).get(memories_url(world.agent)), 404, "agent_not_found")
    assert_error(as_user(world.officer).get(memories_url(world.agent)), 403)

    agent_update(agent=world.agent, actor=world.admin, is_active=True)
    assert (
        as_user(world.owner)
        .post(memories_url(world.agent), {"content": "A new fact."}, format="json")
        .status_code
        == 201
    )
