"""The spaCy pipeline extraction parses with, loaded once per process.

The same packaged model personal-data detection uses (``FEDMEM_PII_SPACY_MODEL``),
loaded separately here because extraction needs the dependency parse, which the
detector turns off. Never downloaded: the model is an installed package.
"""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings

_lock = threading.Lock()
# spaCy pipelines are not documented as thread-safe; parsing is serialized.
run_lock = threading.Lock()
_nlp: Any = None


def get_nlp() -> Any:
    global _nlp
    if _nlp is None:
        with _lock:
            if _nlp is None:
                import spacy

                _nlp = spacy.load(settings.FEDMEM_PII_SPACY_MODEL)
    return _nlp


def parse(texts: list[str]) -> list[Any]:
    nlp = get_nlp()
    with run_lock:
        return list(nlp.pipe(texts))


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` as the parser sees them (empty pieces dropped)."""
    return [sent.text.strip() for sent in parse([text])[0].sents if sent.text.strip()]
