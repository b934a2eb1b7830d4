"""Contradiction resolvers: does a new fact contradict an older one?

A resolver is anything with a ``name`` and a ``check(new, old)`` that answers a
:class:`Verdict` (with its reason) or None. The one in use is named by
``FEDMEM_CONTRADICTION_RESOLVER``:

* ``rules`` (default, deterministic): reads (subject, relation, value, negation)
  claims from the spaCy dependency parse of each sentence and calls two facts
  contradictory when they share subject and relation and differ in value, or in
  negation only. It cannot see paraphrases (another verb or subject wording for
  the same claim), relations that hold several values at once ("likes tea" /
  "likes coffee" are reported), quantities compared by meaning ("over 100" /
  "150"), or claims spread over several sentences.
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

from memory.extraction.nlp import parse

# Subject and value phrases: these words carry no identity.
_DROP_DEPS = {"det", "punct", "case", "predet"}
# "also", "too", "as well": the writer adds a value rather than replacing one.
_ADDITIVE = {"also", "too", "additionally", "well"}
_VALUE_DEPS = ("dobj", "attr", "acomp", "oprd", "dative")


@dataclass(frozen=True)
class Verdict:
    reason: str
    details: dict[str, Any] = field(default_factory=dict)


class Resolver(Protocol):
    name: str

    def check(self, new: str, old: str) -> Verdict | None: ...


@dataclass(frozen=True)
class Claim:
    subject: str
    relation: str
    value: str
    negated: bool
    additive: bool


def _phrase(token: Any) -> str:
    words = [t.lemma_.lower() if t.pos_ != "PROPN" else t.text.lower() for t in token.subtree]
    deps = [t.dep_ for t in token.subtree]
    # Possessive pronouns ("our rotation") do not change what the subject is.
    kept = [
        w
        for t, w, d in zip(token.subtree, words, deps, strict=True)
        if d not in _DROP_DEPS and not (d == "poss" and t.pos_ == "PRON") and any(c.isalnum() for c in w)
    ]
    return " ".join(kept)


def claims(text: str) -> list[Claim]:
    """(subject, relation, value) claims of each sentence, read from its root verb."""
    out: list[Claim] = []
    for sent in parse([text])[0].sents:
        root = sent.root
        if root.pos_ not in ("VERB", "AUX"):
            continue
        children = list(root.children)
        subjects = [c for c in children if c.dep_ in ("nsubj", "nsubjpass")]
        if not subjects:
            continue
        negated = any(c.dep_ == "neg" for c in children)
        additive = any(t.lower_ in _ADDITIVE and t.dep_ in ("advmod", "amod", "pobj") for t in sent)
        relation = root.lemma_.lower()
        particles = [c.lemma_.lower() for c in children if c.dep_ == "prt"]
        if particles:
            relation += " " + " ".join(particles)
        value = ""
        objects = [c for c in children if c.dep_ in _VALUE_DEPS]
        if objects:
            value = _phrase(objects[0])
        else:
            for prep in (c for c in children if c.dep_ == "prep"):
                objects = [c for c in prep.children if c.dep_ == "pobj"]
                if objects:
                    relation += " " + prep.lemma_.lower()
                    value = _phrase(objects[0])
                    break
        if value:
            out.append(Claim(_phrase(subjects[0]), relation, value, negated, additive))
    return out


@dataclass
class RuleResolver:
    """Same subject and relation, another value (or the same claim negated)."""

    name: str = "rules"

    def check(self, new: str, old: str) -> Verdict | None:
        for a in claims(new):
            for b in claims(old):
                if a.subject != b.subject or a.relation != b.relation or a.additive or b.additive:
                    continue
                details = {
                    "subject": a.subject,
                    "relation": a.relation,
                    "old_value": b.value,
                    "new_value": a.value,
                }
                if a.value != b.value and a.negated == b.negated and not a.negated:
                    return Verdict(
                        f"same subject ({a.subject!r}) and relation ({a.relation!r}), "
                        f"another value: {b.value!r} -> {a.value!r}",
                        details,
                    )
                if a.value == b.value and a.negated != b.negated:
                    return Verdict(
                        f"same claim ({a.subject!r} {a.relation} {a.value!r}) "
                        f"{'negated' if a.negated else 'no longer negated'}",
                        {**details, "negated": a.negated},
                    )
        return None


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
