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
