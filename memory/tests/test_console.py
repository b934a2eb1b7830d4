"""Console pages of the memory: browser (filters, search, keyset pages, pinned query
counts), item detail, causal trace and what-if, the graph JSON, and the
dashboard's memory panel. Each for its roles, anonymous and across tenants."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from governance.models.agents import AgentPermission
from governance.services.agents import agent_grant
from memory.enforcement import system_access
from memory.extraction.pipeline import mark_extraction
from memory.models import MemoryHistory, MemoryItem
from memory.services.items import MemoryDraft, memory_remember_batch
from memory.services.supersession import memory_supersede
from memory.tests.conftest import remember
from memory.tests.graph_helpers import DISTRACTOR, INCIDENT, fact

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def incident(access):
    items = [fact(access, text, session_id=session) for session, text in INCIDENT]
    fact(access, DISTRACTOR[1], session_id=DISTRACTOR[0])
    return items


@pytest.fixture
def foreign(world):
    """The same story in another tenant: same entity names, never reachable from acme."""
    access = system_access(world.foreign_agent)
    return [fact(access, text, session_id=session) for session, text in INCIDENT]


def rows(html: bytes) -> list[str]:
    body = re.search(rb'<div id="memory-list">(.*?)</table>', html, re.S).group(1).decode()
    return re.findall(r'href="/memories/([0-9a-f-]{36})/"', body)


# --- browser ------------------------------------------------------------------------


def test_anonymous_is_sent_to_login(client, world):
    for url in ("/memories/", "/graph/", "/graph/data/?q=disk", "/dashboard/memory/"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/"), url


def test_browser_full_page_and_fragment(client, world, incident):
    client.force_login(world.owner)
    full = client.get("/memories/")
    assert full.status_code == 200 and b"<html" in full.content
    assert set(rows(full.content)) >= {str(i.pk) for i in incident}
    fragment = client.get("/memories/", **HX)
    assert b"<html" not in fragment.content and b'id="memory-list"' in fragment.content


def test_browser_shows_only_what_the_users_agents_allow(client, world, incident):
    client.force_login(world.teammate)  # a developer without a grant on support-bot
    assert rows(client.get("/memories/").content) == []
    assert client.get(f"/memories/{incident[0].pk}/").status_code == 404
    agent_grant(agent=world.agent, user=world.teammate, permission=AgentPermission.VIEWER, actor=world.owner)
    client.force_login(world.teammate)
    assert str(incident[0].pk) in rows(client.get("/memories/").content)
    for user in (world.auditor, world.officer, world.admin):
        client.force_login(user)
        assert client.get(f"/memories/{incident[0].pk}/").status_code == 200


def test_foreign_tenant_items_and_agents_are_404(client, world, incident, foreign):
    client.force_login(world.owner)
    listed = rows(client.get("/memories/?validity=all").content)
    assert not set(listed) & {str(i.pk) for i in foreign}
    for url in (
        f"/memories/{foreign[0].pk}/",
        f"/memories/{foreign[0].pk}/trace/",
        f"/memories/{foreign[0].pk}/what-if/",
    ):
        assert client.get(url).status_code == 404, url
    assert client.get(f"/graph/data/?item={foreign[0].pk}").status_code == 404
    # Another tenant's agent is not a choice: the filter refuses it.
    response = client.get(f"/memories/?agent={world.foreign_agent.pk}")
    assert response.status_code == 400 and b'role="alert"' in response.content
    client.force_login(world.outsider)
    assert client.get(f"/memories/{incident[0].pk}/").status_code == 404
    assert not set(rows(client.get("/memories/").content)) & {str(i.pk) for i in incident}


def test_filters(client, world, access):
    a = remember(
        access, "The invoice run starts at noon.", scope="agent", kind="procedural", session_id="s-a"
    )
    b = remember(
        access,
        "Alice prefers email over phone.",
        scope="user",
        kind="preference",
        classification="confidential",
    )
    sibling = remember(system_access(world.sibling), "Ops rotates keys monthly.", scope="agent")
    a, b, sibling = a.item, b.item, sibling.item
    client.force_login(world.admin)
    assert set(rows(client.get("/memories/").content)) == {str(a.pk), str(b.pk), str(sibling.pk)}
    assert rows(client.get(f"/memories/?agent={world.sibling.pk}").content) == [str(sibling.pk)]
    assert rows(client.get("/memories/?kind=preference").content) == [str(b.pk)]
    assert rows(client.get("/memories/?scope=user").content) == [str(b.pk)]
    assert rows(client.get("/memories/?classification=2").content) == [str(b.pk)]
    assert rows(client.get("/memories/?session=s-a").content) == [str(a.pk)]
    assert rows(client.get("/memories/?q=invoice+noon").content) == [str(a.pk)]
    assert rows(client.get("/memories/?q=nothing+like+this").content) == []
    ranked = client.get("/memories/?q=how+does+Alice+like+to+be+contacted&mode=semantic")
    assert rows(ranked.content)[0] == str(b.pk) and b"ranked by hybrid retrieval" in ranked.content


def test_bad_filters_are_400_and_change_nothing(client, world, incident):
    client.force_login(world.owner)
    before = MemoryItem.objects.count()
    for query in ("as_of=yesterday-ish", "classification=9", "validity=maybe", "mode=psychic", "kind=dream"):
        response = client.get(f"/memories/?{query}", **HX)
        assert response.status_code == 400 and b'role="alert"' in response.content, query
        assert rows(response.content) == []
    # A garbled cursor is ignored (first page), never an error.
    assert client.get("/memories/?after=%%%garbage").status_code == 200
    assert MemoryItem.objects.count() == before


def test_validity_and_as_of(client, world, access, incident):
    old = incident[1]
    outcome = memory_supersede(
        access=access, item_id=old.pk, content="The database crash was due to a bad index."
    )
    client.force_login(world.owner)
    current = rows(client.get("/memories/").content)
    assert str(outcome.new.pk) in current and str(old.pk) not in current
    assert rows(client.get("/memories/?validity=superseded").content) == [str(old.pk)]
    both = rows(client.get("/memories/?validity=all").content)
    assert str(old.pk) in both and str(outcome.new.pk) in both
    moment = (outcome.new.valid_from - timedelta(microseconds=1)).isoformat()
    then = rows(client.get("/memories/", {"as_of": moment}).content)
    assert str(old.pk) in then and str(outcome.new.pk) not in then


def _seed_many(access, n: int) -> None:
    drafts = [
        MemoryDraft(content=f"Routine note number {i} about shelf {i % 7}.", scope="agent") for i in range(n)
    ]
    for start in range(0, n, 50):
        memory_remember_batch(access=access, drafts=drafts[start : start + 50])


def test_keyset_pages_walk_every_item_once(client, world, access):
    _seed_many(access, 120)
    client.force_login(world.owner)
    seen: list[str] = []
    url = "/memories/"
    pages = 0
    while url:
        html = client.get(url).content
        seen.extend(rows(html))
        pages += 1
        nxt = re.search(rb'href="(\?[^"]*after=[^"]+)"', html)
        url = "/memories/" + nxt.group(1).decode().replace("&amp;", "&") if nxt else ""
    assert pages == 3 and len(seen) == 120 and len(set(seen)) == 120
    expected = [
        str(pk)
        for pk in MemoryItem.objects.filter(agent=world.agent)
        .order_by("-created_at", "-id")
        .values_list("pk", flat=True)
    ]
    assert seen == expected
    # And back: "Newer" from the last page gives the middle page.
    prev = re.search(rb'href="(\?[^"]*before=[^"]+)"', html).group(1).decode().replace("&amp;", "&")
    assert rows(client.get("/memories/" + prev).content) == expected[50:100]


def test_list_query_count_is_pinned(client, world, access, django_assert_num_queries):
    _seed_many(access, 60)
    client.force_login(world.admin)
    client.get("/memories/")  # warm the session and the content types
    # session, user, tenants, roles (nav), viewable agents, policies in force (2),
    # and the page itself: the same on every page, whatever the table size.
    with django_assert_num_queries(PINNED_LIST_QUERIES):
        first = client.get("/memories/")
    after = re.search(rb'href="(\?[^"]*after=[^"]+)"', first.content).group(1).decode().replace("&amp;", "&")
    with django_assert_num_queries(PINNED_LIST_QUERIES):
        client.get("/memories/" + after)
    with django_assert_num_queries(PINNED_LIST_QUERIES):
        client.get("/memories/?q=shelf&kind=fact&scope=agent&validity=all")


PINNED_LIST_QUERIES = 8


# --- detail, trace, what-if ---------------------------------------------------------


def test_detail_shows_provenance_history_supersession_and_relations(client, world, access, incident):
    old = incident[1]
    outcome = memory_supersede(
        access=access,
        item_id=old.pk,
        content="The database crash was due to a bad index.",
        reason="postmortem",
    )
    client.force_login(world.owner)
    page = client.get(f"/memories/{old.pk}/").content.decode()
    assert "retired" in page and "Superseded by" in page and f"/memories/{outcome.new.pk}/" in page
    assert "postmortem" in page
    assert "a full disk on db-1" in page and "The database crash happened" in page  # the relation's spans
    assert f"/memories/{old.pk}/trace/?direction=causes" in page
    history = re.search(r'<table id="history">(.*?)</table>', page, re.S).group(1)
    events = list(MemoryHistory.objects.filter(item_id=old.pk).values_list("event", flat=True))
    assert events == ["created", "superseded"] and all(e in history for e in events)
    assert "via" in page or "actor" in page  # provenance keys rendered
    new_page = client.get(f"/memories/{outcome.new.pk}/").content.decode()
    assert "Supersedes" in new_page and f"/memories/{old.pk}/" in new_page


def test_trace_draws_the_chain(client, world, incident):
    client.force_login(world.owner)
    page = client.get(f"/memories/{incident[0].pk}/trace/?direction=effects").content.decode()
    hops = re.findall(r'data-depth="(\d)"', page)
    assert hops == ["1", "2", "3", "4"]
    assert "lost revenue for the quarter" in page
    causes = client.get(f"/memories/{incident[3].pk}/trace/?direction=causes", **HX)
    assert b"<html" not in causes.content and b"Root cause" in causes.content
    assert b"Verbose debug logging" in causes.content
    assert client.get(f"/memories/{incident[0].pk}/trace/?direction=sideways").status_code == 400


def test_what_if_reports_collapse_and_writes_nothing(client, world, incident):
    client.force_login(world.owner)
    before = (MemoryItem.objects.count(), MemoryHistory.objects.count())
    page = client.get(f"/memories/{incident[1].pk}/what-if/").content.decode()
    collapsed = re.search(r'<ul class="plain chain" id="collapsed">(.*?)</ul>', page, re.S).group(1)
    assert "lost revenue for the quarter" in collapsed
    assert (MemoryItem.objects.count(), MemoryHistory.objects.count()) == before


# --- graph JSON ---------------------------------------------------------------------


def test_graph_around_an_item(client, world, access, incident, foreign):
    outcome = memory_supersede(
        access=access, item_id=incident[2].pk, content="The database crash caused a checkout outage."
    )
    client.force_login(world.owner)
    data = client.get(f"/graph/data/?item={incident[1].pk}").json()
    ids = {n["id"] for n in data["nodes"]}
    assert data["focus"] == f"i:{incident[1].pk}"
    types = {e["type"] for e in data["edges"]}
    assert {"mention", "causes"} <= types
    causes = {(e["source"], e["target"]) for e in data["edges"] if e["type"] == "causes"}
    assert (f"i:{incident[0].pk}", f"i:{incident[1].pk}") in causes
    assert f"i:{incident[0].pk}" in ids
    # Never another tenant's facts, though they name the same entities.
    foreign_ids = {f"i:{i.pk}" for i in foreign}
    assert not ids & foreign_ids
    # Expanding the retired fact shows its successor, with the supersedes edge.
    retired = client.get(f"/graph/data/?item={incident[2].pk}").json()
    sup = [e for e in retired["edges"] if e["type"] == "supersedes"]
    assert [(e["source"], e["target"]) for e in sup] == [(f"i:{outcome.new.pk}", f"i:{incident[2].pk}")]
    node = {n["id"]: n for n in retired["nodes"]}
    assert node[f"i:{incident[2].pk}"]["current"] is False and node[f"i:{outcome.new.pk}"]["current"] is True
    # as_of before the supersession: the old fact was current, its successor not yet.
    moment = (outcome.new.valid_from - timedelta(microseconds=1)).isoformat()
    then = client.get("/graph/data/", {"item": str(incident[2].pk), "as_of": moment}).json()
    node = {n["id"]: n for n in then["nodes"]}
    assert node[f"i:{incident[2].pk}"]["current"] is True and node[f"i:{outcome.new.pk}"]["current"] is False


def test_graph_around_an_entity_and_a_query(client, world, incident, foreign):
    client.force_login(world.owner)
    data = client.get("/graph/data/?q=full+disk").json()
    entity = next(n for n in data["nodes"] if n["type"] == "entity" and "disk" in n["label"].lower())
    around = client.get(f"/graph/data/?entity={entity['entity_id']}").json()
    items = {n["item_id"] for n in around["nodes"] if n["type"] == "item"}
    assert {str(incident[0].pk), str(incident[1].pk)} <= items
    assert not items & {str(i.pk) for i in foreign}
    assert all(e["type"] == "mention" for e in around["edges"])
    # The foreign tenant's entity of the same name is not reachable from acme.
    from memory.models import Entity

    theirs = Entity.objects.get(
        tenant=world.other_tenant, normalized=Entity.objects.get(pk=entity["entity_id"]).normalized
    )
    assert client.get(f"/graph/data/?entity={theirs.pk}").status_code == 404


def test_graph_data_bad_input(client, world, incident):
    client.force_login(world.owner)
    for query in ("", "item=not-a-uuid", f"item={incident[0].pk}&q=disk", "entity=-3", "q=disk&as_of=soon"):
        response = client.get(f"/graph/data/?{query}")
        assert response.status_code == 400, query
        assert response.json()["error"]["code"] == "validation_error"
    assert client.get(f"/graph/data/?item={MemoryItem().pk}").status_code == 404
    client.force_login(world.teammate)
    assert client.get(f"/graph/data/?item={incident[0].pk}").status_code == 404


def test_graph_page_renders_for_everyone_with_a_tenant(client, world, incident):
    client.force_login(world.auditor)
    page = client.get(f"/graph/?item={incident[0].pk}")
    assert page.status_code == 200 and b'id="graph"' in page.content
    assert b"cytoscape-3.35.0.min.js" in page.content and b"onclick" not in page.content


# --- dashboard and nav --------------------------------------------------------------


def test_dashboard_memory_panel(client, world, access, incident):
    remember(access, "Alice prefers email.", scope="user", kind="preference")
    broken = remember(access, "This one will not extract.", scope="agent").item
    mark_extraction(broken.pk, status=MemoryItem.Extraction.FAILED, error="RuntimeError: parser crashed")
    client.force_login(world.owner)
    page = client.get("/")
    assert b'hx-get="/dashboard/memory/"' in page.content and b'hx-get="/dashboard/engines/"' in page.content
    panel = client.get("/dashboard/memory/").content.decode()
    counts = re.search(r'<h2 id="counts-h">.*?</table>', panel, re.S).group(0)
    assert "support-bot" in counts and ">7<" in counts  # 5 facts + preference + the broken one
    assert "1 failed" in panel and "parser crashed" in panel and "1 queued" in panel
    assert "Recent memory activity" in panel and "created" in panel
    client.force_login(world.teammate)
    assert "support-bot" not in client.get("/dashboard/memory/").content.decode()


def test_dashboard_engines_panel(client, world):
    client.force_login(world.owner)
    panel = client.get("/dashboard/engines/")
    assert panel.status_code == 200 and b"builtin" in panel.content


def test_nav_offers_memories_and_graph(client, world):
    client.force_login(world.auditor)
    page = client.get("/").content
    assert b'href="/memories/"' in page and b'href="/graph/"' in page


def test_graph_why_shows_the_bridge_and_link_that_ranked_each_fact(client, world, access, incident, foreign):
    marked = fact(
        access, "Full disk alarms <script>alert(1)</script> paged the on-call team.", session_id="s9"
    )
    client.force_login(world.owner)
    page = client.get("/graph/")
    assert b'hx-get="/graph/why/"' in page.content and str(world.agent.pk).encode() in page.content
    response = client.get("/graph/why/", {"q": "Why was revenue lost?", "agent": str(world.agent.pk)}, **HX)
    assert response.status_code == 200 and b"<html" not in response.content
    html = response.content.decode()
    assert 'id="graph-why"' in html and "Relevance" in html
    # Each fact names how the core reached it (in so small a memory every fact is a seed).
    assert re.search(r"<td>(seed|entity|causal|session|terms)</td>", html)
    assert str(incident[0].pk) in html
    # Stored text is escaped; the other tenant's facts never show.
    disk = client.get("/graph/why/", {"q": "full disk alarms", "agent": str(world.agent.pk)}).content.decode()
    assert str(marked.pk) in disk and "<script>" not in disk and "&lt;script&gt;" in disk
    assert not any(str(f.pk) in html + disk for f in foreign)


def test_graph_why_bad_input_and_foreign_agents(client, world, incident):
    client.force_login(world.owner)
    assert client.get("/graph/why/", {"q": "", "agent": str(world.agent.pk)}).status_code == 400
    assert client.get("/graph/why/", {"q": "disk", "agent": "not-a-uuid"}).status_code == 400
    assert client.get("/graph/why/", {"q": "disk", "agent": str(world.foreign_agent.pk)}).status_code == 404
    client.force_login(world.teammate)
    assert client.get("/graph/why/", {"q": "disk", "agent": str(world.agent.pk)}).status_code == 404
    client.logout()
    assert client.get("/graph/why/", {"q": "disk", "agent": str(world.agent.pk)}).status_code == 302
