"""POST /v1/memory/agents/{agent_id}/federated/recall over real local engines."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from conftest import assert_error
from providers import contracts
from providers.models import AccessControl
from providers.tests.engines import custom_engine, declare


@pytest.fixture(autouse=True)
def providers_only():
    """These tests are about provider engines; the builtin source has its own module."""
    from providers import federation
    from providers.builtin import builtin_source

    federation.register_builtin_source(None)
    yield
    federation.register_builtin_source(builtin_source)


@pytest.fixture(autouse=True)
def no_isolation_required(world):
    """Most engines here are shared custom engines guaranteeing no isolation; the
    default policy requires logical isolation, so these agents' policies lower it
    (the isolation tests raise it again per request)."""
    from governance.services.policies import policy_version_create

    for agent in (world.agent, world.sibling):
        policy_version_create(agent=agent, policy={"required_isolation": "none"})


def url(agent) -> str:
    return f"/v1/memory/agents/{agent.pk}/federated/recall"


@pytest.fixture
def two_engines(world, local_server):
    first = custom_engine(
        [
            {"id": "m1", "kind": "fact", "text": "Alice prefers green tea", "score": 0.91},
            {"id": "m2", "kind": "fact", "text": "Alice lives in Lisbon", "score": 0.80},
        ],
        server=local_server(),
    )
    second = custom_engine(
        [
            {"id": "z9", "kind": "fact", "text": "alice prefers green tea.", "score": 14.2},
            {
                "id": "z8",
                "kind": "fact",
                "text": "Alice lives in Porto",
                "score": 9.1,
                "provenance": {"episode": "ep-7"},
            },
        ],
        server=local_server(),
    )
    declare("first", first.url)
    declare("second", second.url, tenant=world.tenant)
    return first, second


def test_recall_fuses_groups_and_flags_conflicts(world, two_engines, as_agent):
    response = as_agent(world.agent).post(url(world.agent), {"query": "alice", "top_k": 5}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ok"
    assert [(s["engine_id"], s["status"], s["count"]) for s in body["sources"]] == [
        ("first", "ok", 2),
        ("second", "ok", 2),
    ]
    top = body["results"][0]
    assert top["text"] == "Alice prefers green tea" and len(top["matches"]) == 2
    assert {m["score"] for m in top["matches"]} == {0.91, 14.2}  # kept, never compared
    for match in top["matches"]:
        assert contracts.errors("hit", match) == []
    lisbon = next(g for g in body["results"] if g["text"] == "Alice lives in Lisbon")
    assert lisbon["conflict"]["with"] == [{"kind": "fact", "text": "Alice lives in Porto"}]
    recall = next(r for r in two_engines[0].requests if r.path == "/recall")
    assert recall.json["namespace"] == {"tenant": "acme", "agent_id": str(world.agent.pk)}


def test_users_with_can_invoke_may_recall(world, two_engines, as_user):
    assert as_user(world.owner).post(url(world.agent), {"query": "alice"}, format="json").status_code == 200
    assert as_user(world.admin).post(url(world.agent), {"query": "alice"}, format="json").status_code == 200


def test_access_is_checked(world, two_engines, as_user, as_agent):
    assert_error(APIClient().post(url(world.agent), {"query": "x"}, format="json"), 401)
    for client, agent in [
        (as_user(world.teammate), world.agent),  # no grant
        (as_user(world.auditor), world.agent),  # viewer only
        (as_agent(world.sibling), world.agent),  # another agent's key
        (as_user(world.owner), world.foreign_agent),  # another tenant
        (as_agent(world.foreign_agent), world.agent),
    ]:
        assert_error(client.post(url(agent), {"query": "x"}, format="json"), 404, "agent_not_found")


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"query": ""},
        {"query": "x", "top_k": 0},
        {"query": "x", "top_k": 51},
        {"query": "x", "timeout_ms": 5},
        {"query": "x", "engines": []},
        {"query": "x", "isolation": "total"},
        {"query": "x" * 4001},
        {"query": "x", "user_id": "../etc"},
        {"query": "x", "session_id": "a b"},
        {"query": "x", "user_id": "u" * 200},
    ],
)
def test_bad_input_is_400(world, two_engines, as_agent, body):
    assert_error(as_agent(world.agent).post(url(world.agent), body, format="json"), 400, "validation_error")


def test_unknown_or_foreign_engines_are_404(world, two_engines, local_server, as_agent):
    declare("globex-only", custom_engine(server=local_server()).url, tenant=world.other_tenant)
    client = as_agent(world.agent)
    for engines in (["nope"], ["first", "globex-only"]):
        assert_error(
            client.post(url(world.agent), {"query": "x", "engines": engines}, format="json"),
            404,
            "engine_not_found",
        )


def test_an_engine_without_recall_is_422(world, local_server, as_agent):
    declare(
        "health-only",
        custom_engine(server=local_server()).url,
        options={"capabilities": ["get_health"]},
    )
    error = assert_error(
        as_agent(world.agent).post(
            url(world.agent), {"query": "x", "engines": ["health-only"]}, format="json"
        ),
        422,
        "memory_capability_unsupported",
    )
    assert error["details"]["operation"] == "recall"


def test_required_isolation_above_the_engines_is_422(world, two_engines, as_agent):
    client = as_agent(world.agent)
    body = {"query": "alice", "engines": ["first", "second"], "isolation": "dedicated"}
    error = assert_error(
        client.post(url(world.agent), body, format="json"), 422, "memory_isolation_insufficient"
    )
    assert error["details"] == {
        "engine_id": "first",
        "engine_isolation": "none",
        "required_isolation": "dedicated",
    }
    # By default, engines below the required isolation are left out, not failed.
    response = client.post(url(world.agent), {"query": "alice", "isolation": "dedicated"}, format="json")
    assert [s["engine_id"] for s in response.json()["sources"]] == ["second"]


def test_one_engine_down_is_partial(world, two_engines, as_agent):
    two_engines[1].stop()
    body = as_agent(world.agent).post(url(world.agent), {"query": "alice"}, format="json").json()
    assert body["status"] == "partial"
    down = body["sources"][1]
    assert down["status"] == "unavailable" and down["error"]["retryable"] is True
    assert [len(g["matches"]) for g in body["results"]] == [1, 1]


def test_every_engine_down_is_failed_never_an_empty_ok(world, two_engines, as_agent):
    for server in two_engines:
        server.stop()
    response = as_agent(world.agent).post(url(world.agent), {"query": "alice"}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "failed" and body["results"] == []
    assert all(s["status"] == "unavailable" and s["error"] for s in body["sources"])


def test_an_engine_answering_errors_is_error(world, local_server, as_agent):
    declare("broken", custom_engine(server=local_server(), status=500).url)
    body = as_agent(world.agent).post(url(world.agent), {"query": "x"}, format="json").json()
    assert body["status"] == "failed"
    assert body["sources"][0]["status"] == "error" and body["sources"][0]["error"]["retryable"] is True


def test_a_hung_engine_is_timed_out_and_the_rest_answer(world, two_engines, local_server, as_agent):
    declare(
        "hung",
        custom_engine([{"id": "h", "kind": "fact", "text": "late"}], delay=30, server=local_server()).url,
    )
    body = (
        as_agent(world.agent)
        .post(url(world.agent), {"query": "alice", "timeout_ms": 1500}, format="json")
        .json()
    )
    assert body["status"] == "partial"
    hung = next(s for s in body["sources"] if s["engine_id"] == "hung")
    assert hung["status"] == "timed_out" and hung["count"] == 0
    assert all(g["text"] != "late" for g in body["results"])


def test_no_usable_engine_is_422(world, as_agent):
    assert_error(
        as_agent(world.agent).post(url(world.agent), {"query": "x"}, format="json"),
        422,
        "memory_no_engines",
    )


def test_the_builtin_engine_is_reported_until_it_is_installed(world, two_engines, as_agent):
    body = (
        as_agent(world.agent)
        .post(url(world.agent), {"query": "alice", "engines": ["builtin", "first"]}, format="json")
        .json()
    )
    assert body["status"] == "partial"
    assert body["sources"][0] == {
        "engine_id": "builtin",
        "provider_id": "builtin",
        "status": "unavailable",
        "error": body["sources"][0]["error"],
        "latency_ms": body["sources"][0]["latency_ms"],
        "count": 0,
    }
    assert body["sources"][0]["error"]["reason"] == "not_installed"


def test_a_tenant_key_engine_without_the_tenants_key(world, two_engines, local_server, as_agent):
    declare("byok", custom_engine(server=local_server()).url, access_control=AccessControl.TENANT_KEY)
    client = as_agent(world.agent)
    defaults = client.post(url(world.agent), {"query": "alice"}, format="json").json()
    assert "byok" not in [s["engine_id"] for s in defaults["sources"]]  # left out of defaults
    named = client.post(
        url(world.agent), {"query": "alice", "engines": ["first", "byok"]}, format="json"
    ).json()
    assert named["sources"][1]["status"] == "error"
    assert named["sources"][1]["error"]["reason"] == "credential_missing"


def test_the_callers_trace_continues_to_every_engine(world, two_engines, as_agent):
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    as_agent(world.agent).post(url(world.agent), {"query": "alice"}, format="json", HTTP_TRACEPARENT=parent)
    for server in two_engines:
        recall = next(r for r in server.requests if r.path == "/recall")
        assert recall.headers["traceparent"].startswith("00-4bf92f3577b34da6a3ce929d0e0e4736-")


def test_recall_query_count_does_not_grow_with_engines(
    world, local_server, as_agent, django_assert_max_num_queries
):
    """Pinned: key lookup, agent gate, the agent's policy version, engines, the tenant's own references."""
    client = as_agent(world.agent)
    for index in range(6):
        declare(
            f"engine-{index}",
            custom_engine([{"id": "x", "kind": "fact", "text": f"fact {index}"}], server=local_server()).url,
            access_control=AccessControl.PLATFORM_KEY if index % 2 else AccessControl.NONE,
            credential_ref="env://FEDMEM_CRED_BENCH" if index % 2 else "",
        )
    client.post(url(world.agent), {"query": "fact"}, format="json")  # warm the key's last_used_at
    with django_assert_max_num_queries(7):
        body = client.post(url(world.agent), {"query": "fact"}, format="json").json()
    assert len(body["sources"]) == 6
    named = [f"engine-{index}" for index in range(6)]
    with django_assert_max_num_queries(7):
        client.post(url(world.agent), {"query": "fact", "engines": named}, format="json")


def test_user_and_session_narrow_the_namespace(world, two_engines, as_agent):
    body = {"query": "alice", "user_id": "alice@example.com", "session_id": "conv_1"}
    assert as_agent(world.agent).post(url(world.agent), body, format="json").status_code == 200
    recall = next(r for r in two_engines[0].requests if r.path == "/recall")
    assert recall.json["namespace"] == {
        "tenant": "acme",
        "agent_id": str(world.agent.pk),
        "user_id": "alice@example.com",
        "session_id": "conv_1",
    }
