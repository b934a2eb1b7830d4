"""The causal chain behind a fact, walked backwards one best cause at a time.

From an *anchor* (for a why-question, the effect asked about) the walk asks, among a
pool of facts, which one reads best as the cause of the current fact, steps to it,
and repeats until no fact links well enough: that last fact is the root cause.
Facts below the answer's relevance floor may be walked through as long as they link
("The data center deployed a new GPU cluster." shares nothing with "Why did the
release cycle shorten?" but is the root of its chain).

A cause C of an effect E is scored (:func:`cause_score`):

* **asserted**: a stored span link continues an edge of C into an edge of E (the
  extractor matched a connective in both): ``1 + link score``;
* **implicit**, for facts joined by a specific entity, a synonym span or a shared
  word stem (a specific lexeme, or two derived from one word: "acquire" /
  "acquisition", "öksürük" / "öksürüğe", not the compound "klantenservice" /
  "klant", see :func:`_derived`): the :mod:`memory.reasoning.implicit` scorer (C's embedding against E's
  cause side, plus a bonus when C states a change), plus
  - ``LINK_BONUS`` when C's *predicate* (what C says happened: the words outside its
    subject, or its edge's effect span) names E's *cause side* (E's edge cause span,
    or its subject): "The data center deployed a new GPU cluster" -> "The new GPU
    cluster increased training throughput"; or when E restates two or more stems of
    C's predicate ("trailers queued at the gate" -> "The trailers queued at the gate
    delayed the orders");
  - minus ``PARALLEL_PENALTY`` when C and E have the same subject and C's predicate
    does not name E's cause side: two things said of one subject are siblings
    ("The GPU cluster also raised the electricity bill"), not cause and effect;
  - plus ``SESSION_BONUS`` when C was written in E's session;
  - in the stated chain, plus ``NAMED_BONUS`` when C states every content word of the
    cause span E's edge names (the span's stems without its language's stopwords and
    function words, "Cette"; a word the extractor cut at a connective suffix, Turkish
    "kalk|tığı için", is stated by a word it begins):
    C is compared with that span of a word or two, which no whole sentence resembles
    much ("De klant meldde een inlogprobleem via een ticket." / "het inlogprobleem").

A step is taken only above ``FLOOR`` and when the reverse reading (E causes C) does
not score clearly higher, unless E names its own cause span: C was compared with that
span, the reverse reading with the whole of C, and only the span is on the question of
what caused E.

The chain an answer states is walked with ``strict=True``, since it is read as the
cause: links also come from *thematic progression* (C's rheme, the non-hub lexemes
of the second half of the sentence by word position, the middle word included,
names E's theme, the words before the middle, by the same lexeme or one derived
from the same word: language-blind), or E's edge naming a cause span C states a word
of (beyond what E is about, unless the span is E's theme); the English parse
counts only between English facts; two facts on one theme that do not progress are
siblings and no step, and so is a fact with an additive particle ("also", "auch",
"también": it adds one more thing about its theme) unless what it adds progresses
into E; the reverse reading may not score higher at all unless E names
its own cause span; two facts sharing most of their word stems (``RESTATEMENT``)
restate one matter and are no step; in English, C is no cause of E when E opens on a
quantity C shares gone the other way ("increased its marketing budget" / "Lower
marketing spend ...") or when C names with "the" what E brings in with "a" (C comes
after E); after an asserted link the next step needs the score an implicit link of 1
would ask for (``FALL_OFF``), not none; and hubs are counted among the items of the
lexeme's language (``Pool(per_language=True)``). The ranking keeps the lenient walk.
Neither walk steps to a fact stating what a fact on its chain states (a sentence
written twice).
Everything here reads rows; nothing is written.
"""

# Turkish words in the docs: their letters are not look-alikes here.
# ruff: noqa: RUF002

from __future__ import annotations

import functools
import re
from collections.abc import Container
from dataclasses import dataclass
from typing import Any

from django.db import connection

from core.beside import Beside
from memory.extraction.clauses import WORD as _WORD
from memory.extraction.clauses import stems
from memory.models import CausalEdge, MemoryItem
from memory.retrieval.stopwords import FUNCTION_WORDS, STOPWORDS
from memory.retrieval.vectors import from_sent, sent_column
from memory.text import normalize

FLOOR = 0.6
# A chain is as strong as its links: a further cause scoring below this share of the
# link just taken is where the evidence falls off, and the walk stops there.
FALL_OFF = 0.75
LINK_BONUS = 0.15
# The strict walk's bonus for a cause stating the whole cause span its effect names.
NAMED_BONUS = 0.2
PARALLEL_PENALTY = 0.25
# Facts written in one session are about one matter: a cause from the effect's own
# session is likelier than an equally similar one from elsewhere.
SESSION_BONUS = 0.1
# The reverse reading must not beat the forward one by more than this.
REVERSE_MARGIN = 0.05
MAX_FACTS = 6
# Facts whose words overlap this much (Jaccard of stems) say the same thing.
RESTATEMENT = 0.6


@dataclass(frozen=True)
class Profile:
    """What the walk reads of one fact."""

    pk: Any
    text: str
    vector: Any
    cause_vector: Any  # the cause span of an edge the fact asserts, or None
    changes: bool
    subject: str  # digest of the main clause's subject lemma ("" when none was parsed)
    predicate: frozenset[str]  # stems of what the fact says happened
    cause_side: frozenset[str]  # stems of what the fact names as its cause or subject
    words: frozenset[str]
    session: Any  # (agent, session id), or None
    english: bool = True  # the parser's language: its subject and predicate mean something
    theme: frozenset[str] = frozenset()  # specific lexemes of the first half of the sentence
    rheme: frozenset[str] = frozenset()  # ... and of the rest
    named: frozenset[str] = frozenset()  # its edge's cause span: stems, not its function words


class Pool:
    """The facts a walk may step through: text and embedding read at once, the parse
    summary (subject, predicate) only for the facts a step actually weighs: the one
    stored at extraction (:mod:`memory.extraction.clauses`), else a parse now."""

    def __init__(self, tenant_id: Any, ids: list[Any], *, per_language: bool = False) -> None:
        wanted = list(dict.fromkeys(ids))
        # The three reads depend on none of each other: the facts' lexemes and their
        # edges are read beside their rows (core.beside), for every id asked; what
        # belongs to a fact left out below is dropped with it.
        side_terms = Beside(_specific_terms, tenant_id, wanted, per_language)
        side_edges = Beside(_edges_of, tenant_id, wanted)
        # Embeddings in binary (the same float32s, without parsing their text), read with
        # the rows; a fact without one (none is stored so) is left out.
        rows = [
            row
            for row in MemoryItem.objects.filter(pk__any=wanted)
            .annotate(sent=sent_column(MemoryItem._meta.db_table, "embedding"))
            .values_list("pk", "content", "agent_id", "session_id", "text_language", "clauses", "sent")
            if row[-1] is not None
        ]
        self.rows = {pk: (content, from_sent(sent)) for pk, content, *_rest, sent in rows}
        self.sessions = {pk: (agent, session) for pk, _c, agent, session, *_rest in rows if session}
        self.languages = {pk: lang for pk, *_rest, lang, _clauses, _sent in rows}
        self.stored = {pk: clauses for pk, *_rest, clauses, _sent in rows if clauses}
        self.ids = [pk for pk in wanted if pk in self.rows]
        # What each fact states, as a memory's identity reads it (case, width and
        # spacing aside): two writes of one sentence are one statement.
        self.said = {pk: normalize(self.rows[pk][0]) for pk in self.ids}
        self.words = {pk: stems(_WORD.findall(self.rows[pk][0])) for pk in self.ids}
        terms, halves = side_terms.result()
        self.terms = {pk: terms[pk] for pk in self.ids}
        self.halves = {pk: halves[pk] for pk in self.ids}
        # Derivations of one word meet on a crude stem: "acquire" / "acquisition".
        self.roots = {pk: _roots(terms) for pk, terms in self.terms.items()}
        self.edges: dict[Any, CausalEdge] = {}
        # Every edge of the facts, without their spans' embeddings: the walk's links are
        # asserted among them (asserted_links(..., edges=pool.all_edges), no second read).
        self.all_edges = [edge for edge in side_edges.result() if edge.item_id in self.rows]
        # A fact's first edge, and its cause span's embedding.
        for edge in self.all_edges:
            self.edges.setdefault(edge.item_id, edge)
        self.cause_vectors = {
            edge.pk: vector
            for edge in self.edges.values()
            if (vector := from_sent(edge.sent_cause)) is not None  # type: ignore[attr-defined]
        }
        self._profiles: dict[Any, Profile] = {}

    def summaries(self, pks: list[Any]) -> dict[Any, dict[str, Any]]:
        """The parse summary of each fact: stored when it was read from the fact's
        current text, else parsed now (the same summary, tested)."""
        from memory.extraction.clauses import summarize, valid
        from memory.extraction.nlp import parse

        out = {pk: self.stored[pk] for pk in pks if valid(self.rows[pk][0], self.stored.get(pk))}
        missing = [pk for pk in pks if pk not in out]
        texts = [self.rows[pk][0] for pk in missing]
        for pk, text, doc in zip(missing, texts, parse(texts) if texts else [], strict=True):
            out[pk] = summarize(text, doc)
        return out

    def profiles(self, pks: list[Any]) -> dict[Any, Profile]:
        missing = [pk for pk in pks if pk not in self._profiles]
        for pk, summary in self.summaries(missing).items():
            text, vector = self.rows[pk]
            edge = self.edges.get(pk)
            predicate = frozenset(summary["outside"])
            if edge is not None:
                predicate |= stems(_WORD.findall(edge.effect))
                cause_side = stems(_WORD.findall(edge.cause))
                lang = self.languages.get(pk) or ""
                stop = STOPWORDS.get(lang, frozenset()) | FUNCTION_WORDS.get(lang, frozenset())
                named = stems(w for w in _WORD.findall(edge.cause) if w.lower() not in stop)
            else:
                cause_side = frozenset(summary["inside"])
                named = frozenset()
            self._profiles[pk] = Profile(
                pk=pk, text=text, vector=vector,
                cause_vector=self.cause_vectors[edge.pk] if edge is not None else None,
                changes=bool(summary["changes"]), subject=summary["subject"],
                predicate=predicate, cause_side=cause_side, words=self.words[pk],
                session=self.sessions.get(pk), english=self.languages.get(pk) == "english",
                theme=self.halves[pk][0], rheme=self.halves[pk][1], named=named,
            )  # fmt: skip
        return {pk: self._profiles[pk] for pk in pks}


def _edges_of(tenant_id: Any, ids: list[Any]) -> list[CausalEdge]:
    """Every edge the facts assert, by id, without their spans' embeddings but the
    cause's (in binary, as ``sent_cause``)."""
    return list(
        CausalEdge.objects.filter(tenant_id=tenant_id, item_id__any=ids)
        .defer("cause_embedding", "effect_embedding")
        .annotate(sent_cause=sent_column(CausalEdge._meta.db_table, "cause_embedding"))
        .order_by("id")
    )


def _specific_terms(
    tenant_id: Any, ids: list[Any], per_language: bool = False
) -> tuple[dict[Any, frozenset[str]], dict[Any, tuple[frozenset[str], frozenset[str]]]]:
    """Per fact, its stored full-text lexemes that are not hubs of the tenant (the same
    rule as entity bridges: named by at most max(HUB_FLOOR, HUB_SHARE x N) items), and
    those lexemes split by word position into the sentence's first half (its *theme*,
    what it is about) and the rest (its *rheme*, what it says of it). ``per_language``:
    N counts the items of the lexeme's language only."""
    from memory.retrieval.lexical import tenant_stats
    from memory.retrieval.specificity import HUB_FLOOR, HUB_SHARE

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT m.id, m.text_language, l.lexeme, l.positions[1] FROM memory_item m "
            "CROSS JOIN LATERAL unnest(m.search_vector) AS l WHERE m.id = ANY(%s::uuid[])",
            [list(ids)],
        )
        rows = cursor.fetchall()
    # Document frequencies are kept per (language, lexeme): a stem means something
    # only in the configuration that produced it. A number is never a term here, so it
    # is not counted: each incident, order or date brings numbers no earlier call
    # counted (at 100k, most of a warm graph recall's term statistics: about one
    # statement and 2-3 ms per call, docs/performance.md).
    stats = tenant_stats(
        tenant_id, sorted({(lang, lexeme) for _pk, lang, lexeme, _p in rows if not lexeme.isdigit()})
    )

    # A hub among the items of its own language: in a tenant that stores mostly English,
    # the German connective "führt" is in a small share of all items but in a large one
    # of the German items, and joins every German fact to every other.
    def cap(lang: str) -> float:
        documents = stats.languages.get(lang, stats.documents) if per_language else stats.documents
        return max(HUB_FLOOR, HUB_SHARE * documents)

    out: dict[Any, set[str]] = {pk: set() for pk in ids}
    last: dict[Any, int] = {}
    for pk, _lang, _lexeme, position in rows:
        last[pk] = max(last.get(pk, 0), position or 0)
    theme: dict[Any, set[str]] = {pk: set() for pk in ids}
    rheme: dict[Any, set[str]] = {pk: set() for pk in ids}
    for pk, lang, lexeme, position in rows:
        if not lexeme.isdigit() and 0 < stats.df.get((lang, lexeme), 0) <= cap(lang):
            out[pk].add(lexeme)
            if len(lexeme) < 2:
                continue
            # Positions count every word (stopwords too): the midpoint is the sentence's.
            # The theme is what comes before it; the middle word of an odd count is
            # already what the sentence says ("La sequía redujo el *agua* disponible
            # para las plantas"), and in a verb-final language often its object.
            (theme if (position or 0) * 2 < last[pk] + 1 else rheme)[pk].add(lexeme)
    halves = {pk: (frozenset(theme[pk]), frozenset(rheme[pk])) for pk in ids}
    return {pk: frozenset(terms) for pk, terms in out.items()}, halves


def _roots(terms: frozenset[str]) -> dict[str, frozenset[int]]:
    """A fact's specific lexemes of five letters or more by their first five, with
    their lengths."""
    out: dict[str, set[int]] = {}
    for term in terms:
        if len(term) >= 5:
            out.setdefault(term[:5], set()).add(len(term))
    return {root: frozenset(lengths) for root, lengths in out.items()}


# Two lexemes on one crude stem derive from one word when neither is much longer:
# "acquir" / "acquisit", not "klant" / "klantenservic" (a compound names another thing).
DERIVED_LENGTH = 0.6


def _derived(a: dict[str, frozenset[int]], b: dict[str, frozenset[int]]) -> bool:
    """Some lexeme of ``a`` and one of ``b`` (given by :func:`_roots`) derive from one word."""
    return any(
        min(x, y) >= DERIVED_LENGTH * max(x, y)
        for root in a.keys() & b.keys()
        for x in a[root]
        for y in b[root]
    )


def _meet(a: frozenset[str], b: frozenset[str]) -> bool:
    """Some lexeme of ``a`` is one of ``b``, or derives from the same word."""
    return bool(a & b) or _derived(_roots(a), _roots(b))


def asserted_links(
    tenant_id: Any, ids: list[Any], edges: list[CausalEdge] | None = None
) -> dict[tuple[Any, Any], tuple[float, CausalEdge]]:
    """(cause item, effect item) -> (1 + link score, the cause item's edge) along stored
    span links between the facts' edges (``edges``: every edge of the facts, when the
    caller has read them already, as a Pool of the same facts has)."""
    if edges is None:
        # The callers read the edges' spans and cue, never their embeddings.
        edges = list(
            CausalEdge.objects.filter(tenant_id=tenant_id, item_id__any=list(ids)).defer(
                "cause_embedding", "effect_embedding"
            )
        )
    by_id = {e.pk: e for e in edges}
    out: dict[tuple[Any, Any], tuple[float, CausalEdge]] = {}
    for source, target, score in links_among(tenant_id, list(by_id)):
        a, b = by_id[source], by_id[target]
        if a.item_id != b.item_id:
            key = (a.item_id, b.item_id)
            if key not in out or out[key][0] < 1.0 + score:
                out[key] = (1.0 + score, a)
    return out


# The links among a set of edges, one probe of the (source, target) index per edge:
# both ids as arrays on the link table made the planner AND two bitmaps of every link
# of either side, ~100k entries for a pool of 50 edges at 100k facts (8 ms for 471 rows,
# against 1 ms this way).
_LINKS_AMONG_SQL = (
    "SELECT x.source_id, x.target_id, x.score FROM unnest(%s::bigint[]) AS s(id) CROSS JOIN LATERAL ("
    "SELECT l.source_id, l.target_id, l.score FROM memory_span_link l WHERE l.source_id = s.id "
    "AND l.tenant_id = %s AND l.target_id = ANY(%s::bigint[])) AS x ORDER BY x.source_id, x.target_id"
)


def links_among(tenant_id: Any, edge_ids: list[int]) -> list[tuple[int, int, float]]:
    """(source edge, target edge, score) of the tenant's stored span links among
    ``edge_ids``, by source then target."""
    if not edge_ids:
        return []
    with connection.cursor() as cursor:
        cursor.execute(_LINKS_AMONG_SQL, [edge_ids, tenant_id, edge_ids])
        return [(source, target, score) for source, target, score in cursor.fetchall()]


def _states(named: frozenset[str], words: frozenset[str]) -> bool:
    """Every stem of a named cause span is one of ``words``, or begins one: a span's
    last word may be cut where its connective suffix began (Turkish "Erken kalk|tığı
    için" names "kalk", which "Ayşe sabah erken kalktı." states as "kalkt")."""
    return all(stem in words or any(word.startswith(stem) for word in words) for stem in named)


def _restates(cause: Profile, effect: Profile) -> bool:
    """Two facts that share most of their words restate one matter (or state two
    versions of it: "The vendor raised the licence fee by 10%." and "The vendor cut
    the licence fee by 10%."): neither causes the other."""
    union = cause.words | effect.words
    return bool(union) and len(cause.words & effect.words) / len(union) >= RESTATEMENT


def _implicit(cause: Profile, effect: Profile, strict: bool = False) -> float:
    from memory.reasoning.implicit import Side, get_scorer

    base = get_scorer().score(
        Side(cause.text, cause.vector, cause.cause_vector, cause.changes),
        Side(effect.text, effect.vector, effect.cause_vector, effect.changes),
    )
    # C's predicate names E's cause side, or E restates it (two stems or more: "trailers
    # queued at the gate" -> "The trailers queued at the gate delayed the orders").
    linked = bool(cause.predicate & effect.cause_side) or len(cause.predicate & effect.words) >= 2
    parallel = bool(cause.subject) and cause.subject == effect.subject
    if strict:
        # The parser is English: its subject and predicate mean something only there.
        english = cause.english and effect.english
        # Thematic progression, read from word positions in any language: what C says
        # (its second half) is what E is about (its first half): "La fenêtre ouverte a
        # laissé entrer la pluie." -> "La pluie a inondé le sol du salon". Or E names
        # its cause in an edge and C states it.
        progress = _meet(cause.rheme, effect.theme)
        # ... a word of it beyond what E is about, when it names more than that: "The
        # CPU temperature was monitored" shares the subject of "When the CPU temperature
        # rises" but not what rose. (A preposed cause, "Durch den Ausbau des 5G-Netzes
        # ...", is what E is about: any word of it.)
        beyond = {n for n in effect.cause_side if not any(t.startswith(n) for t in effect.theme)}
        named = effect.cause_vector is not None and bool(cause.words & (beyond or effect.cause_side))
        linked = progress or named or (linked and english)
        if _ADDITIVE.search(cause.text):
            # "Das 5G-Netz verbessert auch die Mobilfunkabdeckung": an additive particle
            # says the fact adds one more thing about its theme beside another statement;
            # naming E's cause in its theme makes it that statement's sibling, and only
            # what it adds (its rheme, progressing into E) can be E's cause.
            linked, parallel = progress, not progress
        else:
            # Two facts about one theme that do not progress are siblings, not a step.
            parallel = (parallel and english) or (bool(cause.theme & effect.theme) and not progress)
        if parallel and not linked:
            return 0.0
        # C states every content word of the cause E names: more than one shared word,
        # and what the embedding misses (C is compared with a span of a word or two:
        # "De klant meldde een inlogprobleem via een ticket." / "het inlogprobleem").
        if effect.named and _states(effect.named, cause.words):
            base += NAMED_BONUS
    if cause.session is not None and cause.session == effect.session:
        base += SESSION_BONUS
    if linked:
        base += LINK_BONUS
    elif parallel:
        base -= PARALLEL_PENALTY
    return base


_INCREASE = re.compile(
    r"^(?:increas\w*|rais\w*|ris(?:e|es|ing|en)|rose|grow\w*|grew|higher|larger|bigger|greater|more|"
    r"expand\w*|boost\w*|doubl\w*|tripl\w*|jump\w*|surg\w*|spik\w*)$"
)
_DECREASE = re.compile(
    r"^(?:reduc\w*|decreas\w*|cut|cuts|cutting|lower\w*|fewer|less|drop\w*|fall|falls|falling|fell|"
    r"fallen|declin\w*|shr[iau]nk\w*|smaller|halv\w*|slash\w*)$"
)
# "a" / "an", capitalised only where the text begins: "Company A failed" is a name.
_INDEFINITE = re.compile(r"(?:\b(?:a|an)|^(?:A|An))\s+((?:[\w-]+\s+){0,2}[\w-]+)")
_DEFINITE = re.compile(r"\b(?:the|The)\s+((?:[\w-]+\s+){0,2}[\w-]+)")


# Additive particles ("also", "auch", "también", ...) of the languages the walk meets.
_ADDITIVE = re.compile(
    r"\b(?:also|as well|auch|ebenfalls|ook|eveneens|aussi|également|también|anche|também|ayrıca)\b",  # noqa: RUF001
    re.IGNORECASE,
)
_NEGATION = frozenset({"not", "no", "never", "nor", "without", "t"})  # "t": the word after "didn'"


def _polarity(words: list[str]) -> int:
    up = any(_INCREASE.match(w) for w in words)
    down = any(_DECREASE.match(w) for w in words)
    return int(up) - int(down)


@dataclass(frozen=True)
class Reading:
    """What the English rules read of a fact's words."""

    polarity: int  # +1 it says something went up, -1 down, 0 neither or both
    # In the sentence's first half: each word of change, with the stems of the two words after it.
    turns: tuple[tuple[int, frozenset[str]], ...]
    # Stems of the phrases it brings in with "a" / "an" and does not name with "the".
    introduced: frozenset[str]
    referred: frozenset[str]  # stems of the phrases it names with "the"


# Only the answer's walk reads these, and it weighs each fact against many: read once
# per text, not per pair, and not for the ranking's walk, which never asks.
@functools.lru_cache(maxsize=4096)
def read_words(text: str) -> Reading:
    words = [w.lower() for w in _WORD.findall(text)]
    opening = words[: (len(words) + 1) // 2]
    turns = tuple(
        (turn, stems(opening[i + 1 : i + 3])) for i, word in enumerate(opening) if (turn := _polarity([word]))
    )
    referred = stems(w for m in _DEFINITE.finditer(text) for w in _WORD.findall(m.group(1)))
    introduced = stems(w for m in _INDEFINITE.finditer(text) for w in _WORD.findall(m.group(1))) - referred
    # "did not raise" says no change at all, not one the other way.
    polarity = 0 if _NEGATION & set(words) else _polarity(words)
    return Reading(polarity, turns, introduced, referred)


def _opposed(cause: Profile, effect: Profile) -> bool:
    """C says a quantity went one way and E opens on that quantity gone the other way:
    "The company increased its marketing budget." cannot be why "Lower marketing spend
    led to fewer new customers." (the word of change is followed within two words by a
    word C says; "Higher demand after the price change" does not open on the price).
    English words."""
    mine = read_words(cause.text).polarity
    return bool(mine) and any(
        turn != mine and after & cause.words for turn, after in read_words(effect.text).turns
    )


def _presupposes(cause: Profile, effect: Profile) -> bool:
    """C names with "the" what E introduces with "a": "The GPU cluster also raised the
    electricity bill." refers to the cluster "The data center deployed a new GPU
    cluster." brings in, so it comes after it and is no cause of it. English words, and
    at least two of the phrase's stems (or its only one) must meet: "the power grid"
    does not refer to "a power outage"."""
    introduced = read_words(effect.text).introduced
    return bool(introduced) and len(introduced & read_words(cause.text).referred) >= min(2, len(introduced))


def cause_score(
    cause: Profile,
    effect: Profile,
    asserted: dict[tuple[Any, Any], tuple[float, CausalEdge]],
    joined: Container[tuple[Any, Any]],
    strict: bool = False,
) -> float:
    """How well ``cause`` reads as the cause of ``effect`` (0 when they are not joined).
    ``strict``: the rules of the chain an answer states (see the module doc)."""
    if (cause.pk, effect.pk) in asserted:
        return asserted[(cause.pk, effect.pk)][0]
    if strict and _restates(cause, effect):
        return 0.0
    if (
        strict
        and cause.english
        and effect.english
        and (_opposed(cause, effect) or _presupposes(cause, effect))
    ):
        return 0.0
    forward = _implicit(cause, effect, strict)
    if forward < FLOOR or (effect.pk, cause.pk) in asserted:
        return 0.0
    # An effect naming its own cause span was compared with that span, the reverse
    # reading would be with the whole fact: the two are not on one scale, and the span
    # decides. Otherwise the reverse reading may not win at all in the stated chain,
    # nor by more than REVERSE_MARGIN in the ranking's walk.
    if effect.cause_vector is None and _implicit(effect, cause, strict) > forward + (
        0.0 if strict else REVERSE_MARGIN
    ):
        return 0.0
    return forward


def _bar(last: float, strict: bool) -> float:
    """The least score the next step back may have, after a link of score ``last``.
    In the ranking an asserted link (score above 1) sets no bar for the implicit one
    before it. In the chain an answer states, it sets the bar an implicit link of
    score 1 would: a stored span link says nothing of what caused its cause, and a
    bar of zero let a walk run on from the true root through any fact above FLOOR
    ("The support agent also updated the software patch." before "The firmware update
    increased the device's power usage.")."""
    if strict:
        return FALL_OFF * min(last, 1.0)
    return FALL_OFF * last if last <= 1.0 else 0.0


def walk_back(
    anchor: Any,
    pool: Pool,
    asserted: dict[tuple[Any, Any], tuple[float, CausalEdge]],
    joined: Container[tuple[Any, Any]],
    max_facts: int = MAX_FACTS,
    strict: bool = False,
) -> list[tuple[Any, float]]:
    """[(fact, score of its link to the next one)] from the root to the anchor (0)."""
    path = [(anchor, 0.0)]
    at = anchor
    # What the chain states so far: a fact stored twice (two writes of one sentence) is
    # one statement, and a chain that stepped to its copy would state it twice, or
    # circle between the two.
    said = {pool.said.get(anchor, anchor)}
    while len(path) < max_facts:
        # Only facts joined to the current one are weighed (and parsed).
        near = [
            pk for pk in pool.ids
            if pool.said[pk] not in said
            and ((pk, at) in asserted or (pk, at) in joined or pool.terms[pk] & pool.terms[at]
                 or _derived(pool.roots[pk], pool.roots[at]))
        ]  # fmt: skip
        if not near:
            break
        profiles = pool.profiles([at, *near])
        best, best_score = None, 0.0
        for pk in near:
            score = cause_score(profiles[pk], profiles[at], asserted, joined, strict)
            if score > best_score:
                best, best_score = pk, score
        if best is None or (len(path) > 1 and best_score < _bar(path[-1][1], strict)):
            break
        path.append((best, best_score))
        said.add(pool.said[best])
        at = best
    return path[::-1]
