"""What the causal chain walk reads of a fact's parse, kept so it is parsed once.

The walk (:mod:`memory.reasoning.chain`) weighs, for each fact it steps through,
the main clause's subject, the words inside and outside the subject's subtree and
whether the fact states a change of state. Those come from the spaCy parse, which
extraction makes anyway: :func:`summarize` reduces the parse to that and the item
stores it (``MemoryItem.clauses``), so a query reads it instead of parsing up to
fifty facts again. The summary is tied to the text it was read from by a digest;
a summary of another text (an item updated since) is never used, and a fact
without one is parsed at query time into the same summary (tested).

Stems and a digest of the subject's lemma, not words: the walk only compares
subjects for equality and stems for overlap, and derived data holds no more of
the text than it needs.
"""

from __future__ import annotations

import hashlib
import logging
import re
from functools import lru_cache
from typing import Any

logger = logging.getLogger(__name__)

# Bump when the summary's shape or its reading of the parse changes: a stored summary
# of another version is ignored (and re-made by ``fedmem_extract --all``).
VERSION = 1

_STOP = {
    "the", "a", "an", "and", "or", "of", "to", "in", "on", "at", "by", "for", "with", "from", "as",
    "is", "are", "was", "were", "be", "been", "its", "their", "his", "her", "also", "that", "this",
    "which", "who", "into", "after", "before", "than", "then", "when", "while", "because", "due",
    "led", "lead", "leads", "caused", "cause", "causes", "resulted", "result", "made", "makes",
}  # fmt: skip
WORD = re.compile(r"\w+")


def stems(words: Any) -> frozenset[str]:
    """Crude, language-blind stems (the first five letters of a content word), so
    "throttles" meets "throttling" and "delayed" meets "delay"."""
    return frozenset(stem for word in words if (stem := _stem(word)))


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    """A word's crude stem, or "" for a word that has none (short, stop word, number)."""
    w = word.lower()
    if len(w) < 3 or w in _STOP or w.isdigit():
        return ""
    # A plural meets its singular ("bays" / "bay") before the cut.
    return (w[:-1] if len(w) > 3 and w.endswith("s") else w)[:5]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _subject(doc: Any) -> Any:
    for token in doc:
        if token.dep_ in ("nsubj", "nsubjpass") and token.head.dep_ == "ROOT":
            return token
    return None


def summarize(text: str, doc: Any) -> dict[str, Any]:
    """The walk's reading of ``doc`` (the parse of ``text``): a JSON-ready dict."""
    from memory.reasoning.implicit import states_change

    head = _subject(doc)
    subtree = {t.i for t in head.subtree} if head is not None else set()
    subject = head.lemma_.lower() if head is not None else ""
    return {
        "v": VERSION,
        "digest": digest(text),
        # Only compared for equality: a digest of the lemma does as well as the lemma.
        "subject": hashlib.sha256(subject.encode("utf-8")).hexdigest()[:16] if subject else "",
        "inside": sorted(stems(t.text for t in doc if t.i in subtree)),
        "outside": sorted(stems(t.text for t in doc if t.i not in subtree)),
        "changes": bool(states_change(doc)),
    }


def valid(text: str, summary: Any) -> bool:
    """``summary`` was read from this very text by this version of :func:`summarize`."""
    return isinstance(summary, dict) and summary.get("v") == VERSION and summary.get("digest") == digest(text)


def summaries(texts: list[str]) -> list[dict[str, Any] | None]:
    """One summary per text from its (shared, usually cached) parse; None where the
    parse failed. Never raises: a write does not fail for its sake (the walk then
    parses the fact itself)."""
    from memory.extraction.nlp import parse

    if not texts:
        return []
    try:
        docs = parse(texts)
    except Exception:
        logger.exception("parse for clause summaries failed")
        return [None] * len(texts)
    return [summarize(text, doc) for text, doc in zip(texts, docs, strict=True)]
