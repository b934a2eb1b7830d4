"""The graph endpoints: discover, trace, causal_chain, what_if, supersede, revive,
history. Each permitted, with bad input, anonymous, with the wrong role and across
tenants; traversal never leaves the tenant; what_if changes nothing."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import connection
from rest_framework.test import APIClient

from conftest import assert_error
from memory.enforcement import system_access
from memory.models import MemoryItem, Supersession
from memory.tests.graph_helpers import DISTRACTOR, INCIDENT, fact


@pytest.fixture
def incident(access):
    items = [fact(access, text, session_id=session) for session, text in INCIDENT]
    fact(access, DISTRACTOR[1], session_id=DISTRACTOR[0])
    return items


def url(agent, name: str) -> str:
    return f"/v1/memory/agents/{agent.pk}/{name}"


def bodies(incident):
    return {
        "discover": {"query": "why did checkout fail", "hops": 2},
        "trace": {"content": "Verbose debug logging", "direction": "effects"},
        "causal_chain": {"from": "Verbose debug logging", "to": "lost revenue"},
        "what_if": {"item_id": str(incident[0].pk), "origin": "Verbose debug logging"},
    }


ENDPOINTS = ["discover", "trace", "causal_chain", "what_if"]


def test_trace_effects_crosses_facts_and_sessions(world, as_agent, incident):
    body = as_agent(world.agent).post(
        url(world.agent, "trace"), {"content": "verbose debug logging", "direction": "effects"}, format="json"
    )
    assert body.status_code == 200, body.content
    data = body.json()
    chain = [(h["cause"], h["effect"], h["item_id"]) for h in data["chain"]]
    assert chain[0] == ("Verbose debug logging", "a full disk on db-1", str(incident[0].pk))
    asserted = [h["item_id"] for h in data["chain"]]
    assert asserted == [str(i.pk) for i in incident]
    assert [t["span"] for t in data["terminals"]] == ["lost revenue for the quarter"]


def test_trace_causes_gives_root_cause(world, as_agent, incident):
    data = (
        as_agent(world.agent)
        .post(
            url(world.agent, "trace"), {"item_id": str(incident[3].pk), "direction": "causes"}, format="json"
        )
        .json()
    )
    assert [r["span"] for r in data["root_causes"]] == ["Verbose debug logging"]
    assert data["root_causes"] == data["terminals"]


def test_trace_is_bounded(world, as_agent, incident):
    data = (
        as_agent(world.agent)
        .post(
            url(world.agent, "trace"),
            {"content": "verbose debug logging", "direction": "effects", "max_depth": 2},
            format="json",
        )
        .json()
    )
    assert max(h["depth"] for h in data["chain"]) == 2 and data["truncated"] is True
    data = (
        as_agent(world.agent)
        .post(
            url(world.agent, "trace"),
            {"content": "verbose debug logging", "direction": "effects", "max_visited": 1},
            format="json",
        )
        .json()
    )
    assert data["visited"] == 1 and len(data["chain"]) == 1


def test_causal_chain_orders_hops_or_answers_null(world, as_agent, incident):
    client = as_agent(world.agent)
    data = client.post(
        url(world.agent, "causal_chain"),
        {"from": "verbose debug logging", "to": "lost revenue"},
        format="json",
    ).json()
    assert [h["item_id"] for h in data["chain"]] == [str(i.pk) for i in incident]
    none = client.post(
        url(world.agent, "causal_chain"),
        {"from": "lost revenue", "to": "verbose debug logging"},
        format="json",
    )
    assert none.status_code == 200 and none.json() == {"chain": None}


def table_fingerprint() -> dict[str, str]:
    out = {}
    with connection.cursor() as cursor:
        for model in apps.get_models():
            table = model._meta.db_table
            if table == "core_counter":
                continue  # rate-limit counters count every request by design; they hold no memory
            cursor.execute(
                f"SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM \"{table}\" t"
            )
            out[table] = cursor.fetchone()[0]
    return out


def test_what_if_reports_collapse_and_survival_and_changes_nothing(world, access, as_agent, incident):
    # A second, independent path to the crash: the crash survives losing the disk fact.
    fact(access, "A failed kernel upgrade caused the database crash.", session_id="s5")
    client = as_agent(world.agent)
    body = {"item_id": str(incident[0].pk), "origin": "Verbose debug logging", "direction": "effects"}
    # A first call lets authentication stamp the key's last use (at most once a minute).
    client.post(url(world.agent, "what_if"), body, format="json")
    before = table_fingerprint()
    response = client.post(url(world.agent, "what_if"), body, format="json")
    assert table_fingerprint() == before  # every table, byte for byte
    assert response.status_code == 200, response.content
    data = response.json()
    assert [e["item_id"] for e in data["pruned_edges"]] == [str(incident[0].pk)]
    collapsed = {c["span"] for c in data["collapsed"]}
    assert "a full disk on db-1" in collapsed
    assert "lost revenue for the quarter" in collapsed  # only reachable from the origin through it
    # Removing the crash fact instead: the chain after it collapses from the origin.
    data = client.post(
        url(world.agent, "what_if"),
        {"item_id": str(incident[1].pk), "origin": "Verbose debug logging"},
        format="json",
    ).json()
    assert "checkout failures" in {c["span"] for c in data["collapsed"]}


def test_what_if_survived_when_another_path_supports(world, access, as_agent, incident):
    # The same effect asserted a second time from the same cause, by another fact.
    twin = fact(access, "Verbose debug logging caused a full disk on db-1.", session_id="s6")
    data = (
        as_agent(world.agent)
        .post(
            url(world.agent, "what_if"),
            {"item_id": str(incident[0].pk), "origin": "Verbose debug logging"},
            format="json",
        )
        .json()
    )
    survived = {s["span"]: s["supported_by"] for s in data["survived"]}
    assert str(twin.pk) in survived["a full disk on db-1"]
    assert data["collapsed"] == []


def test_discover_returns_paths_with_bridges_and_cross_session(world, as_agent, incident):
    data = (
        as_agent(world.agent)
        .post(
            url(world.agent, "discover"),
            {"query": "verbose debug logging", "top_k": 1, "hops": 3},
            format="json",
        )
        .json()
    )
    by_id = {r["id"]: r for r in data["results"]}
    assert data["results"][0]["id"] == str(incident[0].pk) and data["results"][0]["kind"] == "seed"
    crash = by_id[str(incident[1].pk)]
    # In a memory this small every fact is a hybrid candidate (kind seed); what ranks
    # the chain's continuation is the graph score the causal link carries to it.
    assert crash["why"]["graph"] > 0
    assert set(crash["why"]) >= {"score", "relevance", "similarity", "lexical", "graph", "bridges", "links"}
    assert crash["relations"] == [
        {"cause": "a full disk on db-1", "effect": "The database crash happened", "cue": "because of"}
    ]
    assert str(incident[3].pk) in by_id  # three hops away


def test_discover_entity_bridge(world, access, as_agent):
    a = fact(access, "Priya owns the Falcon project.", session_id="a")
    b = fact(access, "The Falcon project ships in March.", session_id="b")
    data = (
        as_agent(world.agent)
        .post(
            url(world.agent, "discover"), {"query": "Who owns Falcon?", "top_k": 1, "hops": 1}, format="json"
        )
        .json()
    )
    by_id = {r["id"]: r for r in data["results"]}
    assert data["results"][0]["id"] == str(a.pk)
    assert by_id[str(b.pk)]["why"]["graph"] > 0  # the shared "Falcon project" carries graph mass


def test_no_traversal_crosses_tenants_even_through_a_same_named_entity(world, as_agent, incident):
    foreign = system_access(world.foreign_agent)
    # The other tenant continues the chain with the very same wording and entity names.
    leak = fact(foreign, "Lost revenue for the quarter caused layoffs at db-1.", user_id="x")
    fact(foreign, "Verbose debug logging led to a full disk on db-1.", user_id="x")
    client = as_agent(world.agent)
    data = client.post(
        url(world.agent, "discover"), {"query": "verbose debug logging", "hops": 4}, format="json"
    ).json()
    found = {r["id"] for r in data["results"]}
    assert str(leak.pk) not in found
    assert {str(i.tenant_id) for i in MemoryItem.objects.filter(pk__in=found)} == {str(world.tenant.pk)}
    trace = client.post(
        url(world.agent, "trace"), {"content": "verbose debug logging", "direction": "effects"}, format="json"
    ).json()
    assert str(leak.pk) not in {h["item_id"] for h in trace["chain"]}
    assert [t["span"] for t in trace["terminals"]] == ["lost revenue for the quarter"]
    chain = client.post(
        url(world.agent, "causal_chain"), {"from": "verbose debug logging", "to": "layoffs"}, format="json"
    ).json()
    assert chain == {"chain": None}


def test_isolate_confines_traversal_to_the_requested_scopes(world, access, as_agent):
    seed = fact(access, "The memory leak led to repeated restarts.", scope="agent")
    other = fact(access, "Repeated restarts caused alert fatigue.", scope="user", user_id="cust-1")
    client = as_agent(world.agent)
    open_ = client.post(
        url(world.agent, "discover"), {"query": "memory leak", "scopes": ["agent"], "top_k": 1}, format="json"
    ).json()
    assert str(other.pk) in {r["id"] for r in open_["results"]}
    closed = client.post(
        url(world.agent, "discover"),
        {"query": "memory leak", "scopes": ["agent"], "top_k": 1, "isolate": True},
        format="json",
    ).json()
    assert {r["id"] for r in closed["results"]} == {str(seed.pk)}


@pytest.mark.parametrize("name", ENDPOINTS)
def test_anonymous_is_401(world, incident, name):
    assert_error(APIClient().post(url(world.agent, name), bodies(incident)[name], format="json"), 401)


@pytest.mark.parametrize("name", ENDPOINTS)
def test_foreign_tenant_is_404(world, as_user, as_agent, incident, name):
    body = bodies(incident)[name]
    assert_error(as_user(world.outsider).post(url(world.agent, name), body, format="json"), 404)
    assert_error(as_agent(world.foreign_agent).post(url(world.agent, name), body, format="json"), 404)


@pytest.mark.parametrize("name", ENDPOINTS)
def test_wrong_role_is_refused(world, as_user, incident, name):
    body = bodies(incident)[name]
    # A teammate without a grant cannot see the agent; an auditor may view it but not invoke it.
    assert_error(as_user(world.teammate).post(url(world.agent, name), body, format="json"), 404)
    auditor = as_user(world.auditor).post(url(world.agent, name), body, format="json")
    assert auditor.status_code in (403, 404)
    assert_error(auditor, auditor.status_code)


@pytest.mark.parametrize("name", ENDPOINTS)
def test_owner_user_may_use_them(world, as_user, incident, name):
    response = as_user(world.owner).post(url(world.agent, name), bodies(incident)[name], format="json")
    assert response.status_code == 200, response.content


@pytest.mark.parametrize(
    ("name", "body", "field"),
    [
        ("discover", {}, "query"),
        ("discover", {"query": "x", "hops": 99}, "hops"),
        ("discover", {"query": "x", "scopes": ["galaxy"]}, "scopes"),
        ("discover", {"query": "x", "as_of": "yesterday"}, "as_of"),
        ("trace", {"direction": "effects"}, "item_id"),
        ("trace", {"content": "x", "direction": "sideways"}, "direction"),
        ("trace", {"content": "x", "direction": "effects", "max_visited": 0}, "max_visited"),
        ("causal_chain", {"to": "x"}, "from"),
        ("causal_chain", {"from": "x", "to": "y", "max_depth": 11}, "max_depth"),
        ("what_if", {"origin": "x"}, "item_id"),
        ("what_if", {"item_id": "not-a-uuid", "origin": "x"}, "item_id"),
    ],
)
def test_bad_input_names_the_field(world, as_agent, name, body, field):
    error = assert_error(as_agent(world.agent).post(url(world.agent, name), body, format="json"), 400)
    assert field in error["details"]["fields"]


def test_unknown_or_foreign_item_is_404(world, as_agent, incident):
    foreign = fact(system_access(world.foreign_agent), "Heavy fog caused the delay.", user_id="x")
    # Another agent's private fact of the same tenant, with an edge of its own.
    private = fact(system_access(world.sibling), "Black ice caused the crash.", user_id="x")
    client = as_agent(world.agent)
    # A fact the caller may read but with no causal edge: an empty trace, not a 404.
    plain = fact(system_access(world.agent), "The depot opens at six.", user_id="x")
    response = client.post(
        url(world.agent, "trace"), {"item_id": str(plain.pk), "direction": "causes"}, format="json"
    )
    assert response.status_code == 200 and response.json()["chain"] == []
    for item_id in (str(foreign.pk), str(private.pk), "00000000-0000-0000-0000-000000000000"):
        assert_error(
            client.post(
                url(world.agent, "trace"), {"item_id": item_id, "direction": "causes"}, format="json"
            ),
            404,
            "memory_not_found",
        )
        assert_error(
            client.post(url(world.agent, "what_if"), {"item_id": item_id, "origin": "fog"}, format="json"),
            404,
        )


# --- supersede, revive, history, as_of ---------------------------------------------


def item_url(agent, item_id, action: str) -> str:
    return f"/v1/memory/agents/{agent.pk}/memories/{item_id}/{action}"


def test_supersede_retires_the_old_fact_and_history_links_both(world, as_agent, access):
    old = fact(access, "The office is in Berlin.")
    client = as_agent(world.agent)
    response = client.post(
        item_url(world.agent, old.pk, "supersede"),
        {"content": "The office is in Munich.", "reason": "moved"},
        format="json",
    )
    assert response.status_code == 201, response.content
    new_id = response.json()["new"]["id"]
    assert response.json()["old"]["invalid_at"] is not None
    assert response.json()["new"]["extraction_status"] == "pending"
    old.refresh_from_db()
    assert old.invalid_at is not None
    # Listing and GET no longer show the old fact; history still does.
    assert_error(client.get(f"/v1/memory/agents/{world.agent.pk}/memories/{old.pk}"), 404)
    history = client.get(item_url(world.agent, old.pk, "history")).json()
    assert (
        history["superseded_by"][0]["item_id"] == new_id and history["superseded_by"][0]["reason"] == "moved"
    )
    assert [e["event"] for e in history["events"]] == ["created", "superseded"]
    new_history = client.get(item_url(world.agent, new_id, "history")).json()
    assert new_history["supersedes"][0]["item_id"] == str(old.pk)


def test_as_of_follows_supersede_and_revive(world, as_agent, access):
    client = as_agent(world.agent)
    old = fact(access, "The Falcon launch is planned for March.")
    t0 = old.valid_from
    new_id = client.post(
        item_url(world.agent, old.pk, "supersede"),
        {"content": "The Falcon launch is planned for June."},
        format="json",
    ).json()["new"]["id"]
    t1 = MemoryItem.objects.get(pk=new_id).valid_from
    revived = client.post(item_url(world.agent, old.pk, "revive"))
    assert revived.status_code == 201, revived.content
    third_id = revived.json()["new"]["id"]
    t2 = MemoryItem.objects.get(pk=third_id).valid_from

    def current(at) -> set[str]:
        data = client.post(
            url(world.agent, "discover"),
            {"query": "When is the Falcon launch planned?", "as_of": at.isoformat(), "hops": 1},
            format="json",
        ).json()
        return {r["content"] for r in data["results"] if "Falcon launch" in r["content"]}

    assert current(t0) == {"The Falcon launch is planned for March."}
    assert current(t1) == {"The Falcon launch is planned for June."}
    assert current(t2) == {"The Falcon launch is planned for March."}
    assert MemoryItem.objects.get(pk=new_id).invalid_at == t2
    everything = client.post(
        url(world.agent, "discover"),
        {"query": "When is the Falcon launch planned?", "include_superseded": True, "hops": 1},
        format="json",
    ).json()
    assert len([r for r in everything["results"] if "Falcon launch" in r["content"]]) == 3
    old_history = client.get(item_url(world.agent, old.pk, "history")).json()
    assert old_history["superseded_by"][0]["reverted_at"] is not None
    assert [e["event"] for e in old_history["events"]][-1] == "revived"


def test_supersede_bad_input_stores_nothing(world, as_agent, access):
    old = fact(access, "The office is in Berlin.")
    client = as_agent(world.agent)
    count = MemoryItem.objects.count()
    for body, field in (
        ({}, "content"),
        ({"content": "   "}, "content"),
        ({"content": old.content}, "content"),
    ):
        error = assert_error(
            client.post(item_url(world.agent, old.pk, "supersede"), body, format="json"), 400
        )
        assert field in error["details"]["fields"]
    assert MemoryItem.objects.count() == count and not Supersession.objects.exists()


def test_supersede_and_history_permissions(world, as_agent, as_user, access):
    old = fact(access, "The office is in Berlin.")
    body = {"content": "The office is in Munich."}
    assert_error(APIClient().post(item_url(world.agent, old.pk, "supersede"), body, format="json"), 401)
    assert_error(APIClient().get(item_url(world.agent, old.pk, "history")), 401)
    assert_error(
        as_user(world.teammate).post(item_url(world.agent, old.pk, "supersede"), body, format="json"), 404
    )
    assert_error(as_user(world.outsider).get(item_url(world.agent, old.pk, "history")), 404)
    # The sibling agent (same tenant) cannot reach another agent's memory.
    assert_error(
        as_agent(world.sibling).post(item_url(world.agent, old.pk, "supersede"), body, format="json"), 404
    )
    # An unknown or foreign item id under the caller's own agent is 404 too.
    foreign = fact(system_access(world.foreign_agent), "Globex is in Paris.", user_id="x")
    client = as_agent(world.agent)
    assert_error(client.post(item_url(world.agent, foreign.pk, "supersede"), body, format="json"), 404)
    assert_error(client.get(item_url(world.agent, foreign.pk, "history")), 404)
    assert_error(client.post(item_url(world.agent, old.pk, "revive")), 404)  # not retired
    assert not Supersession.objects.exists()


def test_supersede_refuses_held_memory(world, as_agent, access):
    held = fact(access, "Contract signed on May 3.", legal_hold=True)
    error = assert_error(
        as_agent(world.agent).post(
            item_url(world.agent, held.pk, "supersede"), {"content": "May 4."}, format="json"
        ),
        409,
        "memory_legal_hold",
    )
    assert error
    held.refresh_from_db()
    assert held.invalid_at is None


def test_recall_graph_mode_expands_seeds_with_chain_first(world, as_agent, incident):
    client = as_agent(world.agent)
    body = {"query": "verbose debug logging", "top_k": 4, "mode": "graph", "hops": 3}
    data = client.post(f"/v1/memory/agents/{world.agent.pk}/recall", body, format="json").json()
    assert data["mode"] == "graph"
    ids = [r["id"] for r in data["results"]]
    assert ids[0] == str(incident[0].pk) and data["results"][0]["graph"]["kind"] == "seed"
    # The chain's continuation is reached even though it shares no word with the query.
    assert str(incident[1].pk) in ids
    assert all("why" in r["graph"] for r in data["results"])
    scores = [r["score"] for r in data["results"]]
    assert scores[1:] == sorted(scores[1:], reverse=True)  # the best direct match is pinned first
    plain = client.post(
        f"/v1/memory/agents/{world.agent.pk}/recall", {**body, "mode": "hybrid"}, format="json"
    ).json()
    assert "graph" not in plain["results"][0] and plain["mode"] == "hybrid"


def test_recall_bad_mode_and_as_of(world, as_agent):
    client = as_agent(world.agent)
    recall = f"/v1/memory/agents/{world.agent.pk}/recall"
    error = assert_error(client.post(recall, {"query": "x", "mode": "telepathy"}, format="json"), 400)
    assert "mode" in error["details"]["fields"]
    error = assert_error(client.post(recall, {"query": "x", "as_of": "soon"}, format="json"), 400)
    assert "as_of" in error["details"]["fields"]


def test_recall_and_search_honour_as_of(world, as_agent, access):
    client = as_agent(world.agent)
    old = fact(access, "The office is in Berlin.")
    client.post(
        item_url(world.agent, old.pk, "supersede"), {"content": "The office is in Munich."}, format="json"
    )
    base = f"/v1/memory/agents/{world.agent.pk}"
    for route in ("recall", "memories/search"):
        then = client.post(
            f"{base}/{route}",
            {"query": "Where is the office?", "as_of": old.valid_from.isoformat()},
            format="json",
        ).json()
        now = client.post(f"{base}/{route}", {"query": "Where is the office?"}, format="json").json()
        both = client.post(
            f"{base}/{route}", {"query": "Where is the office?", "include_superseded": True}, format="json"
        ).json()
        assert [r["content"] for r in then["results"]] == ["The office is in Berlin."]
        assert [r["content"] for r in now["results"]] == ["The office is in Munich."]
        assert len(both["results"]) == 2
