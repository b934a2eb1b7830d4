"""The spaCy pipeline of this process: one parse per text, shared by every reader.

Entities, causal rules, the contradiction check and personal-data detection all
read the same packaged model (``FEDMEM_PII_SPACY_MODEL``, an installed package,
never downloaded). :func:`parse` keeps the last documents it made, so readers of
one text in one process (a write's personal-data detection and its contradiction
check; an extraction's entities, causal rules and span terms) parse it once, and
parses a list of texts as one ``nlp.pipe`` batch.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from django.conf import settings

_lock = threading.Lock()
# spaCy pipelines are not documented as thread-safe; parsing is serialized.
run_lock = threading.Lock()
_nlp: Any = None
# Documents kept for the next reader of the same text. A write reads its texts
# within milliseconds of each other, so a small window is enough; texts beyond
# CACHE_MAX_CHARS (pasted documents) are not kept, which bounds the memory.
CACHE_SIZE = 256
CACHE_MAX_CHARS = 20_000
_docs: OrderedDict[str, Any] = OrderedDict()
_docs_lock = threading.Lock()
BATCH_SIZE = 64


def get_nlp() -> Any:
    global _nlp
    if _nlp is None:
        with _lock:
            if _nlp is None:
                import spacy

                _nlp = spacy.load(settings.FEDMEM_PII_SPACY_MODEL)
    return _nlp


def _cached(text: str) -> Any:
    with _docs_lock:
        doc = _docs.get(text)
        if doc is not None:
            _docs.move_to_end(text)
        return doc


def parse(texts: list[str]) -> list[Any]:
    """One document per text (the same object for a text parsed moments ago);
    the texts not seen recently go through ``nlp.pipe`` together."""
    docs: list[Any] = [_cached(text) for text in texts]
    missing = sorted({text for text, doc in zip(texts, docs, strict=True) if doc is None})
    if missing:
        nlp = get_nlp()
        with run_lock:
            made = dict(zip(missing, nlp.pipe(missing, batch_size=BATCH_SIZE), strict=True))
        with _docs_lock:
            for text, doc in made.items():
                if len(text) <= CACHE_MAX_CHARS:
                    _docs[text] = doc
                    _docs.move_to_end(text)
            while len(_docs) > CACHE_SIZE:
                _docs.popitem(last=False)
        docs = [doc if doc is not None else made[text] for text, doc in zip(texts, docs, strict=True)]
    return docs


# The entity recognizer runs after the lemmatizer and has a tok2vec of its own: it
# changes no lemma, and it is about half of a short text's parse. The parser stays:
# the attribute ruler reads its dependency labels (an auxiliary "affects" keeps
# its form, a verb "affects" becomes "affect").
_NOT_FOR_LEMMAS = ("ner",)


def lemma_docs(texts: list[str]) -> list[Any]:
    """One document per text with the same tokens, tags and lemmas as :func:`parse`
    (tested) but maybe no entities: a recent full parse of the text when there is
    one, else a parse without the entity recognizer. These partial documents are not
    cached, so no reader of :func:`parse` ever sees one."""
    docs: list[Any] = [_cached(text) for text in texts]
    missing = sorted({text for text, doc in zip(texts, docs, strict=True) if doc is None})
    if missing:
        nlp = get_nlp()
        disable = [name for name in _NOT_FOR_LEMMAS if name in nlp.pipe_names]
        with run_lock:
            made = dict(zip(missing, nlp.pipe(missing, batch_size=BATCH_SIZE, disable=disable), strict=True))
        docs = [doc if doc is not None else made[text] for text, doc in zip(texts, docs, strict=True)]
    return docs


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` as the parser sees them (empty pieces dropped)."""
    return [sent.text.strip() for sent in parse([text])[0].sents if sent.text.strip()]
