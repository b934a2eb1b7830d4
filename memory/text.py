"""Content rules shared by every write path: limits, normalization and the dedup hash."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata

MAX_CONTENT_BYTES = 16 * 1024
_SPACE = re.compile(r"\s+")


class ContentError(ValueError):
    """Content that can never be stored; the message is safe to show the caller."""


def check_content(content: str) -> str:
    """Return the content to store (surrounding whitespace removed) or raise ContentError."""
    if not isinstance(content, str):
        raise ContentError("Content must be a string.")
    stripped = content.strip()
    if not stripped:
        raise ContentError("Content may not be empty.")
    if "\x00" in stripped:
        # PostgreSQL text cannot hold NUL; refusing it here keeps it a 400, not a 500.
        raise ContentError("Content may not contain NUL characters.")
    try:
        size = len(stripped.encode("utf-8"))
    except UnicodeEncodeError as exc:  # lone surrogates from a JSON "\ud800" escape
        raise ContentError("Content is not valid Unicode text.") from exc
    if size > MAX_CONTENT_BYTES:
        raise ContentError(f"Content is {size} bytes; the limit is {MAX_CONTENT_BYTES} bytes (16 KB).")
    return stripped


def normalize(content: str) -> str:
    """Case, width and whitespace differences do not make a new memory."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", content).casefold()).strip()


def content_hash(content: str) -> str:
    return hashlib.sha256(normalize(content).encode("utf-8")).hexdigest()


def json_text_ok(value: object) -> bool:
    """True when every string in a JSON value can be stored in jsonb (no NUL, valid Unicode)."""
    if isinstance(value, str):
        if "\x00" in value:
            return False
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, dict):
        return all(json_text_ok(k) and json_text_ok(v) for k, v in value.items())
    if isinstance(value, list):
        return all(json_text_ok(v) for v in value)
    return True


MAX_METADATA_BYTES = 8 * 1024


def check_metadata(metadata: object) -> None:
    """Raise ContentError unless ``metadata`` is a JSON object jsonb can store, within 8 KB."""
    if not isinstance(metadata, dict):
        raise ContentError("Must be a JSON object.")
    if not json_text_ok(metadata):
        raise ContentError("Strings may not contain NUL characters or invalid Unicode.")
    try:
        # jsonb has no Infinity or NaN (a JSON 1e999 parses to inf): refuse them here.
        encoded = json.dumps(metadata, allow_nan=False)
    except ValueError as exc:
        raise ContentError("Numbers must be finite.") from exc
    if len(encoded.encode("utf-8")) > MAX_METADATA_BYTES:
        raise ContentError(f"At most {MAX_METADATA_BYTES} bytes of JSON.")


# A sentence ends at terminal punctuation (closing quotes or brackets included)
# followed by white space, or at a line break.
# (Also the ellipsis and the ideographic and full-width stops: U+2026, U+3002, U+FF01, U+FF1F.)
_SENTENCE_END = re.compile("[.!?\u2026\u3002\uff01\uff1f]+[\"'\u201d\u2019)\\]]*(?=\\s)|\n")
# A period after a title or an initial ("Dr.", "U.S.") ends no sentence.
_ABBREVIATION = re.compile(
    r"(?:^|[\s(])(?:[A-Za-z](?:\.[A-Za-z])*|Mr|Mrs|Ms|Dr|Prof|Sr|Jr|St|Mt|vs|etc|No|Inc|Ltd|Co|Corp|approx)\.$"
)
# Shorter pieces ("Dr.", "e.g.", "Hi!") join the sentence that follows them.
MIN_SENTENCE_WORDS = 3
MAX_SENTENCES = 32


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the sentences of ``text``, stripped of surrounding
    white space; at most ``MAX_SENTENCES`` (the rest of a longer text is the last).

    Punctuation-based, the same rule for every language that puts a space after
    a sentence (a text in a script written without one stays whole): a split after
    an abbreviation the list misses leaves a piece of a word or two, which joins
    the next sentence instead of standing alone. One span for a text of one
    sentence. Not the parser's sentences (``memory.extraction.nlp.split_sentences``):
    a write embeds its sentences while spaCy parses it, on another thread, and
    waiting for the parse would put the two back in a row."""
    spans: list[tuple[int, int]] = []
    begin = 0
    for match in _SENTENCE_END.finditer(text):
        if _ABBREVIATION.search(text, max(0, match.end() - 12), match.end()):
            continue
        spans.append((begin, match.end()))
        begin = match.end()
    spans.append((begin, len(text)))
    out: list[tuple[int, int]] = []
    carry: int | None = None
    for start, end in spans:
        piece = text[start:end]
        if not piece.strip():
            continue
        start = carry if carry is not None else start + len(piece) - len(piece.lstrip())
        end = end - (len(piece) - len(piece.rstrip()))
        carry = None
        if len(text[start:end].split()) < MIN_SENTENCE_WORDS:
            carry = start  # too short to stand alone: it opens the next one
            continue
        out.append((start, end))
    if carry is not None:
        if out:
            out[-1] = (out[-1][0], len(text.rstrip()))
        else:
            out.append((carry, len(text.rstrip())))
    if len(out) > MAX_SENTENCES:
        out[MAX_SENTENCES - 1 :] = [(out[MAX_SENTENCES - 1][0], out[-1][1])]
    return out
