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
from dataclasses import dataclass
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
    "spark": None,
    "prompt": None,
    "bring": None,
}
# Causal verbs only with a particle: "bring about".
PARTICLES = {"bring": "about"}
# Verbs whose subject is the effect, the cause introduced by "from" ("Y resulted from X").
FROM_VERBS = frozenset({"result", "stem", "arise", "originate"})


def _text(tokens: list[Any]) -> str:
    """Span text of contiguous tokens, trimmed of punctuation and conjunctions at the ends."""
    toks = list(tokens)
    # A leading "that" is a complementizer ("so that ..."), not "that" of "That bug".
    while toks and (
        toks[0].is_punct
        or toks[0].lower_ in ("and", "but", "so", "then")
        or (toks[0].lower_ == "that" and toks[0].dep_ != "det")
    ):
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


def _contiguous(tokens: list[Any], head: Any = None) -> list[Any]:
    """The contiguous run of ``tokens`` holding ``head`` (the main clause's verb: "I was
    embarrassed | when I saw it | , so I apologized"), else the longest one (a clause
    minus an embedded one can be split)."""
    if not tokens:
        return []
    runs: list[list[Any]] = [[tokens[0]]]
    for tok in tokens[1:]:
        if tok.i == runs[-1][-1].i + 1:
            runs[-1].append(tok)
        else:
            runs.append([tok])
    held = [run for run in runs if head is not None and head in run]
    return held[0] if held else max(runs, key=lambda run: sum(1 for t in run if not t.is_punct))


@dataclass(frozen=True)
class _Found:
    """A relation as a rule finds it, in tokens, with the token positions of its cue:
    a span that runs into another cue of the sentence is cut there (:func:`_chained`)."""

    cause: list[Any]
    effect: list[Any]
    cue: str
    at: tuple[int, int]  # the cue's first and last token
    # The cause is what comes before the cue ("X, so Y"; "X, which caused Y").
    leading: bool = False


# Words in front of a further connective's clause ("delays | , which led to", "flooded
# | , so", "stopped | , and as a result").
_BOUNDARY = frozenset({",", ";", ":", "-", "and", "but", "which", "that", "who"})
_RELATIVE = frozenset({"which", "that", "who"})
_EFFECT_OPENERS = ("so", "therefore", "thus", "consequently", "hence")
# Mid-sentence "X, and as a result Y" (not "as a result of", the prepositional rule's).
_RESULT_PHRASES = [("as", "a", "result"), ("as", "a", "consequence")]


def _subject_phrase(verb: Any, subj: Any) -> tuple[list[Any], bool]:
    """The cause a causal verb's subject names, and whether it is the clause before it.
    A relative pronoun stands for what it refers to: the noun ("delays, which led to
    complaints"; "flooding that led to closures"), or the clause before it when the
    pronoun follows a comma and a noun no causal verb governs ("The fire damaged the
    warehouse, which resulted in a closure"; "The server crashed, which caused ...").
    A bare "this" / "that" stands for the clause or sentence before it."""
    doc = verb.doc
    if subj.lower_ in ("this", "that") and subj.tag_ == "DT" and not list(subj.children):
        # A bare demonstrative stands for what was just said: the clause before it in
        # its sentence ("The disk filled up, and this caused ..."), else the sentence
        # before ("The disk filled up. This caused the service to crash.").
        before = [t for t in verb.sent if t.i < subj.i]
        if any(t.pos_ in ("VERB", "AUX") for t in before):  # a clause, not "Hopefully, this ..."
            return before, True
        if verb.sent.start > 0:
            return list(doc[verb.sent.start - 1].sent), True
        return _subtree(subj), False
    if subj.lower_ not in _RELATIVE or subj.tag_ not in ("WDT", "WP"):
        # Without a relative clause stating a link of its own ("The layoffs, which
        # stemmed from the merger, caused ..."): that link is read on its own.
        linked = {
            t.i for c in subj.children
            if c.dep_ == "relcl" and (c.lemma_ in CAUSE_VERBS or c.lemma_ in FROM_VERBS) for t in c.subtree
        }  # fmt: skip
        return _contiguous([t for t in _subtree(subj) if t.i not in linked]), False
    after_comma = subj.i > 0 and doc[subj.i - 1].text == ","
    if verb.dep_ == "relcl":
        noun = verb.head
        governor = noun.head.head if noun.dep_ == "pobj" else noun.head
        if not (
            subj.lower_ == "which"
            and after_comma
            and noun.dep_ in ("dobj", "pobj", "attr")
            and governor.lemma_ not in CAUSE_VERBS
        ):
            return _contiguous(_subtree(noun, exclude=verb)), False
    return [t for t in verb.sent if t.i < subj.i], True


def _from_relation(verb: Any) -> _Found | None:
    """The relation of "Y resulted / stemmed / arose from X": the subject is the effect."""
    source = next((c for c in verb.children if c.dep_ == "prep" and c.lower_ == "from"), None)
    subj = next((c for c in verb.children if c.dep_ in ("nsubj", "csubj")), None)
    cause = (
        next((g for g in source.children if g.dep_ in ("pobj", "pcomp")), None)
        if source is not None
        else None
    )
    if subj is None or cause is None:
        return None
    effect, _clause = _subject_phrase(verb, subj)
    return _Found(_subtree(cause), effect, f"{verb.lemma_} from", (verb.i, source.i))


def _verb_relations(sent: Any) -> list[_Found]:
    out = []
    for tok in sent:
        if tok.pos_ not in ("VERB", "AUX"):
            continue
        if tok.lemma_ in FROM_VERBS and (found := _from_relation(tok)) is not None:
            out.append(found)
            continue
        if tok.lemma_ not in CAUSE_VERBS:
            continue
        particle = PARTICLES.get(tok.lemma_)
        if particle and not any(c.dep_ == "prt" and c.lower_ == particle for c in tok.children):
            continue
        prep = CAUSE_VERBS[tok.lemma_]
        subj = next((c for c in tok.children if c.dep_ in ("nsubj", "csubj")), None)
        passive_subj = next((c for c in tok.children if c.dep_ == "nsubjpass"), None)
        if passive_subj is not None and prep is None:
            # "Y was caused by X"
            agent = next((c for c in tok.children if c.dep_ == "agent"), None)
            pobj = next((c for c in agent.children if c.dep_ == "pobj"), None) if agent is not None else None
            if pobj is not None:
                out.append(
                    _Found(_subtree(pobj), _subtree(passive_subj), f"{tok.lemma_} by", (tok.i, agent.i))
                )
            continue
        if subj is None or (
            subj.lower_ in ("what", "who") and tok.dep_ != "relcl" and not list(subj.children)
        ):
            continue  # a question names no cause: "What caused the outage?"
        effect_head = None
        last = tok.i
        if prep is None:
            effect_head = next((c for c in tok.children if c.dep_ in ("dobj", "attr", "ccomp")), None)
        else:
            for child in tok.children:
                if child.dep_ == "dobj" and child.lower_ == "rise":  # "give rise to"
                    child = next((g for g in child.children if g.dep_ == "prep"), child)
                if child.dep_ == "prep" and child.lower_ == prep:
                    effect_head = next((g for g in child.children if g.dep_ in ("pobj", "pcomp")), None)
                    last = child.i
        if effect_head is None:
            continue
        cause, leading = _subject_phrase(tok, subj)
        cue = " ".join(w for w in (tok.lemma_, particle, prep) if w)
        out.append(_Found(cause, _object_phrase(tok, effect_head), cue, (tok.i, last), leading))
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


def _fallback_relations(sent: Any, covered: set[int]) -> list[_Found]:
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
        cue = f"{tok.lemma_} {prep}" if prep else tok.lemma_
        out.append(_Found(before, after, cue, (tok.i, start - 1), True))
    return out


_FALLBACK_CUES: dict[str, str | None] = {
    "results": "in", "resulted": "in", "result": "in", "leads": "to", "led": "to",
    "causes": None, "caused": None, "triggers": None, "triggered": None,
}  # fmt: skip


# Multi-word prepositions introducing the cause after the effect ("Y due to X").
_CAUSE_PREPOSITIONS = [("as", "a", "result", "of"), ("because", "of"), ("due", "to"), ("owing", "to")]


def _prepositional_relations(sent: Any) -> list[_Found]:
    out = []
    words = [t.lower_ for t in sent]
    for phrase in _CAUSE_PREPOSITIONS:
        n = len(phrase)
        for i in range(len(words) - n + 1):
            if tuple(words[i : i + n]) != phrase:
                continue
            last = sent[i + n - 1]
            # The object hangs on the phrase's last word, or on its first ("Due to heavy
            # fog, ...": "fog" is the object of "Due", "to" its complement).
            words_at = {sent[j].i for j in range(i, i + n)}
            obj = next(
                (c for head in (last, sent[i]) for c in head.children
                 if c.dep_ in ("pobj", "pcomp") and c.i not in words_at),
                None,
            )  # fmt: skip
            if obj is None:
                # The parse hung the object elsewhere: take the tokens up to the clause end.
                tail = [t for t in sent[i + n :] if not t.is_punct or t.text not in (",", ".", ";")]
                cause_tokens = _contiguous(tail)
            else:
                cause_tokens = _subtree(obj)
            cause_set = {t.i for t in cause_tokens} | words_at
            if i == 0:
                # "Due to X, Y": the effect is what follows the cause phrase.
                rest = [t for t in sent if t.i not in cause_set]
            else:
                rest = [t for t in sent if t.i not in cause_set and t.i < sent[i].i]
            out.append(_Found(cause_tokens, _contiguous(rest), " ".join(phrase), (sent[i].i, last.i)))
    return out


def _not_connective(so: Any, after: list[Any]) -> bool:
    """Whether "so" is "so that" or "so" of degree ("so relieved", "so many", "it so
    fun", "so pumped when ..."): the connective modifies the verb of the clause it
    opens, not the word right after it."""
    if after and (after[0].lower_ in ("that", "much", "far") or after[0].pos_ in ("ADJ", "ADV")):
        return True
    # ("- so take some time": the connective before an imperative is right before its verb)
    if so.head.i == so.i + 1 and so.head.tag_ != "VB":
        return True
    return so.head.pos_ in ("ADJ", "ADV") and so.head.i > so.i


def _clause_relations(sent: Any) -> list[_Found]:
    """Subordinate and coordinate cues: because / since (cause clause), when (condition),
    so / therefore / as a result (effect clause)."""
    out = []
    words = [t.lower_ for t in sent]
    for n, tok in enumerate(sent):
        low = tok.lower_
        if low in ("because", "since", "when", "whenever", "once") and tok.dep_ in ("mark", "advmod"):
            if low == "because" and tok.i + 1 < len(tok.doc) and tok.doc[tok.i + 1].lower_ == "of":
                continue  # the prepositional rule reads "because of"
            clause = tok.head
            if clause.dep_ not in ("advcl",):
                continue
            cause_tokens = [t for t in _subtree(clause) if t.i != tok.i]
            effect_tokens = _contiguous(_clause_without(sent, _subtree(clause)), clause.head)
            out.append(_Found(cause_tokens, effect_tokens, low, (tok.i, tok.i)))
        elif low in _EFFECT_OPENERS and tok.i > sent.start:
            # "X, so Y": the cue opens the effect clause; everything before it is the cause.
            before = [t for t in sent if t.i < tok.i]
            after = [t for t in sent if t.i > tok.i]
            if low == "so" and _not_connective(tok, after):
                continue
            if not before or not after:
                continue
            out.append(_Found(before, after, low, (tok.i, tok.i), True))
        elif n > 0 and any(tuple(words[n : n + len(p)]) == p for p in _RESULT_PHRASES):
            phrase = next(p for p in _RESULT_PHRASES if tuple(words[n : n + len(p)]) == p)
            last = tok.i + len(phrase) - 1
            if last + 1 < sent.end and tok.doc[last + 1].lower_ == "of":
                continue
            before = [t for t in sent if t.i < tok.i]
            after = [t for t in sent if t.i > last]
            if before and after:
                out.append(_Found(before, after, " ".join(phrase), (tok.i, last), True))
    return out


def _until(tokens: list[Any], other: _Found) -> list[Any] | None:
    """``tokens`` up to the clause of ``other``'s cue when a boundary word sets that
    clause off ("delays | , which led to", "flooded | , so"); None when the cue is
    inside a clause of the span's own ("when you create something")."""
    at = next((n for n, t in enumerate(tokens) if t.i >= other.at[0]), len(tokens))
    # The other relation's own subject may stand between the boundary and its cue.
    subject = {t.i for t in other.cause} if other.cause and other.cause[-1].i < other.at[0] else set()
    cut = at
    while cut > 0 and tokens[cut - 1].i in subject and tokens[cut - 1].lower_ not in _BOUNDARY:
        cut -= 1
    if cut == 0 or tokens[cut - 1].lower_ not in _BOUNDARY:
        return None
    while cut > 1 and tokens[cut - 1].lower_ in _BOUNDARY:
        cut -= 1
    return tokens[:cut]


def _subordinate(rel: _Found, found: list[_Found]) -> bool:
    """``rel``'s cue is inside the cause clause another relation opens ("when you
    create something"): a part of that clause, not a link of the sentence's chain."""
    return any(
        o is not rel and o.cause and o.cause[0].i > o.at[1] and o.cause[0].i <= rel.at[0] <= o.cause[-1].i
        for o in found
    )


def _chained(found: list[_Found]) -> list[_Found]:
    """One relation per link of a sentence that chains connectives: "The outage caused
    delays, which led to complaints" is outage -> delays and delays -> complaints, not
    outage -> "delays, which led to complaints". A span after its cue ends where a
    boundary word opens the clause of the next cue inside it; a cause before its cue
    ("X, so Y") begins after the last link before it, or after that link's cause when
    the cause follows its cue ("Because A, B, and as a result C": B -> C)."""
    out = []
    for rel in found:
        spans = []
        for span in (rel.cause, rel.effect):
            if span and span[0].i > rel.at[1]:
                inside = sorted(
                    (o for o in found if o is not rel and span[0].i < o.at[0] <= span[-1].i),
                    key=lambda o: o.at[0],
                )
                span = next((cut for o in inside if (cut := _until(span, o)) is not None), span)
            spans.append(span)
        cause, effect = spans
        earlier = [
            o for o in found
            if o is not rel and cause and cause[0].i <= o.at[0] < rel.at[0] and not _subordinate(o, found)
        ]  # fmt: skip
        if rel.leading and earlier:
            last = max(earlier, key=lambda o: o.at[0])
            end = last.at[1]
            if last.cause and last.cause[0].i > last.at[1]:
                end = max(end, last.cause[-1].i)
            tail = [t for t in cause if t.i > end]
            if any(not t.is_punct and t.lower_ not in _BOUNDARY for t in tail):
                cause = tail
        out.append(_Found(cause, effect, rel.cue, rel.at, rel.leading))
    return out


def rule_relations(doc: Any) -> list[Relation]:
    found: list[Relation] = []
    sents = list(doc.sents)
    # "X. As a result, Y": the cue opens a sentence, the cause is the one before.
    across: dict[int, _Found] = {}
    for n in range(1, len(sents)):
        sent = sents[n]
        lead = " ".join(t.lower_ for t in sent[:4])
        for cue in ("as a result", "therefore", "consequently", "because of this", "so"):
            if lead.startswith(cue + " ") or lead.startswith(cue + " ,"):
                if cue == "so" and _not_connective(sent[0], list(sent[1:])):
                    break  # "Congrats! So proud of you."
                width = len(cue.split(" "))
                effect = [t for t in sent if t.i >= sent.start + width]
                across[n] = _Found(list(sents[n - 1]), effect, cue, (sent.start, sent.start + width - 1))
                break
    chained: dict[int, _Found] = {}
    for n, sent in enumerate(sents):
        verbal = _verb_relations(sent)
        covered = {tok.i for tok in sent if tok.pos_ in ("VERB", "AUX") and tok.lemma_ in CAUSE_VERBS}
        fallback = [] if verbal else _fallback_relations(sent, covered)
        rels = [*verbal, *fallback, *_prepositional_relations(sent), *_clause_relations(sent)]
        if n in across:
            rels.append(across[n])
        linked = _chained(rels)
        if n in across:
            chained[n] = linked.pop()  # stated after every sentence's own, as before
        for rel in linked:
            cause, effect = _text(rel.cause), _text(rel.effect)
            if len(cause) >= 2 and len(effect) >= 2 and cause != effect:
                found.append(Relation(cause[:500], effect[:500], rel.cue))
    for n in sorted(chained):
        found.append(Relation(_text(chained[n].cause), _text(chained[n].effect), chained[n].cue))
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
