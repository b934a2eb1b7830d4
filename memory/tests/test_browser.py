"""Browser flows of the memory console, in Debian's Chromium against a live server:
search memories, open the graph and expand a node, move the as_of slider, open a
causal trace. Data is written through the memory services and extracted by the
extraction task itself."""

from __future__ import annotations

import math
import re
import time
from datetime import UTC, datetime

import pytest

from conftest import screenshot
from governance.tests.test_browser import log_in
from memory.enforcement import system_access
from memory.services.supersession import memory_supersede
from memory.tests.conftest import remember
from memory.tests.graph_helpers import DISTRACTOR, INCIDENT, fact

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def story(world):
    access = system_access(world.agent)
    items = [fact(access, text, session_id=session) for session, text in INCIDENT]
    fact(access, DISTRACTOR[1], session_id=DISTRACTOR[0])
    remember(access, "Alice prefers email over phone calls.", scope="user", kind="preference")
    # Apart in time, so the slider can stand between the old fact and its successor.
    time.sleep(2)
    outcome = memory_supersede(
        access=access,
        item_id=items[2].pk,
        content="The database crash caused a checkout outage for two hours.",
        reason="postmortem",
    )
    fact_ids = [str(i.pk) for i in items]
    return {"items": items, "ids": fact_ids, "old": items[2], "new": outcome.new}


def graph_ready(page) -> None:
    page.wait_for_function("() => window.fedmemGraph && window.fedmemGraph.nodes().length > 0")
    page.get_by_role("status").filter(has_text="Click a node").wait_for()


def test_search_memories(page, world, story):
    log_in(page, "owner")
    page.locator("#dashboard-memory").wait_for()
    page.locator("#dashboard-engines").wait_for()
    screenshot(page, "dashboard-memory")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Memories").click()
    page.get_by_role("heading", name="Memories").wait_for()
    assert page.locator("#memory-list tbody tr").count() == 6  # current facts only
    page.get_by_label("Search", exact=True).fill("full disk")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url(re.compile(r"q=full(\+|%20)disk"))
    page.locator("#memory-list tbody tr").first.wait_for()
    texts = page.locator("#memory-list tbody tr td:first-child").all_inner_texts()
    assert len(texts) == 2 and all("full disk" in t for t in texts)
    # Semantic: a question with none of the words still finds the preference first.
    page.get_by_label("Search", exact=True).fill("how should we contact Alice")
    page.get_by_label("Search mode").select_option("semantic")
    page.get_by_role("button", name="Search").click()
    page.get_by_text("ranked by hybrid retrieval").wait_for()
    assert "Alice prefers email" in page.locator("#memory-list tbody tr").first.inner_text()
    screenshot(page, "memories")


def click_node(page, node_id: str) -> None:
    # The canvas reaches below the fold of the test viewport, and a mouse click lands in
    # viewport coordinates: bring the graph to the top of the viewport first.
    page.locator("#graph").evaluate("el => el.scrollIntoView({block: 'start'})")
    # The scroll event reaches cytoscape a frame later, and until then it maps a click
    # with the container's old offset (a loaded machine clicked beside the node): wait
    # two frames.
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    box = page.locator("#graph").bounding_box()
    pos = page.evaluate(f"() => window.fedmemGraph.getElementById('{node_id}').renderedPosition()")
    x, y = box["x"] + pos["x"], box["y"] + pos["y"]
    view = page.viewport_size
    assert 0 <= x < view["width"] and 0 <= y < view["height"], (x, y, view)
    page.mouse.click(x, y)


def test_graph_expand_a_node_and_move_the_as_of_slider(page, world, story):
    log_in(page, "owner")
    page.goto(f"/memories/{story['ids'][3]}/")
    page.get_by_role("link", name="Open in graph").click()
    graph_ready(page)
    old, new = f"i:{story['old'].pk}", f"i:{story['new'].pk}"
    # The retired cause of this fact is drawn (greyed: not current now).
    page.wait_for_function(f"() => !window.fedmemGraph.getElementById('{old}').empty()")
    assert page.evaluate(f"() => window.fedmemGraph.getElementById('{old}').hasClass('stale')")
    before = page.evaluate("() => window.fedmemGraph.nodes().length")
    # Expanding it brings its own neighbourhood: its cause and its successor.
    click_node(page, old)
    page.wait_for_function(f"() => window.fedmemGraph.nodes().length > {before}")
    page.wait_for_function(f"() => !window.fedmemGraph.getElementById('{new}').empty()")
    page.locator("#graph-selection").get_by_role("heading", name="Fact").wait_for()
    assert page.evaluate(f"() => !window.fedmemGraph.getElementById('i:{story['ids'][1]}').empty()")
    assert not page.evaluate(f"() => window.fedmemGraph.getElementById('{new}').hasClass('stale')")
    kinds = page.evaluate("() => [...new Set(window.fedmemGraph.edges().map(e => e.data('type')))].sort()")
    assert kinds == ["causes", "mention", "supersedes"]
    screenshot(page, "graph")

    # Slide back to a moment between the old fact and its successor.
    slider = page.get_by_label("As of")
    start = datetime.fromisoformat(slider.get_attribute("data-start").replace("Z", "+00:00"))
    end = datetime.fromisoformat(slider.get_attribute("data-end").replace("Z", "+00:00"))
    moment = story["new"].valid_from.timestamp() - 0.5
    value = math.ceil((moment - start.timestamp()) / (end.timestamp() - start.timestamp()) * 1000)
    slider.fill(str(value))
    page.wait_for_function(f"() => window.fedmemGraph.getElementById('{new}').hasClass('stale')")
    assert not page.evaluate(f"() => window.fedmemGraph.getElementById('{old}').hasClass('stale')")
    assert page.locator("#as-of-value").inner_text() != "now"
    screenshot(page, "graph-as-of")
    # Back to now with the keyboard.
    slider.focus()
    page.keyboard.press("End")
    page.wait_for_function(f"() => window.fedmemGraph.getElementById('{old}').hasClass('stale')")
    assert page.locator("#as-of-value").inner_text() == "now"
    # Keyboard: the node list offers every node as a button that expands it.
    page.get_by_text("Nodes (keyboard").click()
    page.get_by_role("button", name="Entity: lost revenue").focus()
    page.keyboard.press("Enter")
    page.locator("#graph-selection").get_by_role("heading", name="Entity").wait_for()
    assert page.locator("#graph-selection p").first.inner_text().startswith("lost revenue")
    assert page.evaluate("() => window.fedmemGraph.$(':selected').data('label')") == "lost revenue"


def test_open_a_causal_trace(page, world, story):
    log_in(page, "owner")
    page.goto(f"/memories/{story['ids'][0]}/")
    page.get_by_role("link", name="Trace effects").click()
    page.get_by_role("heading", name="Effects of this fact").wait_for()
    chain = page.get_by_role("list", name="Causal chain").get_by_role("listitem")
    assert "a full disk on db-1" in chain.first.inner_text()
    now_hops = chain.count()
    # As of just before the supersession, the retired link is followed again.
    moment = datetime.fromtimestamp(story["new"].valid_from.timestamp() - 0.5, tz=UTC)
    page.get_by_label("As of").fill(moment.strftime("%Y-%m-%dT%H:%M:%S"))
    page.get_by_role("button", name="Trace").click()
    page.wait_for_url(re.compile(r"as_of=\d"))
    page.get_by_text("lost revenue for the quarter").first.wait_for()
    assert chain.count() == 4 and now_hops < 4
    screenshot(page, "trace")
    page.get_by_label("As of").fill("")
    page.get_by_label("Direction").select_option("causes")
    page.get_by_role("button", name="Trace").click()
    page.wait_for_url(re.compile(r"direction=causes"))
    page.get_by_role("heading", name="Causes of this fact").wait_for()
    page.get_by_text("Root cause:").wait_for()
    page.goto(f"/memories/{story['ids'][1]}/")
    page.get_by_role("link", name="What if it were removed?").click()
    page.locator("#collapsed .span.collapsed").first.wait_for()
    screenshot(page, "what-if")
