"""What a write hands its extraction so the worker does not parse the text again.

A write parses each text once for its personal-data check (in the web process).
The same parse gives the text's entities and causal relations; :func:`write_inputs`
reads them there and reduces them to character offsets into the text (plus the
entity label, the extractor's name and the relation's cue word), which travel with
the extraction task. The worker rebuilds the entities and relations from the
item's content (:func:`read_inputs`) instead of parsing it, and parses only what
it has to (the short cause and effect spans, for their lemmas).

Offsets, not text: the task's message and its outbox row never carry the content or
a piece of it (an entity can be a person's name; erasure reaches the item, not the
broker). A digest of the text ties the offsets to the content they were read
from: an item updated meanwhile, or offsets that do not rebuild the same strings,
fall back to parsing in the worker. The result is the same either way (tested).
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from django.conf import settings

from memory.extraction.causal import Relation, extract_relations
from memory.extraction.entities import FoundEntity, normalize, spacy_entities
from memory.extraction.nlp import parse

logger = logging.getLogger(__name__)

Inputs = dict[str, Any]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _offsets(text: str, doc: Any) -> Inputs | None:
    entities = []
    for found in spacy_entities(doc):
        if text[found.start : found.end] != found.text:
            return None
        entities.append([found.start, found.end, found.label])
    relations = []
    for name, rel in extract_relations(text, doc):
        cause, effect = text.find(rel.cause), text.find(rel.effect)
        if cause < 0 or effect < 0:  # not a substring (a rule that rewrites text): parse in the worker
            return None
        relations.append([name, cause, cause + len(rel.cause), effect, effect + len(rel.effect), rel.cue])
    return {
        "digest": digest(text),
        "extractors": list(settings.FEDMEM_CAUSAL_EXTRACTORS),
        "entities": entities,
        "relations": relations,
    }


def write_inputs(texts: list[str]) -> list[Inputs | None]:
    """Extraction inputs of each text from its (shared, usually cached) parse; None
    where the worker must parse itself. Never raises: a write does not fail for its
    extraction's sake."""
    if settings.FEDMEM_GLINER_MODEL:
        return [None] * len(texts)  # GLiNER reads the raw text in the worker
    try:
        docs = parse(texts)
    except Exception:  # the write's own detection reports a parser failure
        logger.exception("parse for extraction inputs failed")
        return [None] * len(texts)
    out: list[Inputs | None] = []
    for text, doc in zip(texts, docs, strict=True):
        try:
            out.append(_offsets(text, doc))
        except Exception:  # the worker parses this one and records any error on the item
            logger.exception("extraction inputs of one text failed")
            out.append(None)
    return out


def read_inputs(text: str, inputs: Any) -> tuple[list[FoundEntity], list[tuple[str, Relation]]] | None:
    """The entities and relations ``inputs`` describe in ``text``, or None when they
    were not read from this very text (or are malformed)."""
    if settings.FEDMEM_GLINER_MODEL or not isinstance(inputs, dict) or inputs.get("digest") != digest(text):
        return None
    if inputs.get("extractors") != list(settings.FEDMEM_CAUSAL_EXTRACTORS):
        return None  # read under another configuration
    try:
        found = []
        for start, end, label in inputs["entities"]:
            piece = text[start:end]
            found.append(FoundEntity(piece, normalize(piece), str(label), int(start), int(end)))
        relations = [
            (str(name), Relation(text[cs:ce], text[es:ee], str(cue)))
            for name, cs, ce, es, ee, cue in inputs["relations"]
        ]
    except (KeyError, TypeError, ValueError):
        return None
    return found, relations
