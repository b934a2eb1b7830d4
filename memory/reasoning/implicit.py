"""Implicit cause -> effect between facts that share an entity, without cue words.

"A forklift damaged two of the three loading bays." -> "With one bay left,
trailers waited a day and a half to load." has no connective: the rule
extractor sees nothing. A scorer answers, for two facts already joined by a
specific entity (or a synonym span), how strongly the first reads as the cause
of the second. The default, :class:`EmbeddingCausalScorer`, needs no model beyond
the embeddings: the cause fact is compared with the effect fact's *cause side*
(the cause span of an edge the effect fact asserts, when it has one: "When the
CPU temperature rises, ..." is caused by whatever made the temperature rise),
else with the effect fact itself; a cause that states a change (exceeded,
damaged, failed, rose) gains ``CHANGE_BONUS``, one that only describes
(monitored, displays, is insured) gains nothing.

Further scorers (an NLI cross-encoder from a local path) register in
:data:`SCORERS` and are chosen with ``FEDMEM_IMPLICIT_CAUSAL_SCORER``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

CHANGE_BONUS = 0.1
# Lemmas of predicates that state a change of state (an event that can cause).
CHANGE_LEMMAS = {
    "add", "break", "burst", "cancel", "crash", "cut", "damage", "decline", "decrease", "delay", "deploy",
    "destroy", "die", "double", "drain", "drop", "exceed", "expand", "expire", "fail", "fall", "fill",
    "flood", "freeze", "grow", "halve", "heat", "hit", "improve", "increase", "introduce", "jump",
    "launch", "leak", "lose", "lower", "melt", "miss", "move", "overheat", "overload", "raise", "reduce",
    "remove", "replace", "rise", "run", "shorten", "shrink", "skip", "slow", "spike", "spill", "stop",
    "surge", "switch", "thaw", "triple", "update", "upgrade", "win", "worsen", "forget", "eat", "drink",
    "stay", "quit", "start", "begin", "close", "open", "block", "strike", "hire", "fire", "sell", "buy",
}  # fmt: skip


@dataclass(frozen=True)
class Side:
    """What a scorer reads of one fact."""

    text: str
    vector: Any
    cause_vector: Any  # the cause span of an edge the fact asserts, or None
    changes: bool  # the fact states a change of state


class CausalScorer(Protocol):
    name: str

    def score(self, cause: Side, effect: Side) -> float: ...


def _cos(a: Any, b: Any) -> float:
    a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    return float(a @ b / ((np.linalg.norm(a) * np.linalg.norm(b)) or 1.0))


class EmbeddingCausalScorer:
    name = "embedding"

    def score(self, cause: Side, effect: Side) -> float:
        target = effect.cause_vector if effect.cause_vector is not None else effect.vector
        return _cos(cause.vector, target) + (CHANGE_BONUS if cause.changes else 0.0)


class NliCausalScorer:
    """A local sentence-transformers CrossEncoder trained for NLI: the entailment
    probability of "cause. Therefore effect." (never fetched)."""

    name = "nli"

    def __init__(self, model_dir: Path) -> None:
        if not model_dir.is_dir():
            raise ImproperlyConfigured(f"FEDMEM_IMPLICIT_CAUSAL_MODEL={str(model_dir)!r} is not a directory")
        from sentence_transformers import CrossEncoder

        self.model = CrossEncoder(str(model_dir), device="cpu", local_files_only=True)
        self._lock = threading.Lock()

    def score(self, cause: Side, effect: Side) -> float:
        with self._lock:
            logits = np.asarray(self.model.predict([(cause.text, effect.text)], show_progress_bar=False))[0]
        probabilities = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        return float(probabilities[1]) if len(probabilities) > 1 else float(probabilities[0])


SCORERS: dict[str, Callable[[], CausalScorer]] = {
    "embedding": EmbeddingCausalScorer,
    "nli": lambda: NliCausalScorer(Path(settings.FEDMEM_IMPLICIT_CAUSAL_MODEL)),
}
_lock = threading.Lock()
_loaded: dict[str, CausalScorer] = {}


def get_scorer() -> CausalScorer:
    name = settings.FEDMEM_IMPLICIT_CAUSAL_SCORER
    if name not in SCORERS:
        raise ImproperlyConfigured(f"unknown implicit causal scorer {name!r}")
    if name not in _loaded:
        with _lock:
            if name not in _loaded:
                _loaded[name] = SCORERS[name]()
    return _loaded[name]


def states_change(doc: Any) -> bool:
    """The parsed fact has a predicate of change (see CHANGE_LEMMAS)."""
    return any(t.pos_ in ("VERB", "AUX") and t.lemma_.lower() in CHANGE_LEMMAS for t in doc)
