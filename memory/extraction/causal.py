"""Cause -> effect relations from explicit connectives, with span boundaries taken
from the dependency parse.

Both directions of wording are read:

* cause first: "X caused / led to / resulted in / triggered / produced Y",
  "X, so Y", "X; as a result, Y", "When X, Y", "Y was caused by X";
* effect first: "Y because (of) X", "Y due to X", "Y as a result of X",
  "Y after X" is *not* read (temporal, not causal).

The rules only see explicit cues; implicit causation ("the disk filled; the
service died") yields nothing. They read English (the packaged parser's language);
text detected as a language with a connective table of its own (German, Dutch,
French, Spanish, Italian, Portuguese, Turkish) is read by the ``cues`` extractor
(:mod:`memory.extraction.cues`) instead. A model-based extractor can be plugged in
through :data:`EXTRACTORS` (``FEDMEM_CAUSAL_EXTRACTORS``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings

from memory.extraction.relation import Relation

# Verbs whose subject is the cause; the value is the preposition introducing the
# effect ("lead to"), or None when the effect is the direct object ("cause").
CAUSE_VERBS: dict[str, str | None] = {
    "cause": None,
    "trigger": None,
    "produce": None,
    "create": None,
    "provoke": None,
    "induce": None,
    "lead": "to",
    "result": "in",
    "contribute": "to",
    "give": "to",  # "give rise to"
}


def _text(tokens: list[Any]) -> str:
    """Span text of contiguous tokens, trimmed of punctuation and conjunctions at the ends."""
    toks = list(tokens)
    while toks and (toks[0].is_punct or toks[0].lower_ in ("and", "but", "so", "then", "that")):
        toks = toks[1:]
    while toks and (toks[-1].is_punct or toks[-1].lower_ in ("and", "but", "so", "then")):
        toks = toks[:-1]
    if not toks:
        return ""
    doc = toks[0].doc
    return doc[toks[0].i : toks[-1].i + 1].text.strip()


def _subtree(token: Any, exclude: Any = None) -> list[Any]:
    skip = set(exclude.subtree) if exclude is not None else set()
    return [t for t in token.subtree if t not in skip]


def _clause_without(sent: Any, removed: list[Any]) -> list[Any]:
    gone = {t.i for t in removed}
    return [t for t in sent if t.i not in gone]


def _contiguous(tokens: list[Any]) -> list[Any]:
    """The longest contiguous run of ``tokens`` (a clause minus an embedded one can be split)."""
    if not tokens:
        return []
    runs: list[list[Any]] = [[tokens[0]]]
    for tok in tokens[1:]:
        if tok.i == runs[-1][-1].i + 1:
            runs[-1].append(tok)
        else:
            runs.append([tok])
    return max(runs, key=lambda run: sum(1 for t in run if not t.is_punct))


def _verb_relations(sent: Any) -> list[Relation]:
    out = []
    for tok in sent:
        if tok.pos_ not in ("VERB", "AUX") or tok.lemma_ not in CAUSE_VERBS:
            continue
        prep = CAUSE_VERBS[tok.lemma_]
        subj = next((c for c in tok.children if c.dep_ in ("nsubj", "csubj")), None)
        passive_subj = next((c for c in tok.children if c.dep_ == "nsubjpass"), None)
        if passive_subj is not None and prep is None:
            # "Y was caused by X"
            agent = next((c for c in tok.children if c.dep_ == "agent"), None)
            pobj = next((c for c in agent.children if c.dep_ == "pobj"), None) if agent is not None else None
            if pobj is not None:
                out.append(Relation(_text(_subtree(pobj)), _text(_subtree(passive_subj)), f"{tok.lemma_} by"))
            continue
        if subj is None:
            continue
        effect_head = None
        if prep is None:
            effect_head = next((c for c in tok.children if c.dep_ in ("dobj", "attr", "ccomp")), None)
        else:
            for child in tok.children:
                if child.dep_ == "dobj" and child.lower_ == "rise":  # "give rise to"
                    child = next((g for g in child.children if g.dep_ == "prep"), child)
                if child.dep_ == "prep" and child.lower_ == prep:
                    effect_head = next((g for g in child.children if g.dep_ in ("pobj", "pcomp")), None)
        if effect_head is None:
            continue
        cause = _text(_subtree(subj))
        effect = _text(_object_phrase(tok, effect_head))
        cue = tok.lemma_ if prep is None else f"{tok.lemma_} {prep}"
        out.append(Relation(cause, effect, cue))
    return out


def _object_phrase(verb: Any, head: Any) -> list[Any]:
    """The effect phrase: the object's subtree plus modifiers the parser hung on the
    verb after it ("led to a full disk *on db-1*"), up to a clause boundary."""
    tokens = []
    for tok in verb.doc[head.left_edge.i : verb.right_edge.i + 1]:
        if tok.i > head.right_edge.i and (
            tok.text in (",", ";", ":")
            or tok.dep_ in ("cc", "conj")
            or (tok.head == verb and tok.dep_ == "advcl")
        ):
            break
        tokens.append(tok)
    return tokens


def _fallback_relations(sent: Any, covered: set[int]) -> list[Relation]:
    """Cue verbs the tagger read as something else ("results" as a noun): split the
    clause at the cue positionally."""
    out = []
    for tok in sent:
        if tok.i in covered or tok.lower_ not in _FALLBACK_CUES:
            continue
        prep = _FALLBACK_CUES[tok.lower_]
        nxt = tok.doc[tok.i + 1] if tok.i + 1 < len(tok.doc) else None
        if prep is not None and (nxt is None or nxt.lower_ != prep):
            continue
        start = tok.i + (2 if prep else 1)
        before = _contiguous([t for t in sent if t.i < tok.i])
        after = []
        for t in tok.doc[start : sent.end]:
            if t.text in (",", ";", ":"):
                break
            after.append(t)
        out.append(Relation(_text(before), _text(after), f"{tok.lemma_} {prep}" if prep else tok.lemma_))
    return out


_FALLBACK_CUES: dict[str, str | None] = {
    "results": "in", "resulted": "in", "result": "in", "leads": "to", "led": "to",
    "causes": None, "caused": None, "triggers": None, "triggered": None,
}  # fmt: skip


# Multi-word prepositions introducing the cause after the effect ("Y due to X").
_CAUSE_PREPOSITIONS = [("as", "a", "result", "of"), ("because", "of"), ("due", "to"), ("owing", "to")]


def _prepositional_relations(sent: Any) -> list[Relation]:
    out = []
    words = [t.lower_ for t in sent]
    for phrase in _CAUSE_PREPOSITIONS:
        n = len(phrase)
        for i in range(len(words) - n + 1):
            if tuple(words[i : i + n]) != phrase:
                continue
            last = sent[i + n - 1]
            obj = next((c for c in last.children if c.dep_ in ("pobj", "pcomp")), None)
            if obj is None:
                # The parse hung the object elsewhere: take the tokens up to the clause end.
                tail = [t for t in sent[i + n :] if not t.is_punct or t.text not in (",", ".", ";")]
                cause_tokens = _contiguous(tail)
            else:
                cause_tokens = _subtree(obj)
            cause_set = {t.i for t in cause_tokens} | {sent[j].i for j in range(i, i + n)}
            if i == 0:
                # "Due to X, Y": the effect is what follows the cause phrase.
                rest = [t for t in sent if t.i not in cause_set]
            else:
                rest = [t for t in sent if t.i not in cause_set and t.i < sent[i].i]
            cause, effect = _text(cause_tokens), _text(_contiguous(rest))
            out.append(Relation(cause, effect, " ".join(phrase)))
    return out


def _clause_relations(sent: Any) -> list[Relation]:
    """Subordinate and coordinate cues: because / since (cause clause), when (condition),
    so / therefore / as a result (effect clause)."""
    out = []
    for tok in sent:
        low = tok.lower_
        if low in ("because", "since", "when", "whenever", "once") and tok.dep_ in ("mark", "advmod"):
            if low == "because" and tok.i + 1 < len(tok.doc) and tok.doc[tok.i + 1].lower_ == "of":
                continue  # the prepositional rule reads "because of"
            clause = tok.head
            if clause.dep_ not in ("advcl",):
                continue
            cause_tokens = [t for t in _subtree(clause) if t.i != tok.i]
            effect_tokens = _contiguous(_clause_without(sent, _subtree(clause)))
            out.append(Relation(_text(cause_tokens), _text(effect_tokens), low))
        elif low in ("so", "therefore", "thus", "consequently", "hence") and tok.i > sent.start:
            # "X, so Y": the cue opens the effect clause; everything before it is the cause.
            before = [t for t in sent if t.i < tok.i]
            after = [t for t in sent if t.i > tok.i]
            if low == "so" and after and after[0].lower_ in ("that", "much", "far"):
                continue
            if not before or not after:
                continue
            out.append(Relation(_text(before), _text(after), low))
    return out


def rule_relations(doc: Any) -> list[Relation]:
    found: list[Relation] = []
    for sent in doc.sents:
        verbal = _verb_relations(sent)
        covered = {tok.i for tok in sent if tok.pos_ in ("VERB", "AUX") and tok.lemma_ in CAUSE_VERBS}
        fallback = [] if verbal else _fallback_relations(sent, covered)
        for rel in (*verbal, *fallback, *_prepositional_relations(sent), *_clause_relations(sent)):
            if len(rel.cause) >= 2 and len(rel.effect) >= 2 and rel.cause != rel.effect:
                found.append(Relation(rel.cause[:500], rel.effect[:500], rel.cue))
    # "X. As a result, Y": the cue opens a sentence, the cause is the one before.
    for prev_sent, sent in zip(list(doc.sents), list(doc.sents)[1:], strict=False):
        lead = " ".join(t.lower_ for t in sent[:4])
        for cue in ("as a result", "therefore", "consequently", "because of this", "so"):
            if lead.startswith(cue + " ") or lead.startswith(cue + " ,"):
                effect = _text([t for t in sent if t.i >= sent.start + len(cue.split(" "))])
                found.append(Relation(_text(list(prev_sent)), effect, cue))
                break
    return list(dict.fromkeys(found))


def _rules(text: str, doc: Any) -> list[Relation]:
    """The English rules, on text the parser can read: a language with connectives of
    its own (:mod:`memory.extraction.cues`) is read there, not through an English parse."""
    from memory.extraction import cues
    from memory.retrieval.language import detect

    return [] if detect(text) in cues.languages() else rule_relations(doc)


def _cues(text: str, doc: Any) -> list[Relation]:
    from memory.extraction.cues import cue_relations
    from memory.retrieval.language import detect

    return cue_relations(text, detect(text))


Extractor = Callable[[str, Any], list[Relation]]
EXTRACTORS: dict[str, Extractor] = {"rules": _rules, "cues": _cues}


def extract_relations(text: str, doc: Any) -> list[tuple[str, Relation]]:
    """(extractor name, relation) for every configured extractor, in order."""
    out = []
    for name in settings.FEDMEM_CAUSAL_EXTRACTORS:
        extractor = EXTRACTORS.get(name)
        if extractor is None:
            raise ValueError(f"unknown causal extractor {name!r} in FEDMEM_CAUSAL_EXTRACTORS")
        out.extend((name, rel) for rel in extractor(text, doc))
    return out
