"""Answers written from the facts a question was answered with: a pluggable synthesizer.

A :class:`Synthesizer` turns a :class:`Context` (the question, the facts used, the
causal chain among them, the entities they share) into an :class:`Answer` that
cites the item ids it rests on. The default, :class:`DeterministicSynthesizer`,
needs no model: it states the chain in order (root cause first for a
why-question) or lists the facts, and cites every fact it names. Other
synthesizers (an OpenAI-compatible chat-completions engine) are built by a
resolver the providers app registers (:func:`register_synthesizer_resolver`), so
this module never imports provider code.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.errors import SynthesizerNotFound
from memory.retrieval.framing import escape_text

BUILTIN_SYNTHESIZER = "builtin"
MAX_CONTEXT_FACTS = 30
MAX_CHAIN = 12

# "why" anywhere ("I need to understand why ..."), "what caused", "what led to", "how
# come", "reason for", "root cause", and the why-words of the languages the full text
# is stored in ("warum", "por qué", "pourquoi", "waarom", "neden", ...).
_WHY = re.compile(
    r"\b(why|how come|what (caused|causes|led to|leads to|triggered|made)|root cause|reason for"
    r"|because of what|warum|wieso|weshalb|por qu[eé]|pourquoi|waarom|neden|perch[eé]|varf[oö]r|hvorfor)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Fact:
    id: str
    content: str


@dataclass(frozen=True)
class Link:
    """One asserted causal hop: ``cause`` -> ``effect``, cited to the fact asserting it."""

    cause: str
    effect: str
    item_id: str


@dataclass
class Context:
    question: str
    facts: list[Fact]
    chain: list[Link] = field(default_factory=list)  # in causal order, root cause first
    entities: list[str] = field(default_factory=list)
    # The facts the chain runs through, root first, ending at the fact asked about
    # (a chain within one fact, as "A caused B, which led to C", has one).
    steps: list[Fact] = field(default_factory=list)

    @property
    def fact_ids(self) -> list[str]:
        return [f.id for f in self.facts]


@dataclass
class Answer:
    text: str
    citations: list[str]
    synthesizer: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "citations": self.citations,
            "synthesizer": self.synthesizer,
            "detail": self.detail,
        }


class Synthesizer(Protocol):
    name: str

    def synthesize(self, context: Context) -> Answer: ...


def is_why_question(question: str) -> bool:
    return bool(_WHY.search(question))


def _sentence(text: str) -> str:
    text = _clause(text)
    return text[:1].upper() + text[1:] if text else text


def _clause(text: str) -> str:
    # Stored text is data: escaped as recall frames it, so a fact can put no newline,
    # fake marker or "Question:" line into an answer a client hands to a model.
    return escape_text(text.strip().rstrip("."))


class DeterministicSynthesizer:
    """States what the memory holds, in order, and cites it. Honest about its limits:
    it never infers beyond the asserted links and says so when nothing answers."""

    name = BUILTIN_SYNTHESIZER

    def synthesize(self, context: Context) -> Answer:
        if not context.facts:
            return Answer("Nothing in memory answers this question.", [], self.name, {"form": "empty"})
        if context.chain:
            return self._chain(context)
        if is_why_question(context.question):
            # No chain among the facts on the question: say so rather than guess a cause.
            lines = [f"{_sentence(f.content)} [{f.id}]." for f in context.facts[:MAX_CONTEXT_FACTS]]
            return Answer(
                "No causal chain in memory explains this. Related facts: " + " ".join(lines),
                [f.id for f in context.facts[:MAX_CONTEXT_FACTS]],
                self.name,
                {"form": "no_chain"},
            )
        lines = [f"{_sentence(f.content)} [{f.id}]." for f in context.facts[:MAX_CONTEXT_FACTS]]
        return Answer(
            "According to memory: " + " ".join(lines),
            [f.id for f in context.facts[:MAX_CONTEXT_FACTS]],
            self.name,
            {"form": "facts"},
        )

    def _chain(self, context: Context) -> Answer:
        chain = context.chain[:MAX_CHAIN]
        if len(context.steps) > 1:
            # A chain through several facts is told as those facts, each once, in causal
            # order: the links between facts are whole statements, and "X led to Y"
            # between two sentences repeated each of them and read "... led to The ...".
            steps = context.steps[: MAX_CHAIN + 1]
            told = " → ".join(f"{_sentence(f.content)} [{f.id}]" for f in steps) + "."
            cited = list(dict.fromkeys(f.id for f in steps))
        else:
            # One fact stating its own chain: its cause and effect spans, in order.
            told = " ".join(
                f"{_sentence(link.cause)} → {_clause(link.effect)} [{link.item_id}]." for link in chain
            )
            cited = list(dict.fromkeys(link.item_id for link in chain))
        if is_why_question(context.question):
            text = f"Root cause: {_clause(chain[0].cause)} [{chain[0].item_id}]. Chain: {told}"
            form = "why"
        else:
            text = told
            form = "chain"
        # Facts the chain does not use are still context the answer rests on: cite them last.
        others = [f for f in context.facts if f.id not in cited][:3]
        if others and form == "chain":
            text += " Also relevant: " + " ".join(f"{_sentence(f.content)} [{f.id}]." for f in others)
            cited += [f.id for f in others]
        return Answer(text, cited, self.name, {"form": form, "chain_length": len(chain)})


Resolver = Callable[[Any, str], Synthesizer]
_resolver: Resolver | None = None


def register_synthesizer_resolver(resolver: Resolver | None) -> None:
    """``resolver(agent, name)`` builds the named synthesizer for the agent's tenant or
    raises an ApiError (the providers app registers one for chat-completions engines)."""
    global _resolver
    _resolver = resolver


def synthesizer_for(agent: Any, name: str | None) -> Synthesizer:
    if not name or name == BUILTIN_SYNTHESIZER:
        return DeterministicSynthesizer()
    if _resolver is None:
        raise SynthesizerNotFound("No such synthesizer.")
    return _resolver(agent, name)


def cited_ids(text: str, allowed: list[str]) -> list[str]:
    """The ids of ``allowed`` that ``text`` cites, in order of first citation."""
    found = [match for match in re.findall(r"[0-9a-fA-F-]{36}", text) if match in allowed]
    return list(dict.fromkeys(found))
