"""Who said an item, read from a transcript's label, and whom a query names.

A conversation is stored one turn per item as "Melanie: We painted a sunset"
(the label a chat transcript puts before each turn). A question about a person
("What has Melanie painted?") asks what *that person* said or did, and the turns
most like it in words are often the other speaker's ("Caroline: Wow, Melanie! Is
this your own painting?"): the name is in both, and its document frequency (half
the conversation carries it as a label) gives it almost no weight in BM25 or in
the embedding. Hybrid recall therefore lifts an item whose label the query names
(:mod:`memory.retrieval.hybrid`, ``FEDMEM_HYBRID_SPEAKER_WEIGHT``).

A label is the item's first one to three words before a colon and a blank
("Melanie:", "Dr. Ng:", "Support bot:"); the query names it when one of its
capitalised word sequences (a possessive "'s" dropped, surrounding punctuation
stripped) is that label exactly, case included, so "note" in a question never
names the label of "Note: ..." and an item without a label is never lifted. The
database reads the label with :data:`LABEL_PATTERN` (a POSIX regular expression
both PostgreSQL and Python read the same way); :func:`label` is its Python mirror.
"""

from __future__ import annotations

import re

# One to three blank-separated words, no colon inside, then a colon and a blank.
LABEL_PATTERN = r"^\s*([^\s:]+(?:[ \t][^\s:]+){0,2}):\s"
_LABEL = re.compile(LABEL_PATTERN)
MAX_WORDS = 3
# A query is bounded before it gets here (top_k, 16 KB); this bounds the candidates.
MAX_NAMES = 64
# Quotes (straight, curly \u2018-\u201d, guillemets), brackets and sentence punctuation.
_STRIP = "\"'\u2018\u2019\u201c\u201d\u00ab\u00bb()[]{}<>.,;:!?\u00bf\u00a1"
# A possessive ("Melanie's", "Melanie\u2019s", "James'").
_POSSESSIVE = re.compile("(?:'s|\u2019s|'|\u2019)$")


def label(content: str) -> str | None:
    """The item's speaker label, or None (the SQL in hybrid reads the same)."""
    match = _LABEL.match(content)
    return match.group(1) if match else None


def _token(word: str) -> str:
    return _POSSESSIVE.sub("", word.strip(_STRIP)).strip(_STRIP)


def named_labels(query: str) -> list[str]:
    """The labels ``query`` may name: its word sequences of up to three words that
    start with a capital letter, as written (a possessive or punctuation after the
    last word dropped; a title's dot kept inside a sequence, so "Dr. Ng" reads)."""
    words = query.split()
    names: list[str] = []
    for start, first in enumerate(words):
        head = first.lstrip(_STRIP)
        if not head[:1].isupper():
            continue
        for size in range(1, MAX_WORDS + 1):
            window = words[start : start + size]
            if len(window) < size:
                break
            *inner, last = window
            inner = [w.lstrip(_STRIP) if i == 0 else w for i, w in enumerate(inner)]
            name = " ".join([*inner, _token(last) if inner else _token(head)])
            if name and name not in names:
                names.append(name)
            # A sequence does not run across a sentence's or a clause's end.
            if (last[-1] in _STRIP and last[-1] != ".") or _POSSESSIVE.search(last.rstrip(_STRIP)):
                break
    return names[:MAX_NAMES]
