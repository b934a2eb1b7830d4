"""Contradiction resolvers: does a new fact contradict an older one?

A resolver is anything with a ``name`` and a ``check(new, old)`` that answers a
:class:`Verdict` (with its reason) or None. The one in use is named by
``FEDMEM_CONTRADICTION_RESOLVER``:

* ``rules`` (default, deterministic): reads each sentence's subject, predicate,
  arguments, tense and update wording from the spaCy dependency parse and applies
  the update rules of :mod:`memory.updates`: a restatement with another value in
  the same slot, a negation or "no longer", a change verb with its destination
  ("was moved to", "raised to", "from A to B"), "instead of" / "replaced X with Y",
  and verbs that end a state ("cancelled", "called off", "left the company"). Built
  for precision: it cannot see paraphrases with neither words nor a change verb in
  common, quantities compared by meaning ("over 100" / "150"), or claims spread over
  several sentences.
* ``nli``: a sentence-transformers CrossEncoder trained for natural language
  inference, loaded from the local directory ``FEDMEM_NLI_MODEL`` (never fetched);
  a contradiction probability at or above ``FEDMEM_NLI_THRESHOLD`` counts.

Further resolvers register in :data:`RESOLVERS`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from memory.updates import detect


@dataclass(frozen=True)
class Verdict:
    reason: str
    details: dict[str, Any] = field(default_factory=dict)


class Resolver(Protocol):
    name: str

    def check(self, new: str, old: str) -> Verdict | None: ...


@dataclass
class RuleResolver:
    """The update rules of :mod:`memory.updates` (restatement, negation, change,
    replacement, ending); the rule that fired is in the verdict's details."""

    name: str = "rules"

    def check(self, new: str, old: str) -> Verdict | None:
        found = detect(new, old)
        if found is None:
            return None
        return Verdict(found.reason, {**found.details, "rule": found.rule})


class NliResolver:
    """A local NLI cross-encoder: contradiction probability of (old, new)."""

    name = "nli"

    def __init__(self) -> None:
        path = settings.FEDMEM_NLI_MODEL
        if not path:
            raise ImproperlyConfigured(
                "FEDMEM_CONTRADICTION_RESOLVER=nli needs FEDMEM_NLI_MODEL (a local model directory)."
            )
        self.model = _cross_encoder(path)
        labels = {str(v).lower(): int(k) for k, v in self.model.config.id2label.items()}
        if "contradiction" not in labels:
            raise ImproperlyConfigured(f"{path}: the model has no 'contradiction' label ({sorted(labels)}).")
        self.index = labels["contradiction"]
        self.threshold = settings.FEDMEM_NLI_THRESHOLD

    def check(self, new: str, old: str) -> Verdict | None:
        with _LOCK:
            probabilities = self.model.predict([(old, new)], apply_softmax=True, show_progress_bar=False)[0]
        score = float(probabilities[self.index])
        if score < self.threshold:
            return None
        return Verdict(f"NLI contradiction probability {score:.2f} >= {self.threshold:.2f}", {"score": score})


_LOCK = threading.Lock()


@lru_cache(maxsize=2)
def _cross_encoder(path: str) -> Any:
    from sentence_transformers import CrossEncoder

    return CrossEncoder(path, device="cpu", local_files_only=True)


RESOLVERS: dict[str, Callable[[], Resolver]] = {"rules": RuleResolver, "nli": NliResolver}


def get_resolver() -> Resolver:
    name = settings.FEDMEM_CONTRADICTION_RESOLVER
    if name not in RESOLVERS:
        raise ImproperlyConfigured(
            f"FEDMEM_CONTRADICTION_RESOLVER={name!r}: one of {', '.join(sorted(RESOLVERS))}."
        )
    return RESOLVERS[name]()
