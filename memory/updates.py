"""Update detection: does a new fact make an older one no longer true?

Each sentence is read into a :class:`Frame` from its spaCy dependency parse: the
subject, the root predicate (lemma and particle), its arguments (object, attribute,
prepositional objects) with a coarse value type, its tense (a state that holds now,
or a past event), and the update wording around it ("now", "no longer", "instead
of X", "from A to B"). :func:`detect` then compares a new frame with an old one
through a few rules, each precise on its own (a false supersede hides a true fact,
so every rule needs the same thing named on both sides):

* ``restatement``: same subject and predicate, another value of a compatible type
  in the same slot ("routes its orders through the Leeds depot" / "... the Hull
  depot"). Relations that hold several values at once ("uses", "likes", "depends
  on") need the same head noun ("prefers aisle seats" / "window seats") or "now".
* ``negation``: the same claim negated, or "no longer" ("Bob no longer reports to
  Chris").
* ``change``: a change verb with a destination ("was moved / raised / migrated /
  slipped to X", "moved ... from A to B"): the old fact about the same thing holds
  another value of X's type (a date for a date, a quantity in the same unit, a place
  for a place), or names A.
* ``replacement``: "instead of X", "replaced X with Y": the old fact states X in the
  slot the new one fills.
* ``ending``: a verb that ends a state ("cancelled", "called off", "paused",
  "closed", "left the company") whose object is what the old fact says is going on
  (the old fact's verb, its object, or a noun of the same kind: subscription /
  plan), and the old fact is a current state, a plan, or the opposite event
  ("opened" / "closed").

A past event on the old side ("wrote the runbook", "hired forty engineers") is
history and is never retired, except by the change of the same kind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from memory.extraction.nlp import parse

# --- lexicon ----------------------------------------------------------------------

# Verbs that move a value: the new value follows "to" (or "into", "for" with a date).
CHANGE_VERBS = {
    "move", "migrate", "switch", "shift", "relocate", "transfer", "change", "reschedule",
    "push", "postpone", "delay", "slip", "bring", "raise", "lower", "increase", "decrease",
    "reduce", "cut", "bump", "upgrade", "downgrade", "extend", "shorten", "rise", "drop",
    "fall", "climb", "jump", "grow", "shrink", "update", "set", "reassign", "promote",
    "demote", "rename", "convert", "port", "rebrand", "advance", "return", "go",
}  # fmt: skip
DESTINATION_PREPS = {"to", "into", "onto"}
# Verbs of a level that moves: the newest level replaces the one before, whatever
# its words ("rose to its highest level" / "dropped to a record low").
LEVEL_VERBS = {
    "rise", "fall", "drop", "climb", "jump", "grow", "shrink", "increase", "decrease",
    "sink", "soar", "plunge", "slip", "surge", "dip", "recover", "rebound", "decline",
}  # fmt: skip
# Verbs that end a state, a plan or an activity of their object (or subject, when
# they have none: "the office closed").
ENDING_VERBS = {
    "cancel", "call off", "close", "shut", "shut down", "close down", "pause", "halt",
    "stop", "suspend", "end", "terminate", "discontinue", "scrap", "abandon", "shelve",
    "quit", "leave", "resign", "retire", "wind down", "sell", "sell off", "deprecate",
    "withdraw", "drop", "kill", "axe", "freeze", "cease", "revoke", "finish", "complete",
    "break off", "break up", "unsubscribe", "delete", "remove", "disband", "dissolve",
}  # fmt: skip
# The event an ending verb reverses, when the old fact tells that event in the past.
STARTING_VERBS = {
    "open", "launch", "start", "begin", "build", "join", "subscribe", "sign", "sign up",
    "create", "found", "establish", "announce", "plan", "schedule", "add", "enable",
    "introduce", "hire", "appoint", "book", "order", "adopt", "deploy", "release",
}  # fmt: skip
# Leaving one of these ends the roles the person held there.
ORGANISATION_NOUNS = {
    "company", "firm", "team", "job", "organisation", "organization", "group", "department",
    "employer", "business", "agency", "startup", "role", "position", "post", "board", "lab",
    "office", "project", "squad", "unit", "staff", "school", "university", "club", "band",
}  # fmt: skip
ROLE_VERBS = {
    "work", "lead", "manage", "run", "head", "own", "report", "handle", "coordinate",
    "maintain", "chair", "supervise", "oversee", "serve", "cover", "staff",
}  # fmt: skip
# Attributes that are not roles one leaves with a job.
KINSHIP_NOUNS = {
    "brother", "sister", "mother", "father", "son", "daughter", "parent", "child", "wife",
    "husband", "partner", "cousin", "friend", "uncle", "aunt", "neighbour", "neighbor",
    "name", "native", "citizen",
}  # fmt: skip
# Nouns of one kind: ending one ends the other ("cancelled her subscription" / "is on
# the Team plan"). Nominalisations point at the verb they name ("construction" / "is
# building").
NOUN_KINDS = [
    {"subscription", "plan", "membership", "tier", "account", "contract", "licence",
     "license", "package", "trial"},
    {"strike", "walkout", "protest", "stoppage"},
    {"meeting", "call", "session", "appointment", "sync", "standup"},
    {"project", "programme", "program", "initiative"},
]  # fmt: skip
NOMINALISATIONS = {
    "construction": "build", "building": "build", "development": "develop",
    "production": "produce", "expansion": "expand", "rollout": "roll", "deployment": "deploy",
    "migration": "migrate", "subscription": "subscribe", "membership": "join",
    "partnership": "partner", "sale": "sell", "operation": "operate", "investigation":
    "investigate", "negotiation": "negotiate", "recruitment": "recruit", "hiring": "hire",
    "support": "support", "service": "serve", "coverage": "cover", "plan": "plan",
    "strike": "strike", "trial": "trial", "study": "study", "talks": "talk",
}  # fmt: skip
# Relations that gather values: another value is an addition, even with "now"
# ("now supports offline mode"), unless it is a quantity ("now includes 100 seats").
ACCUMULATING = {
    "have", "include", "support", "offer", "speak", "know", "visit", "own", "play",
    "contain", "attend", "study", "teach", "collect", "watch", "eat", "drink", "like",
    "love", "enjoy", "read", "write", "cover", "mention", "meet", "call", "email", "hire",
    "buy", "order", "ship", "build", "make", "produce", "supply", "sell", "serve", "follow",
    "need", "want", "accept", "allow", "require", "join", "contact", "track", "monitor",
    "keep", "add", "hate", "dislike", "win", "lose", "receive", "send", "cook", "grow",
}  # fmt: skip
# Relations that usually hold several values but are switched from one to another:
# another name replaces the old one only when the writer says "now".
SWITCHABLE = {"use", "depend", "integrate", "rely", "store", "host", "sync"}
# Preferences pick one value among alike ones: "prefers tea" / "prefers coffee" (alike
# by embedding), not "prefers window seats" / "prefers direct flights".
PREFERENCE = {"prefer", "favour", "favor", "choose", "pick", "opt"}
# Cosine (packaged MiniLM) at or above which two preferred values are of one kind:
# measured on value pairs ("tea" / "coffee" 0.62, "window seats" / "aisle seats" 0.63,
# "morning" / "evening flights" 0.88 against "window seats" / "direct flights" 0.26,
# "jazz" / "hiking" 0.19, "dark mode" / "offline mode" 0.42).
PREFERENCE_SIMILARITY = 0.5
# Adjectives that name mutually exclusive states.
STATE_ADJECTIVES = [
    {"open", "closed", "shut"},
    {"active", "inactive", "dormant", "suspended", "cancelled", "canceled", "paused"},
    {"enabled", "disabled"},
    {"available", "unavailable"},
    {"online", "offline"},
    {"public", "private"},
    {"free", "paid"},
    {"single", "married", "divorced", "engaged", "widowed"},
    {"alive", "dead"},
    {"up", "down"},
    {"on", "off"},
    {"healthy", "degraded", "broken", "down"},
    {"required", "optional"},
    {"vegetarian", "vegan", "pescatarian"},
]
# Relations read as one: "is based in" / "lives in" / "works from" name where
# someone is; "is hosted on" / "runs on" where something runs.
RELATION_CLASSES = {
    "live in": "located", "be base in": "located", "base in": "located", "reside in": "located",
    "be locate in": "located", "work from": "located", "work in": "located", "work out of":
    "located", "be in": "located", "stay in": "located", "work at": "employed",
    "work for": "employed", "be employ by": "employed", "employ by": "employed",
    "run on": "hosted", "be host on": "hosted", "host on": "hosted", "be deploy on": "hosted",
    "deploy on": "hosted", "live on": "hosted", "be deploy to": "hosted",
    "be schedule for": "scheduled", "schedule for": "scheduled", "be plan for": "scheduled",
    "plan for": "scheduled", "be set for": "scheduled", "set for": "scheduled", "be on":
    "scheduled?", "take place on": "scheduled", "happen on": "scheduled", "be due on":
    "scheduled", "be due": "scheduled",
}  # fmt: skip
# Verbs that say a thing happens, runs or goes on.
OCCURRENCE_VERBS = {
    "happen", "take", "go", "run", "continue", "operate", "hold", "schedule", "plan",
    "occur", "start", "begin", "open", "proceed", "meet", "air", "play", "stream",
}  # fmt: skip
_PRONOUNS = {
    "i", "you", "he", "she", "it", "we", "they", "me", "him", "her", "us", "them", "my",
    "your", "his", "its", "our", "their", "this", "that", "these", "those", "who", "which",
    "what", "someone", "everyone", "anyone", "nobody", "something", "everything", "one",
    "mine", "yours", "hers", "ours", "theirs", "myself", "itself", "themselves",
}  # fmt: skip
_STATE_WORDS = {word for group in STATE_ADJECTIVES for word in group}
ADDITIVE = {"also", "too", "additionally", "well", "another", "second"}
WEEKDAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
MONTHS = {
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
    "sep", "sept", "oct", "nov", "dec",
}  # fmt: skip
TEMPORAL_NOUNS = {
    "today", "tomorrow", "tonight", "noon", "midnight", "morning", "evening", "afternoon",
    "week", "month", "year", "quarter", "weekend", "q1", "q2", "q3", "q4",
}  # fmt: skip
_CLOCK = re.compile(r"^\d{1,2}[:.h]\d{2}$|^\d{1,2}(am|pm)$", re.I)
_ARG_DEPS = ("dobj", "attr", "acomp", "oprd", "dative", "xcomp", "ccomp")
_DROP_DEPS = {"det", "punct", "case", "predet", "cc", "advmod", "neg"}


# --- frames -------------------------------------------------------------------------


@dataclass(frozen=True)
class Value:
    """One argument of the predicate: its words and what kind of value it is."""

    role: str  # "dobj", "attr", "acomp", "prep:through", ...
    words: tuple[str, ...]  # content lemmas, in order
    head: str  # lemma of the head word
    kind: str  # "time", "quantity:<unit>", "name", "noun", "adj"
    mentions: frozenset[str]  # every content lemma of the subtree

    @property
    def text(self) -> str:
        return " ".join(self.words)


@dataclass(frozen=True)
class Frame:
    subject: tuple[str, ...]  # content lemmas of the subject phrase
    subject_head: str
    subject_proper: bool
    verb: str  # lemma, with its particle ("call off")
    copular: bool
    passive: bool
    state: bool  # holds now (present, progressive, future, planned); else a past event
    negated: bool
    now: bool
    additive: bool
    values: tuple[Value, ...]
    instead_of: Value | None
    origin: Value | None  # "from A"
    destination: Value | None  # "to B"
    lemmas: frozenset[str]  # every content lemma of the sentence
    mention_heads: frozenset[str] = field(default_factory=frozenset)

    @property
    def relation(self) -> str:
        return self.verb


def _lemma(token: Any) -> str:
    if token.pos_ == "PROPN" or token.like_num:
        return token.text.lower().rstrip(".")
    return token.lemma_.lower()


def _content(token: Any) -> bool:
    if token.dep_ in _DROP_DEPS and token.lower_ not in ("no",):
        return False
    if token.pos_ == "PRON" and (token.lower_ in _PRONOUNS or token.tag_.startswith(("PRP", "WP"))):
        return False  # a name the tagger took for a pronoun ("Tara") stays
    if token.pos_ in ("ADP", "CCONJ", "SCONJ", "PART", "AUX") and token.dep_ != "prt":
        return False
    return any(c.isalnum() for c in token.text)


def _words(token: Any, stop: set[int] | None = None) -> list[Any]:
    """The content tokens of ``token``'s phrase, nested prepositional phrases cut
    when they are listed in ``stop``."""
    out = []
    for t in token.subtree:
        if stop and any(a.i in stop for a in t.ancestors if a.i != token.i and token in a.ancestors):
            continue
        if _content(t):
            out.append(t)
    return out


def _kind(token: Any, tokens: list[Any]) -> str:
    if token.pos_ == "ADJ":
        return "adj"
    lemmas = [t.text.lower() for t in tokens]
    ents = {t.ent_type_ for t in tokens if t.ent_type_}
    if (
        ents & {"DATE", "TIME"}
        or any(w in WEEKDAYS or w in MONTHS or _CLOCK.match(w) for w in lemmas)
        or (token.lemma_.lower() in TEMPORAL_NOUNS and token.pos_ != "PROPN")
    ):
        return "time"
    # "Postgres 16", "GPT-OSS 20B": a name with a version number is a name.
    if any(t.pos_ == "PROPN" for t in tokens) and not ents & {"MONEY", "PERCENT"}:
        return "name"
    if any(t.like_num for t in tokens) or ents & {"CARDINAL", "MONEY", "PERCENT", "QUANTITY"}:
        unit = "" if token.like_num else token.lemma_.lower()
        if ents & {"MONEY"}:
            unit = "money"
        if ents & {"PERCENT"} or token.text == "%":
            unit = "percent"
        return f"quantity:{unit}"
    if token.pos_ == "ADJ":
        return "adj"
    if any(c.isdigit() for c in token.text) and any(c.isalpha() for c in token.text):
        return "name"  # an identifier: "kestrel42", "v2"
    if (
        token.pos_ == "PROPN"
        or any(t.pos_ == "PROPN" for t in tokens)
        or ents & {"GPE", "ORG", "PERSON", "LOC"}
    ):
        return "name"
    return "noun"


def _value(role: str, token: Any, exclude: list[Any] | None = None) -> Value:
    cut = {t.i for p in exclude or () for t in p.subtree}
    tokens = [t for t in _words(token) if t.i not in cut]
    if not tokens:
        tokens = [token]
    return Value(
        role=role,
        words=tuple(_lemma(t) for t in tokens),
        head=_lemma(token),
        kind=_kind(token, tokens),
        mentions=frozenset(_lemma(t) for t in token.subtree if _content(t) and t.i not in cut),
    )


def _is_state(root: Any, children: list[Any]) -> bool:
    auxes = [c for c in children if c.dep_ in ("aux", "auxpass")]
    aux_words = {a.lower_ for a in auxes}
    if aux_words & {"will", "shall", "'ll", "going", "is", "are", "am", "'s", "'re"} and root.tag_ != "VBN":
        return True  # future or progressive
    if root.tag_ in ("VBZ", "VBP", "VB") and not aux_words & {"did", "had"}:
        return True
    if root.lemma_ == "be" or root.pos_ == "AUX":
        return True  # a copula states a property, in any tense
    if root.tag_ == "VBN":
        # "is scheduled for", "are hosted on": a present passive is a state; "was
        # hired", "has written" are events.
        return bool(aux_words & {"is", "are", "am", "be", "being", "'s", "'re"})
    return root.tag_ == "VBG"


def _frame(sent: Any) -> Frame | None:
    root = sent.root
    children = list(root.children)
    if root.pos_ not in ("VERB", "AUX"):
        return None
    subjects = [c for c in children if c.dep_ in ("nsubj", "nsubjpass")]
    if not subjects:
        return None
    subj = subjects[0]
    subject_tokens = _words(subj)
    if not subject_tokens:
        return None
    particles = [c.lemma_.lower() for c in children if c.dep_ == "prt"]
    verb = root.lemma_.lower() + ("".join(" " + p for p in particles))
    negated = any(c.dep_ == "neg" for c in children)
    now = False
    for t in sent:
        if (t.lower_ == "longer" and any(c.lower_ == "no" for c in t.children)) or t.lower_ == "anymore":
            negated = True
        if t.lower_ in ("now", "currently", "nowadays") and t.dep_ in ("advmod", "npadvmod"):
            now = True
    additive = any(t.lower_ in ADDITIVE and t.dep_ in ("advmod", "amod", "pobj", "det") for t in sent)
    values: list[Value] = []
    instead_of = origin = destination = None
    # "instead of X" is what stops being true, not part of the new value.
    insteads = [t for t in sent if t.lower_ in ("instead", "rather")]
    insteads += [t.head for t in insteads if t.head.lower_ in ("of", "than")]
    preps = [c for c in children if c.dep_ in ("prep", "agent")]
    for c in children:
        if c.dep_ in _ARG_DEPS:
            # A phrase the parser hung on the object or adjective ("stores raw events
            # in Snowflake", "is open on Mondays") is read as the verb's, as the same
            # sentence without "now" is often parsed.
            lifted = [
                p for p in c.children if p.dep_ == "prep" and p.lower_ != "of" and c.dep_ in ("dobj", "acomp")
            ]
            values.append(_value(c.dep_, c, exclude=lifted + insteads))
            preps.extend(lifted)
    if (
        root.tag_ == "VBN"
        and root.lower_ in _STATE_WORDS
        and any(c.dep_ == "auxpass" and c.lower_ in ("is", "are", "am") for c in children)
    ):
        # "The kitchen is closed on Mondays": a state, as "is open".
        values.append(Value("acomp", (root.lower_,), root.lower_, "adj", frozenset({root.lower_})))
        verb = "be"
    for c in preps:
        objects = [o for o in c.children if o.dep_ in ("pobj", "pcomp")]
        if objects:
            v = _value(f"prep:{c.lemma_.lower()}", objects[0], exclude=insteads)
            values.append(v)
            if c.lower_ == "from":
                origin = v
            elif c.lower_ in DESTINATION_PREPS:
                destination = v
    if destination is None and verb.split()[0] in CHANGE_VERBS:
        # "was changed to heron77": the parser took the value for an infinitive.
        for c in children:
            infinitive = c.dep_ in ("advcl", "xcomp") and any(
                a.dep_ == "aux" and a.lower_ == "to" for a in c.children
            )
            if infinitive and (any(ch.isdigit() for ch in c.text) or c.text[:1].isupper()):
                destination = _value("prep:to", c)
                values = [v for v in values if v.role not in ("advcl", "xcomp")] + [destination]
    for t in sent:
        # "instead of X", "rather than X", "in place of X"
        if t.lower_ in ("instead", "rather") or (t.lower_ == "place" and t.head.lower_ == "in"):
            for o in t.subtree:
                if o.dep_ == "pobj" and o is not t:
                    instead_of = _value("instead", o)
                    break
            if instead_of is None:
                following = [o for o in sent if o.i > t.i + 1 and o.dep_ == "pobj"]
                if following and sent[t.i - sent.start + 1].lower_ in ("of", "than"):
                    instead_of = _value("instead", following[0])
    if verb in ("replace", "swap", "substitute") and values:
        # "replaced X with Y" / "X was replaced by Y": X is what stops being true.
        if root.tag_ == "VBN" and any(c.dep_ == "nsubjpass" for c in children):
            instead_of = _value("instead", subj)
        else:
            objects = [v for v in values if v.role == "dobj"]
            if objects:
                instead_of = objects[0]
    lemmas = frozenset(_lemma(t) for t in sent if _content(t))
    return Frame(
        subject=tuple(_lemma(t) for t in subject_tokens),
        subject_head=_lemma(subj),
        subject_proper=subj.pos_ == "PROPN",
        verb=verb,
        copular=verb in ("be", "become"),
        passive=subj.dep_ == "nsubjpass",
        state=_is_state(root, children),
        negated=negated,
        now=now or verb == "become",
        additive=additive,
        values=tuple(values),
        instead_of=instead_of,
        origin=origin,
        destination=destination,
        lemmas=lemmas,
        mention_heads=frozenset(_lemma(t) for t in sent if t.pos_ in ("NOUN", "PROPN", "VERB")),
    )


@lru_cache(maxsize=4096)
def frames(text: str) -> tuple[Frame, ...]:
    """The frames of ``text``'s sentences (cached: a write compares one new text with
    many old ones, and the old ones come back)."""
    out = []
    for sent in parse([text])[0].sents:
        if not english(sent.text):
            continue  # the parser is English: its frames of other languages are noise
        frame = _frame(sent)
        if frame is None:
            frame = _reparsed(sent)
        if frame is not None:
            out.append(frame)
    return tuple(out)


@lru_cache(maxsize=1)
def _stop_words() -> tuple[frozenset[str], frozenset[str]]:
    from spacy.lang.de.stop_words import STOP_WORDS as DE
    from spacy.lang.en.stop_words import STOP_WORDS as EN
    from spacy.lang.es.stop_words import STOP_WORDS as ES
    from spacy.lang.fr.stop_words import STOP_WORDS as FR
    from spacy.lang.it.stop_words import STOP_WORDS as IT
    from spacy.lang.nl.stop_words import STOP_WORDS as NL
    from spacy.lang.pt.stop_words import STOP_WORDS as PT
    from spacy.lang.tr.stop_words import STOP_WORDS as TR

    return frozenset(EN), frozenset((DE | ES | FR | IT | NL | PT | TR) - EN)


def english(text: str) -> bool:
    """Whether a sentence reads as English: more English function words than other
    languages' (spaCy's stop word lists), and, without any English one, no letters
    beyond ASCII. On ReasonGraph's cases it keeps every English sentence."""
    en, foreign = _stop_words()
    words = re.findall(r"\w+", text.lower())
    english_words = sum(w in en for w in words)
    if sum(w in foreign for w in words) > english_words:
        return False
    return english_words > 0 or text.isascii()


def _reparsed(sent: Any) -> Frame | None:
    """A sentence the parser read without a verb and subject ("The nightly backup
    runs at 02:00" as one noun phrase): a verb-like plural noun after a noun is tried
    as the verb, cued by an adverb that changes nothing ("... backup usually runs
    ..."), and kept when the parser then finds its subject."""
    tokens = list(sent)
    for i in range(1, len(tokens)):
        t = tokens[i]
        if (
            t.tag_ not in ("NNS", "VBZ")
            or not t.lower_.endswith("s")
            or tokens[i - 1].pos_ not in ("NOUN", "PROPN", "ADJ")
        ):
            continue
        words = [x.text_with_ws for x in tokens]
        words.insert(i, "usually ")
        for candidate in parse(["".join(words)])[0].sents:
            root = candidate.root
            if root.lower_ == t.lower_ and root.pos_ == "VERB":
                return _frame(candidate)
    return None


@lru_cache(maxsize=4096)
def lemmas(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """Content lemmas of ``text``, and those that are some clause's subject."""
    doc = parse([text])[0]
    subjects = {
        _lemma(t)
        for t in doc
        if t.dep_ in ("nsubj", "nsubjpass")
        or (t.dep_ == "compound" and t.head.dep_ in ("nsubj", "nsubjpass"))
    }
    return frozenset(_lemma(t) for t in doc if _content(t)), frozenset(subjects)


# --- comparisons ----------------------------------------------------------------------


def same_subject(a: tuple[str, ...], b: tuple[str, ...], head_a: str, head_b: str) -> bool:
    """The same thing named twice: equal words, or the same head with one side's
    words a subset of the other's ("the API limit" / "the API rate limit")."""
    sa, sb = set(a), set(b)
    return sa == sb or (head_a == head_b and (sa <= sb or sb <= sa))


def _proper_subset(a: Frame, b: Frame) -> bool:
    # "Maria" / "Maria Lopez": the same person, named shorter.
    sa, sb = set(a.subject), set(b.subject)
    return (a.subject_proper or b.subject_proper) and bool(sa) and bool(sb) and (sa <= sb or sb <= sa)


def subjects_match(a: Frame, b: Frame) -> bool:
    return same_subject(a.subject, b.subject, a.subject_head, b.subject_head) or _proper_subset(a, b)


def _relation_key(frame: Frame, value: Value) -> str:
    prep = value.role.split(":", 1)[1] if value.role.startswith("prep:") else ""
    key = f"{frame.verb} {prep}".strip()
    if frame.copular and frame.verb == "become":
        key = f"be {prep}".strip()
    cls = RELATION_CLASSES.get(key)
    if cls == "scheduled?":
        # "is on Wednesday" is a date; "is on the Team plan" is not.
        return "scheduled" if value.kind == "time" else key
    return cls or key


def _same_words(a: Value, b: Value) -> bool:
    sa, sb = set(a.words), set(b.words)
    return sa == sb or (bool(sa) and bool(sb) and (sa <= sb or sb <= sa))


def compatible(a: Value, b: Value, *, mode: str = "single") -> bool:
    """Two values that compete for one slot: of one kind, and not one inside the other.
    ``mode`` is how the relation holds values (:func:`value_mode`)."""
    if _same_words(a, b):
        return False
    if any(a.head in group and b.head in group for group in STATE_ADJECTIVES):
        return True  # "is vegetarian" / "is now vegan", "open" / "closed"
    if a.kind == "time" or b.kind == "time":
        return a.kind == b.kind
    if a.kind.startswith("quantity") or b.kind.startswith("quantity"):
        if not (a.kind.startswith("quantity") and b.kind.startswith("quantity")):
            return False
        ua, ub = a.kind.split(":", 1)[1], b.kind.split(":", 1)[1]
        return ua == ub or not ua or not ub
    if mode == "accumulating" or a.kind == "adj" or b.kind == "adj":
        return False
    if a.head == b.head:
        return True  # "aisle seats" / "window seats", "Leeds depot" / "Hull depot"
    if mode == "preference":
        return similarity(a.text, b.text) >= PREFERENCE_SIMILARITY
    if mode == "switchable":
        return False
    return a.kind == "name" and b.kind == "name"


def value_mode(frame: Frame) -> str:
    verb = frame.verb.split()[0]
    if verb in PREFERENCE:
        return "preference"
    if verb in ACCUMULATING:
        return "accumulating"
    if verb in SWITCHABLE and not frame.now:
        return "switchable"
    return "single"


@lru_cache(maxsize=4096)
def similarity(a: str, b: str) -> float:
    """Cosine of two short phrases under the packaged embedding model."""
    from memory.embeddings import embed_texts

    vectors = embed_texts([a, b])
    return float(vectors[0] @ vectors[1])


@dataclass(frozen=True)
class Finding:
    rule: str
    reason: str
    details: dict[str, Any]


def _details(new: Frame, old: Frame, old_value: Value | None, new_value: Value | None, **extra: Any) -> dict:
    return {
        "subject": " ".join(new.subject),
        "relation": new.verb,
        "old_value": old_value.text if old_value else None,
        "new_value": new_value.text if new_value else None,
        **extra,
    }


def _restatement(new: Frame, old: Frame) -> Finding | None:
    if new.additive or old.additive or new.negated or old.negated:
        return None
    if not subjects_match(new, old):
        return None
    if not (new.state or old.state) and new.verb.split()[0] not in CHANGE_VERBS:
        return None  # two past events: both can be true
    if not old.state and new.state and not new.now:
        return None  # history stays true
    mode = value_mode(new)
    old_slots = {_relation_key(old, v): v for v in old.values}
    new_slots = {_relation_key(new, v): v for v in new.values}
    shared = set(old_slots) & set(new_slots)
    if not shared:
        return None
    differing = [k for k in shared if not _same_words(new_slots[k], old_slots[k])]
    if len(differing) != 1:
        return None
    # The other argument the two sentences share must agree (the same orders routed
    # elsewhere), and the new sentence may not name a different object.
    key = differing[0]
    a, b = new_slots[key], old_slots[key]
    # "is now a manager" / "is the on-call engineer": "now" on a copula replaces a
    # noun of another head too.
    renamed = new.now and a.kind == b.kind and a.kind in ("noun", "name") and key == "be"
    if not (compatible(a, b, mode=mode) or renamed):
        return None
    for role in ("dobj",):
        na = [v for v in new.values if v.role == role and _relation_key(new, v) != key]
        ob = [v for v in old.values if v.role == role and _relation_key(old, v) != key]
        if na and ob and not _same_words(na[0], ob[0]):
            return None
    return Finding(
        "restatement",
        f"same subject ({' '.join(new.subject)!r}) and relation ({key!r}), "
        f"another value: {b.text!r} -> {a.text!r}",
        _details(new, old, b, a),
    )


def _negation(new: Frame, old: Frame) -> Finding | None:
    if new.negated == old.negated or not subjects_match(new, old):
        return None
    if new.verb != old.verb and not (new.copular and old.copular):
        return None
    new_slots = {_relation_key(new, v): v for v in new.values}
    old_slots = {_relation_key(old, v): v for v in old.values}
    shared = set(new_slots) & set(old_slots)
    if new.values and old.values:
        if not shared or any(not _same_words(new_slots[k], old_slots[k]) for k in shared):
            return None
    elif new.values or old.values:
        return None
    value = next(iter(old_slots.values()), None)
    what = f"{' '.join(new.subject)} {new.verb} {value.text if value else ''}".strip()
    return Finding(
        "negation",
        f"same claim ({what!r}) {'negated' if new.negated else 'no longer negated'}",
        {**_details(new, old, value, value), "negated": new.negated},
    )


def _theme(frame: Frame) -> tuple[tuple[str, ...], str, Value | None]:
    """What a change or ending verb acts on: its object when it has one, else its subject."""
    objects = [v for v in frame.values if v.role == "dobj"]
    if objects and not frame.passive:
        return objects[0].words, objects[0].head, objects[0]
    return frame.subject, frame.subject_head, None


def _change(new: Frame, old: Frame) -> Finding | None:
    base = new.verb.split()[0]
    if base not in CHANGE_VERBS or new.negated or new.destination is None:
        return None
    if not old.state and old.verb.split()[0] not in CHANGE_VERBS:
        return None  # an old past event is history
    if old.negated:
        return None
    theme, theme_head, theme_value = _theme(new)
    destination = new.destination
    # Where the old fact holds the theme: as its subject, as its object (with the same
    # agent), or inside the very value that changes ("the same node as Elasticsearch").
    about_subject = same_subject(theme, old.subject, theme_head, old.subject_head) or (
        theme_value is None and _proper_subset(new, old)
    )
    about_object = None
    if theme_value is not None and subjects_match(new, old):
        for v in old.values:
            if v.role == "dobj" and _same_words(v, theme_value):
                about_object = v
    levels = base in LEVEL_VERBS and old.verb.split()[0] in LEVEL_VERBS
    for v in old.values:
        if v is about_object:
            continue
        if levels and about_subject and v.role == destination.role and v.kind == destination.kind:
            return Finding(
                "change",
                f"{' '.join(theme)!r} {new.verb} to {destination.text!r} (was {old.verb} to {v.text!r})",
                _details(new, old, v, destination, theme=" ".join(theme)),
            )
        inside = set(theme) <= v.mentions and v.head == destination.head and v.head not in theme
        if not (about_subject or about_object is not None or inside):
            continue
        if new.origin is not None and _same_words(new.origin, v):
            return Finding(
                "change",
                f"{' '.join(theme)!r} moved from {v.text!r} to {destination.text!r}",
                _details(new, old, v, destination, theme=" ".join(theme)),
            )
        if compatible(destination, v) or (inside and not _same_words(destination, v)):
            return Finding(
                "change",
                f"{' '.join(theme)!r} changed ({new.verb} to): {v.text!r} -> {destination.text!r}",
                _details(new, old, v, destination, theme=" ".join(theme)),
            )
    return None


def _replacement(new: Frame, old_text: str, new_text: str) -> Finding | None:
    if new.instead_of is None or new.negated:
        return None
    x = new.instead_of
    old_lemmas, old_subjects = lemmas(old_text)
    # All of X, not only its head ("9:30 AM" is not "8:15 AM").
    if not set(x.words) <= old_lemmas or x.head in old_subjects:
        return None
    # The old fact fills the same slot: the same subject, or the subject's and the
    # verb's or object's words beyond X itself ("Checkout ... stores carts" / "The
    # checkout service stores shopping carts").
    new_lemmas, _ = lemmas(new_text)
    shared = (new_lemmas & old_lemmas) - set(x.mentions)
    replacing = [v for v in new.values if v.role != "instead" and not _same_words(v, x)]
    same = any(subjects_match(new, old) for old in frames(old_text))
    if not (same or (len(shared) >= 2 and set(new.subject) & old_lemmas)):
        return None
    return Finding(
        "replacement",
        f"{' '.join(new.subject)!r} {new.verb}: {x.text!r} replaced",
        {
            "subject": " ".join(new.subject),
            "relation": new.verb,
            "old_value": x.text,
            "new_value": replacing[-1].text if replacing else None,
        },
    )


def _kin(a: str, b: str) -> bool:
    if a == b:
        return True
    if NOMINALISATIONS.get(a) == b or NOMINALISATIONS.get(b) == a:
        return True
    return any(a in kind and b in kind for kind in NOUN_KINDS)


def _ending(new: Frame, old: Frame) -> Finding | None:
    if new.verb not in ENDING_VERBS and new.verb.split()[0] not in ENDING_VERBS:
        return None
    if new.negated or old.negated or new.destination is not None:
        return None
    theme, theme_head, theme_value = _theme(new)
    activity = [v for v in new.values if v.role == "xcomp"]
    if activity and subjects_match(new, old) and old.state:
        # "stopped accepting new patients" / "is accepting new patients"
        if activity[0].head == old.verb.split()[0]:
            return Finding(
                "ending",
                f"{' '.join(new.subject)!r} {new.verb} {activity[0].text!r}",
                _details(new, old, old.values[0] if old.values else None, None),
            )
        return None
    # The theme and what it is of: "construction of the Phoenix plant".
    theme_words = set(theme_value.mentions) if theme_value else set(theme)
    old_verb = old.verb.split()[0]
    opposite = old_verb in STARTING_VERBS
    if not (old.state or opposite):
        return None
    agent_matches = subjects_match(new, old)
    # Leaving an organisation ends the roles its member held.
    if (
        new.verb.split()[0] in ("leave", "quit", "resign", "retire")
        and agent_matches
        and old.state
        and (theme_head in ORGANISATION_NOUNS or theme_value is None)
    ):
        role = [
            v for v in old.values if v.role == "attr" and v.kind == "noun" and v.head not in KINSHIP_NOUNS
        ]
        if role or old_verb in ROLE_VERBS:
            value = role[0] if role else (old.values[0] if old.values else None)
            held = f"{old.verb} {value.text if value else ''}".strip()
            return Finding(
                "ending",
                f"{' '.join(new.subject)!r} {new.verb} {' '.join(theme)!r}: no longer {held}",
                _details(new, old, value, None),
            )
    if theme_value is not None and same_subject(theme, old.subject, theme_head, old.subject_head):
        # "The organisers called off the conference" / "The conference will be held
        # in Porto": what the old fact says will happen is called off.
        found = _occurrence(new, old, theme)
        if found is not None:
            return found
    if theme_value is not None:
        # "TSMC paused construction": the agent is the old subject, the theme what the
        # old fact says it does or has.
        if not agent_matches:
            return None
        hit = None
        if _kin(theme_head, old_verb):
            hit = old.values[0] if old.values else None
            hit_name = old.verb
        else:
            for v in old.values:
                if _kin(theme_head, v.head) or (v.head in theme_words and v.kind != "time"):
                    hit = v
                    break
            if hit is None:
                return None
            hit_name = hit.text
        return Finding(
            "ending",
            f"{' '.join(new.subject)!r} {new.verb} {' '.join(theme)!r}: ends {hit_name!r}",
            _details(new, old, hit, None),
        )
    # No object: the subject ends ("the office closed", "the strike was called off").
    if same_subject(theme, old.subject, theme_head, old.subject_head):
        return _occurrence(new, old, theme)
    if opposite or old.state:
        for v in old.values:
            if (
                v.role == "dobj"
                and (v.head == theme_head or _kin(theme_head, v.head))
                and set(theme) <= old.lemmas
            ):
                return Finding(
                    "ending",
                    f"{' '.join(theme)!r} {new.verb}: ends {' '.join(old.subject)} {old.verb} {v.text!r}",
                    _details(new, old, v, None),
                )
    return None


def _occurrence(new: Frame, old: Frame, theme: tuple[str, ...]) -> Finding | None:
    """The old fact says when, where or whether the ended thing happens (not what it
    is about): a date or time, a plan ("will be held in Porto"), an ongoing activity."""
    old_verb = old.verb.split()[0]
    timed = [v for v in old.values if v.kind == "time"]
    planned = not old.copular and old.state and (old_verb in OCCURRENCE_VERBS or not old.values)
    if not (timed or planned or (old.state and old_verb in OCCURRENCE_VERBS)):
        return None
    value = timed[0] if timed else (old.values[0] if old.values else None)
    return Finding(
        "ending",
        f"{' '.join(theme)!r} {new.verb}: ends {old.verb} {value.text if value else ''}".strip(),
        _details(new, old, value, None),
    )


def detect(new_text: str, old_text: str) -> Finding | None:
    """The first rule by which ``new_text`` makes ``old_text`` no longer true, or None."""
    new_frames, old_frames = frames(new_text), frames(old_text)
    for new in new_frames:
        found = _replacement(new, old_text, new_text)
        if found:
            return found
        for old in old_frames:
            for rule in (_negation, _restatement, _change, _ending):
                found = rule(new, old)
                if found is not None:
                    return found
    return None
