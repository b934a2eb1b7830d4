"""Entities of a parsed text: named entities plus noun chunks (spaCy), or GLiNER when
``FEDMEM_GLINER_MODEL`` names a local model directory; normalized so spellings merge."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from django.conf import settings

# Labels that name quantities and times, not things a fact is about.
_SKIP_LABELS = {"CARDINAL", "ORDINAL", "QUANTITY", "MONEY", "PERCENT", "DATE", "TIME"}
_DETERMINERS = {"the", "a", "an", "this", "that", "these", "those", "our", "their", "its", "his", "her", "my"}
_COUNTS = {
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "both",
    "all",
    "some",
}
_PUNCT = re.compile(r"[^\w\s-]")
_SPACE = re.compile(r"\s+")
GLINER_LABELS = ["person", "organization", "product", "service", "system", "location", "event"]


@dataclass(frozen=True)
class FoundEntity:
    text: str
    normalized: str
    label: str
    start: int
    end: int


def normalize(text: str) -> str:
    """Case, possessives, punctuation and leading determiners do not make a new entity:
    "The Payments-API's" and "payments-api" are one."""
    lowered = text.lower().replace("\u2019", "'")
    lowered = re.sub(r"'s\b|s'(?=\s|$)", "", lowered)
    lowered = _PUNCT.sub(" ", lowered)
    words = _SPACE.sub(" ", lowered).strip().split(" ")
    # Leading determiners and counts: "the two loading bays" is "loading bays".
    while len(words) > 1 and (words[0] in _DETERMINERS or words[0] in _COUNTS or words[0].isdigit()):
        words = words[1:]
    while words and words[0] in _DETERMINERS:
        words = words[1:]
    return " ".join(words)[:200]


def _keep(normalized: str) -> bool:
    return bool(normalized) and any(ch.isalpha() for ch in normalized) and len(normalized) > 1


def spacy_entities(doc: Any) -> list[FoundEntity]:
    found: dict[tuple[int, int], FoundEntity] = {}
    # Tokens of dates, times and quantities: a noun chunk headed by one ("March",
    # "two weeks") names a time, not a thing, and would join every fact saying it.
    timeish = {tok.i for ent in doc.ents if ent.label_ in _SKIP_LABELS for tok in ent}
    for ent in doc.ents:
        if ent.label_ in _SKIP_LABELS:
            continue
        norm = normalize(ent.text)
        if _keep(norm):
            found[(ent.start_char, ent.end_char)] = FoundEntity(
                ent.text, norm, ent.label_, ent.start_char, ent.end_char
            )
    for chunk in doc.noun_chunks:
        # A chunk that is only a pronoun ("it", "they") names nothing by itself.
        if all(tok.pos_ in ("PRON", "DET") for tok in chunk) or chunk.root.i in timeish:
            continue
        for tok in chunk:
            # "the payments-api's latency" also names the payments-api itself.
            if tok.dep_ == "poss" and tok.pos_ in ("PROPN", "NOUN"):
                owner = tok.doc[tok.left_edge.i : tok.i + 1]
                norm = normalize(owner.text)
                if _keep(norm) and (owner.start_char, owner.end_char) not in found:
                    found[(owner.start_char, owner.end_char)] = FoundEntity(
                        owner.text, norm, "NOUN_CHUNK", owner.start_char, owner.end_char
                    )
                # ... and the possessed thing on its own: "the server's CPU temperature"
                # is the "CPU temperature" another fact names without its owner.
                owned = tok.doc[tok.right_edge.i + 1 : chunk.end]
                if tok.right_edge.i + 1 < chunk.end and owned[0].dep_ == "case":
                    owned = owned[1:]
                norm = normalize(owned.text) if len(owned) else ""
                if _keep(norm) and (owned.start_char, owned.end_char) not in found:
                    found[(owned.start_char, owned.end_char)] = FoundEntity(
                        owned.text, norm, "NOUN_CHUNK", owned.start_char, owned.end_char
                    )
        if any(start <= chunk.start_char < end for start, end in found):
            continue
        norm = normalize(chunk.text)
        if _keep(norm):
            found[(chunk.start_char, chunk.end_char)] = FoundEntity(
                chunk.text, norm, "NOUN_CHUNK", chunk.start_char, chunk.end_char
            )
    return sorted(found.values(), key=lambda e: e.start)


_gliner_lock = threading.Lock()
_gliner: Any = None


def get_gliner() -> Any:
    """The configured GLiNER model, loaded from its local directory (never fetched)."""
    global _gliner
    if _gliner is None:
        with _gliner_lock:
            if _gliner is None:
                from gliner import GLiNER

                _gliner = GLiNER.from_pretrained(settings.FEDMEM_GLINER_MODEL, local_files_only=True)
    return _gliner


def gliner_entities(text: str) -> list[FoundEntity]:
    model = get_gliner()
    out = []
    for ent in model.predict_entities(text, GLINER_LABELS, threshold=settings.FEDMEM_GLINER_THRESHOLD):
        norm = normalize(ent["text"])
        if _keep(norm):
            out.append(FoundEntity(ent["text"], norm, str(ent["label"]).upper(), ent["start"], ent["end"]))
    return out


def find_entities(text: str, doc: Any) -> list[FoundEntity]:
    if settings.FEDMEM_GLINER_MODEL:
        return gliner_entities(text)
    return spacy_entities(doc)
