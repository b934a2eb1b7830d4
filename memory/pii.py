"""Personal-data detection with presidio-analyzer on the shared spaCy parse.

presidio's NER recognizer reads the entities of the process's one spaCy pipeline
(``memory.extraction.nlp``: the packaged ``FEDMEM_PII_SPACY_MODEL``, never
downloaded), so a text parsed for detection is not parsed again by the
contradiction check of the same write; its pattern recognizers (e-mail, phone,
card numbers with checksums, IBAN, ...) run beside it. The analyzer and its
recognizers are built once per process. Only entity *types* leave this module: the
matched text is never stored or logged.

Cost is bounded by the length of the text, not its square: presidio's context
enhancer walks every token of the document for every match, which made a 16 KB
text with a few hundred matches take many seconds. The parsed document is
analysed in windows of at most ``WINDOW_CHARS`` characters, cut at sentence
boundaries where it can be and overlapping by ``OVERLAP_TOKENS`` tokens, so a
pattern (a card number, an address) cut by one window is whole in the next.
Findings are types per text, so a match seen twice counts once.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from memory.extraction.nlp import get_nlp, parse

WINDOW_CHARS = 1000
# Longer than any pattern presidio matches (an IBAN is at most 9 tokens).
OVERLAP_TOKENS = 16


@dataclass(frozen=True)
class PiiFinding:
    personal_data: bool
    types: tuple[str, ...]


_NON_PERSONAL_LABELS = [
    "CARDINAL", "ORDINAL", "QUANTITY", "MONEY", "PERCENT", "PRODUCT",
    "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE", "FAC",
]  # fmt: skip

_lock = threading.Lock()
_run_lock = threading.Lock()
_analyzer: Any = None


def _offline_tldextract() -> None:
    # presidio's e-mail recognizer validates domains with tldextract, whose default
    # extractor downloads the public suffix list on first use. Swap in one that
    # only uses the snapshot shipped inside the package: no network at run time.
    import tldextract.tldextract as tx

    tx.TLD_EXTRACTOR = tx.TLDExtract(suffix_list_urls=(), cache_dir=None, fallback_to_snapshot=True)


def _shared_parse_engine() -> Any:
    from presidio_analyzer.nlp_engine import NerModelConfiguration, SpacyNlpEngine

    class SharedParseEngine(SpacyNlpEngine):  # type: ignore[misc]
        """presidio's spaCy engine over the process's one pipeline, turning a
        document parsed elsewhere into presidio's artefacts."""

        def load(self) -> None:
            self.nlp = {"en": get_nlp()}

        def artifacts(self, doc: Any) -> Any:
            return self._doc_to_nlp_artifact(doc, "en")

    engine = SharedParseEngine(
        models=[{"lang_code": "en", "model_name": settings.FEDMEM_PII_SPACY_MODEL}],
        # spaCy labels that are never personal data on their own.
        ner_model_configuration=NerModelConfiguration(labels_to_ignore=_NON_PERSONAL_LABELS),
    )
    engine.load()
    return engine


def get_analyzer() -> Any:
    global _analyzer
    if _analyzer is None:
        with _lock:
            if _analyzer is None:
                _offline_tldextract()
                from presidio_analyzer import AnalyzerEngine

                _analyzer = AnalyzerEngine(nlp_engine=_shared_parse_engine(), supported_languages=["en"])
    return _analyzer


def windows(doc: Any) -> list[tuple[int, int]]:
    """Token ranges ``[start, end)`` covering ``doc``: each at most WINDOW_CHARS
    long (or one token, if a single token is longer), ending at the last sentence
    boundary that fits, else at the last token that fits; consecutive windows
    overlap by OVERLAP_TOKENS tokens."""
    n = len(doc)
    if n == 0:
        return []
    starts = [token.idx for token in doc]
    ends = [token.idx + len(token.text) for token in doc]
    boundaries = sorted({sent.end for sent in doc.sents})
    out: list[tuple[int, int]] = []
    start = 0
    while True:
        limit = starts[start] + WINDOW_CHARS
        fits = bisect.bisect_right(ends, limit, lo=start)  # tokens start..fits-1 fit
        end = max(start + 1, fits)
        if end < n:
            # The last sentence end in (start, end], if one lies past the overlap.
            at = bisect.bisect_right(boundaries, end) - 1
            if at >= 0 and boundaries[at] > start + OVERLAP_TOKENS:
                end = boundaries[at]
        out.append((start, min(end, n)))
        if end >= n:
            return out
        start = max(start + 1, end - OVERLAP_TOKENS)


def detect_personal_data(texts: list[str]) -> list[PiiFinding]:
    """One finding per text: whether it holds personal data and of which types.

    The texts are parsed as one batch (``nlp.pipe``, through the shared parse),
    which is what keeps batch writes close to the speed of embedding alone.
    """
    if not texts:
        return []
    analyzer = get_analyzer()
    entities = list(settings.FEDMEM_PII_ENTITIES)
    threshold = settings.FEDMEM_PII_MIN_SCORE
    findings = []
    docs = parse(texts)
    with _run_lock:  # the recognizers keep no per-call state, but the NLP artefacts are spaCy objects
        for doc in docs:
            types: set[str] = set()
            for start, end in windows(doc):
                piece = doc[start:end].as_doc() if (start, end) != (0, len(doc)) else doc
                results = analyzer.analyze(
                    text=piece.text,
                    language="en",
                    entities=entities,
                    nlp_artifacts=analyzer.nlp_engine.artifacts(piece),
                    score_threshold=threshold,
                )
                types.update(result.entity_type for result in results)
            ordered = tuple(sorted(types))
            findings.append(PiiFinding(personal_data=bool(ordered), types=ordered))
    return findings
