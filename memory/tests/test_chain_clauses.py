"""The chain walk's parse summary (memory/extraction/clauses.py): stored by the write
and the extraction, read by the walk instead of a parse, the same chain either way."""

from __future__ import annotations

import pytest

from memory.extraction import nlp
from memory.extraction.clauses import summarize, valid
from memory.models import MemoryItem
from memory.reasoning.answer import assemble_chain
from memory.reasoning.chain import Pool, asserted_links, walk_back
from memory.services.items import memory_update
from memory.tasks import extract_items
from memory.tests.conftest import remember
from memory.tests.graph_helpers import DISTRACTOR, INCIDENT, fact


def _parsed(text: str) -> dict:
    return summarize(text, nlp.parse([text])[0])


@pytest.fixture
def incident(access):
    items = [fact(access, text, session_id=session) for session, text in INCIDENT]
    items.append(fact(access, DISTRACTOR[1], session_id=DISTRACTOR[0]))
    return items


def test_a_write_stores_the_summary_of_its_parse_and_extraction_makes_the_same(access):
    text = "The night shift forgot to close the loading gate before the storm."
    item = remember(access, text, scope="agent").item
    item.refresh_from_db()
    assert item.clauses == _parsed(text) and valid(text, item.clauses)
    # Stems and a digest of the subject, not words of the text.
    assert "shift" not in item.clauses["subject"] and "night" in item.clauses["inside"]
    # The backfill path (fedmem_extract --all): an extraction that parses stores it too.
    MemoryItem.objects.filter(pk=item.pk).update(clauses=None)
    extract_items([str(item.pk)])
    item.refresh_from_db()
    assert item.clauses == _parsed(text)


def test_new_content_replaces_the_summary(access):
    item = fact(access, "The pump failed on Monday.")
    memory_update(access=access, item_id=item.pk, content="The valve leaked on Tuesday.")
    item.refresh_from_db()
    assert valid("The valve leaked on Tuesday.", item.clauses)
    # Any save of new content drops a summary it was not given.
    item.content = "The pipe burst on Friday."
    item.save(update_fields=["content"])
    item.refresh_from_db()
    assert item.clauses is None


def _walk(access, items):
    ids = [item.pk for item in items]
    pool = Pool(access.tenant_id, ids, per_language=True)
    return walk_back(items[-2].pk, pool, asserted_links(access.tenant_id, ids), set(), strict=True)


def test_the_walk_reads_stored_summaries_instead_of_parsing(access, incident, monkeypatch):
    texts = {item.content for item in incident}
    seen: list[str] = []
    real = nlp.parse

    def counting(batch):
        seen.extend(batch)
        return real(batch)

    monkeypatch.setattr(nlp, "parse", counting)
    stored = _walk(access, incident)
    facts = [{"id": str(item.pk), "content": item.content, "relevance": 1.0 - n / 10}
             for n, item in enumerate(reversed(incident))]  # fmt: skip
    stored_chain = assemble_chain(access.tenant_id, facts, facts)
    assert len(stored) >= 2 and not set(seen) & texts
    # Without summaries (items from before they existed), or with one of another text,
    # the walk parses: the same chain, the same scores.
    MemoryItem.objects.filter(pk=incident[0].pk).update(clauses=_parsed("A different sentence."))
    MemoryItem.objects.exclude(pk=incident[0].pk).update(clauses=None)
    assert _walk(access, incident) == stored
    assert assemble_chain(access.tenant_id, facts, facts) == stored_chain
    assert texts <= set(seen)
