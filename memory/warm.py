"""The models a process loads at start-up, before the first request or task needs them.

Each model loads once per process, behind its own lock, so a request or task that
arrives during the warm-up waits for the load in progress instead of starting its
own. Loading lazily made the first batch write of a fresh web process pay for
presidio and the spaCy pipeline, and the first extraction task of every Celery
child pay for spaCy and the embedder: about four and ten seconds on two busy cores
(``py-spy`` of the live ingest bench, docs/performance.md).
"""

from __future__ import annotations


def write_models() -> None:
    """What a write reads with: the personal-data recognizers over the shared spaCy
    pipeline (the extraction inputs come from the same parse)."""
    from memory.extraction.nlp import parse
    from memory.pii import get_analyzer

    get_analyzer()
    parse(["Warm-up: Ada moved the launch to Lisbon because the venue closed."])


def extraction_models() -> None:
    """What an extraction task runs: the spaCy pipeline and the embedder (span terms)."""
    from memory.embeddings import get_embedder
    from memory.extraction.nlp import get_nlp

    get_nlp()
    get_embedder()
