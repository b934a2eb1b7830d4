"""BM25 over the stored ``tsvector``: any query word may match, rarer words weigh more.

Full-text search that requires every query word returns nothing for most natural
questions ("why did the delivery arrive late?"), and ``ts_rank`` does not know how
common a word is. This ranker scores each candidate by Okapi BM25 with the
tenant's statistics:

* each item's ``tsvector`` is built with the configuration of its own language
  (``text_language``, detected at write time, :mod:`memory.retrieval.language`), so
  the query is analysed once per language the tenant holds (and once in its own
  language): an item is matched and scored only by the query's lexemes in *its*
  language, a German item by German stems, an English one by English stems;
* a term is a (language, lexeme) pair: its document frequency counts the tenant's
  items of that language holding it, from the GIN index (one count per term), its
  IDF is taken among the items of that language, and it is cached per process
  for ``STATS_TTL`` seconds with the tenant's size and
  languages, so a repeated word costs nothing and the statistics follow the
  tenant's growth; once more than ``GROWTH_SHARE`` of the items they counted have
  been written since, by any process (a shared counter, looked at every
  ``GROWTH_CHECK_SECONDS``), they are read again at once: a bulk load changes every
  IDF and every hub of the graph, and ranking with the counts of before it, for up
  to ``STATS_TTL`` and differently in each web process, was measurably worse;
* candidates are the visible items containing the *rarest* query terms, taken
  from the rarest up while their summed document frequency stays within
  ``POSTINGS_BUDGET``: a common word ("service" in every incident) still scores the
  items it appears in but does not make the database rank a quarter of the table;
  ``recall`` also caps each selecting term at its first ``RECALL_POSTINGS`` items;
* term frequency is the lexeme's position count, document length the vector's
  lexeme count, both read from the row's ``tsvector`` in the same statement.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import BooleanField, FloatField, Q
from django.db.models.expressions import RawSQL

from core.statements import compiled
from memory.models import MemoryItem
from memory.retrieval.language import SIMPLE, detect

K1 = 0.9
B = 0.4
MAX_QUERY_TERMS = 32
# The languages a query is analysed in: the tenant's most common ones (and the
# query's own). Items in a language beyond these are found by their embedding only.
logger = logging.getLogger(__name__)

MAX_LANGUAGES = 6
# Summed document frequency of the terms that select candidates (see module doc).
POSTINGS_BUDGET = 4000
# The most candidates one selecting term brings to a recall's lexical list (see
# bm25_rows): a word in more items brings the first this many of them.
RECALL_POSTINGS = 1000
STATS_TTL = 300.0
# Items written since a tenant's statistics were read, as a share of the items they
# counted (and at least GROWTH_FLOOR), after which they are read again; the shared
# count of written items is looked at once per GROWTH_CHECK_SECONDS per process.
GROWTH_SHARE = 0.05
GROWTH_FLOOR = 20
GROWTH_CHECK_SECONDS = 1.0
# The shared count restarts after this long; a reader then reads the statistics again.
WRITTEN_WINDOW = 30 * 86400
_MAX_CACHED = 50_000

# A (language, lexeme) pair: the unit of every statistic.
Term = tuple[str, str]

# Quoted lexemes joined by | or &: each is quoted before the cast, so no input can
# inject tsquery operators.
QUOTED_LEXEME = "('''' || replace(replace(lexeme, '\\', '\\\\'), '''', '''''') || '''')"
_LEXEME_TSQUERY = f"(SELECT string_agg({QUOTED_LEXEME}, %s)::tsquery FROM unnest(%s::text[]) AS lexeme)"  # noqa: S608
_QUOTED_Q = QUOTED_LEXEME.replace("lexeme", "q.lexeme")
_T_LEXEME = QUOTED_LEXEME.replace("lexeme", "t.lexeme")


@dataclass(frozen=True)
class Stats:
    documents: int
    avg_length: float
    df: dict[Term, int]
    languages: dict[str, int] = field(default_factory=dict)

    def idf(self, term: Term) -> float:
        # Among the items of the term's language: a stopword of a language few items
        # are stored in ("what" in the handful of `simple` turns) is common there,
        # not rare in the tenant.
        n, df = self.languages.get(term[0], self.documents), self.df.get(term, 0)
        return math.log(1 + (max(n, df) - df + 0.5) / (df + 0.5))


class TtlCounts:
    """Per-process counts per (tenant, key), each valid for STATS_TTL seconds and until
    the tenant's statistics are read again after it grew (:func:`note_written`): the
    document frequency of a term, the mentions of an entity. Counts change slowly and
    reading them again on every query was a large share of a query's statements."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # (tenant, key) -> (read at, count, the tenant's statistics epoch then)
        self.counts: dict[tuple[Any, Any], tuple[float, int, int]] = {}

    def clear(self) -> None:
        with self.lock:
            self.counts.clear()

    def get_many(
        self, tenant_id: Any, keys: list[Any], read: Callable[[list[Any]], dict[Any, int]]
    ) -> dict[Any, int]:
        """The count of every key: cached ones as cached, the others by ``read``."""
        now = time.monotonic()
        epoch = cache.epochs.get(tenant_id, 0)
        with self.lock:
            known = {
                key: hit[1]
                for key in keys
                if (hit := self.counts.get((tenant_id, key))) and now - hit[0] < STATS_TTL and hit[2] == epoch
            }
        missing = [key for key in keys if key not in known]
        if missing:
            fresh = read(missing)
            known.update(fresh)
            with self.lock:
                if len(self.counts) > _MAX_CACHED:
                    self.counts.clear()
                for key, count in fresh.items():
                    # A key nothing holds yet is not cached: the next write may bring it.
                    if count > 0:
                        self.counts[(tenant_id, key)] = (now, count, epoch)
        return known


class _Cache:
    """Per-process term statistics per tenant, each entry valid for STATS_TTL seconds."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # tenant -> (read at, items per language, mean length, shared written count then)
        self.corpus: dict[Any, tuple[float, dict[str, int], float, int]] = {}
        self.df = TtlCounts()
        # tenant -> when this process last looked at the shared written count
        self.checked: dict[Any, float] = {}
        # tenant -> how many times its corpus was read: the counts of an older epoch
        # (TtlCounts) are read again.
        self.epochs: dict[Any, int] = {}

    def clear(self) -> None:
        with self.lock:
            self.corpus.clear()
            self.checked.clear()
        self.df.clear()


cache = _Cache()


def _written_key(tenant_id: Any) -> str:
    return f"fedmem:items-written:{tenant_id}"


def note_written(tenant_id: Any, count: int) -> None:
    """``count`` new items of the tenant were written (the write path calls this, one
    statement on the shared counters per write request)."""
    from django.core.cache import caches

    from core.counters import count_hit

    count_hit(caches["counters"], _written_key(tenant_id), WRITTEN_WINDOW, delta=count)


def _written(tenant_id: Any) -> int | None:
    """The shared count of the tenant's written items; None when the counters backend
    does not answer (the statistics then follow their TTL alone)."""
    from django.core.cache import caches

    try:
        return int(caches["counters"].get(_written_key(tenant_id), 0))
    except Exception:  # a ranking aid: a recall does not fail on it
        logger.warning("the shared count of written items is unreadable", exc_info=True)
        return None


def _grown(tenant_id: Any, corpus: tuple[float, dict[str, int], float, int], now: float) -> bool:
    """More items were written since ``corpus`` was read than it may be trusted with
    (looked at once per GROWTH_CHECK_SECONDS per process)."""
    with cache.lock:
        if now - cache.checked.get(tenant_id, 0.0) < GROWTH_CHECK_SECONDS:
            return False
        cache.checked[tenant_id] = now
    written, seen = _written(tenant_id), corpus[3]
    if written is None:
        return False
    # A count below the one seen restarted (WRITTEN_WINDOW): nothing is known.
    return written < seen or written - seen > max(GROWTH_FLOOR, GROWTH_SHARE * sum(corpus[1].values()))


def _corpus(tenant_id: Any, now: float) -> tuple[float, dict[str, int], float, int]:
    with cache.lock:
        corpus = cache.corpus.get(tenant_id)
    if corpus is not None and now - corpus[0] < STATS_TTL and not _grown(tenant_id, corpus, now):
        return corpus
    # Read before the counts: what is written meanwhile is counted again next time.
    written = _written(tenant_id)
    with connection.cursor() as cursor:
        # Sizes per language by the (tenant, text_language) index; the mean length
        # from a sample (it only scales the length normalization).
        cursor.execute(
            "SELECT (SELECT json_object_agg(text_language, n) FROM (SELECT text_language, count(*) AS n "
            "FROM memory_item WHERE tenant_id = %s GROUP BY text_language) AS l)::text, "
            "(SELECT avg(length(search_vector)) FROM "
            "(SELECT search_vector FROM memory_item WHERE tenant_id = %s LIMIT 2000) AS s)",
            [tenant_id, tenant_id],
        )
        languages, avg_length = cursor.fetchone()
    sizes = {str(k): int(v) for k, v in json.loads(languages or "{}").items()}
    corpus = (now, sizes, float(avg_length or 1.0), written or 0)
    with cache.lock:
        cache.corpus[tenant_id] = corpus
        cache.checked[tenant_id] = now
        cache.epochs[tenant_id] = cache.epochs.get(tenant_id, 0) + 1
    return corpus


def tenant_languages(tenant_id: Any) -> dict[str, int]:
    """The tenant's items per stored language (cached as the other statistics)."""
    return _corpus(tenant_id, time.monotonic())[1]


def query_languages(tenant_id: Any, text: str) -> list[str]:
    """The configurations to analyse ``text`` in: the tenant's ``MAX_LANGUAGES`` most
    common ones, and the query's own when it has one (the tenant's first item in a
    language is found before the cached languages list it)."""
    held = tenant_languages(tenant_id)
    chosen = sorted(held, key=lambda lang: (-held[lang], lang))[:MAX_LANGUAGES]
    own = detect(text)
    return chosen if own in chosen or own == SIMPLE else [own, *chosen]


def query_lexemes(text: str, languages: list[str] | None = None) -> list[Term]:
    """The query's distinct terms: its lexemes as each language's configuration parses them."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.l, w.lexeme FROM unnest(%s::text[]) WITH ORDINALITY AS c(l, o) "
            "CROSS JOIN LATERAL (SELECT lexeme FROM unnest(to_tsvector(c.l::regconfig, %s)) LIMIT %s) AS w "
            "ORDER BY c.o",
            [languages or [SIMPLE], text, MAX_QUERY_TERMS],
        )
        return [(row[0], row[1]) for row in cursor.fetchall()]


def query_lexemes_many(texts: list[str], languages: list[list[str]]) -> list[list[Term]]:
    """:func:`query_lexemes` of several texts (``languages[i]`` those of ``texts[i]``) in
    one statement: each text's terms in the order that function gives them (by language,
    then in the vector's order)."""
    pairs = [(n, lang) for n in range(len(texts)) for lang in (languages[n] or [SIMPLE])]
    out: list[list[Term]] = [[] for _ in texts]
    if not pairs:
        return out
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.t, c.l, w.lexeme FROM unnest(%s::int[], %s::text[]) WITH ORDINALITY AS c(t, l, o) "
            "CROSS JOIN LATERAL (SELECT u.lexeme, u.n FROM unnest(to_tsvector(c.l::regconfig, "
            "(%s::text[])[c.t + 1])) WITH ORDINALITY AS u(lexeme, positions, weights, n) "
            "ORDER BY u.n LIMIT %s) AS w ORDER BY c.o, w.n",
            [[p[0] for p in pairs], [p[1] for p in pairs], texts, MAX_QUERY_TERMS],
        )
        for n, lang, lexeme in cursor.fetchall():
            out[n].append((lang, lexeme))
    return out


def tenant_stats_many(tenant_id: Any, term_lists: list[list[Term]]) -> list[Stats]:
    """:func:`tenant_stats` of each list of terms, the statistics all of them lack read in
    one statement."""
    whole = tenant_stats(tenant_id, list(dict.fromkeys(t for terms in term_lists for t in terms)))
    documents = sum(whole.languages.values())
    out = []
    for terms in term_lists:
        known = {t: whole.df[t] for t in terms}
        # As tenant_stats counts them: the tenant's size, or a larger count just read.
        out.append(Stats(max(documents, *known.values(), 1), whole.avg_length, known, whole.languages))
    return out


def tenant_stats(tenant_id: Any, terms: list[Term]) -> Stats:
    corpus = _corpus(tenant_id, time.monotonic())

    def read(missing: list[Term]) -> dict[Term, int]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT q.l, q.lexeme, (SELECT count(*) FROM memory_item WHERE tenant_id = %s "  # noqa: S608
                f"AND text_language = q.l AND search_vector @@ {_QUOTED_Q}::tsquery) "
                "FROM unnest(%s::text[], %s::text[]) AS q(l, lexeme)",
                [tenant_id, [t[0] for t in missing], [t[1] for t in missing]],
            )
            return {(lang, lx): int(df) for lang, lx, df in cursor.fetchall()}

    known = cache.df.get_many(tenant_id, list(terms), read)
    # The cached size may lag behind the counts read just now.
    documents = sum(corpus[1].values())
    return Stats(max(documents, *known.values(), 1), max(corpus[2], 1.0), known, corpus[1])


def selective(
    terms: list[Term], stats: Stats, budget: int = POSTINGS_BUDGET, *, floor: float = 0.0
) -> list[Term]:
    """The rarest terms whose summed document frequency fits ``budget`` (at least one).

    With a coverage ``floor`` (rows below it are of no use to the caller), the rarest
    terms only until the ones left out could not lift an item to the floor together:
    a term adds at most ``idf x (K1 + 1)`` to a score (the BM25 fraction is below
    ``K1 + 1`` at any term frequency and length), so an item holding none of the chosen
    terms scores below ``floor`` times its language's summed IDF and would be dropped
    anyway. Common words then select no candidates, and every row at or above the
    floor is found as without the bound (possibly none: a list of common words alone)."""
    present = sorted((t for t in terms if stats.df.get(t, 0) > 0), key=lambda t: (stats.df[t], t))
    left: dict[str, float] = {}
    total: dict[str, float] = {}
    if floor > 0:
        for term in terms:
            total[term[0]] = total.get(term[0], 0.0) + stats.idf(term)
        for term in present:
            left[term[0]] = left.get(term[0], 0.0) + stats.idf(term)
    chosen: list[Term] = []
    spent = 0
    for term in present:
        # A margin of a millionth keeps float rounding from dropping a row at the floor.
        if floor > 0 and all((K1 + 1) * left[lang] < floor * total[lang] * (1 - 1e-6) for lang in left):
            break
        if chosen and spent + stats.df[term] > budget:
            break
        chosen.append(term)
        spent += stats.df[term]
        left[term[0]] = left.get(term[0], 0.0) - stats.idf(term)
    return chosen


def matches(terms: list[Term], joiner: str) -> RawSQL:
    """A condition on ``memory_item``: its full text holds the terms of its own
    language, any (joiner ``" | "``) or all (``" & "``) of them."""
    by_language: dict[str, list[str]] = {}
    for lang, lexeme in terms:
        by_language.setdefault(lang, []).append(lexeme)
    arm = f'("memory_item"."text_language" = %s AND "memory_item"."search_vector" @@ {_LEXEME_TSQUERY})'
    params: list[Any] = []
    for lang, lexemes in by_language.items():
        params.extend([lang, joiner, lexemes])
    # Fixed fragments only; languages, joiner and lexemes are bound parameters.
    return RawSQL("(" + " OR ".join([arm] * len(by_language)) + ")", params, output_field=BooleanField())  # noqa: S611


def bm25_rows(
    condition: Q,
    tenant_id: Any,
    text: str,
    limit: int,
    *,
    require_all: bool = False,
    postings: int | None = None,
) -> list[tuple[Any, float, Any, float]]:
    """(id, BM25 score, created_at, coverage) of the best ``limit`` items meeting
    ``condition`` (on MemoryItem: visibility and filters), best first.

    Coverage is the score over the summed IDF of the query's terms in the item's
    language: about the share of the query's information the item holds (1 for
    every word once, in an item of average length), comparable across queries and
    languages, unlike the raw score. ``postings`` caps the candidates each selecting
    term brings, as in :func:`bm25_rows_many` (any-word matching only)."""
    terms = query_lexemes(text, query_languages(tenant_id, text))
    if not terms:
        return []
    stats = tenant_stats(tenant_id, terms)
    return _scored(Candidates(condition), terms, stats, limit, require_all, postings=postings)


def bm25_rows_many(
    condition: Q,
    tenant_id: Any,
    texts: list[str],
    limit: int,
    *,
    floor: float = 0.0,
    postings: int | None = None,
) -> list[list[tuple[Any, float, Any, float]]]:
    """:func:`bm25_rows` of each text (any word may match): the texts' words parsed in one
    statement and their statistics read in one, then one scoring statement per text.

    With a coverage ``floor``, only the rows at or above it are sure to be there (the
    same as without it, in the same order); candidates that cannot reach it are not
    read (see :func:`selective`). With ``postings``, each selecting term brings at most
    that many candidates (see :meth:`Candidates.sampled`): every term whose document
    frequency is within it brings all of its items, so the rows are the same as
    without the cap until a selecting word is that common, and the statement's work
    no longer grows with the tenant."""
    term_lists = query_lexemes_many(texts, [query_languages(tenant_id, text) for text in texts])
    present = [terms for terms in term_lists if terms]
    stats = iter(tenant_stats_many(tenant_id, present) if present else [])
    candidates = Candidates(condition)
    return [
        _scored(candidates, terms, next(stats), limit, False, floor, postings) if terms else []
        for terms in term_lists
    ]


class Candidates:
    """The candidate rows of ``base`` (a condition on MemoryItem: visibility and
    filters) for a condition on their words. The rows' statement is compiled once per
    shape of ``base`` (:mod:`core.statements`): a visibility condition costs the ORM a
    few ms to compile, and a rank scores a dozen texts against it."""

    _SLOT = "__fedmem_terms__"

    def __init__(self, base: Q) -> None:
        self.base = base
        self._select: tuple[str, list[Any]] | None = None

    @classmethod
    def _rows(cls, base: Q) -> Any:
        return (
            # A fixed marker, replaced by a condition built from fixed fragments.
            MemoryItem.objects.filter(base)
            .filter(RawSQL(cls._SLOT, [], output_field=BooleanField()))  # noqa: S611
            # Unordered: the statement orders by score, date and id; the model's
            # default order only sorted the (wide) candidate rows once more.
            .order_by()
            .annotate(dl=RawSQL('length("memory_item"."search_vector")', [], output_field=FloatField()))
            .values_list("id", "created_at", "text_language", "search_vector", "dl")
        )

    def select(self, condition: RawSQL) -> tuple[str, list[Any]]:
        """(id, created_at, text_language, search_vector, dl) of the rows meeting ``condition``."""
        if self._select is None:
            self._select = compiled(("lexical candidates",), self.base, self._rows)
        sql, params = self._select
        at = sql.index(self._SLOT)
        # The condition's parameters go where its text goes, among the compiled ones.
        before = sql[:at].count("%s")
        return (
            sql[:at] + condition.sql + sql[at + len(self._SLOT) :],
            [*params[:before], *condition.params, *params[before:]],
        )

    def sampled(self, terms: list[Term], postings: int) -> tuple[str, list[Any]]:
        """:meth:`select` of the rows among the first ``postings`` ones of the base that
        hold a term, for any of ``terms`` (each row once). First in storage order, as
        the full-text index lists a word's items (about the oldest): any other order
        reads every item of the word, which is what the cap avoids."""
        # Fixed fragments only: the terms are bound parameters of the statement below.
        holds = RawSQL(  # noqa: S611
            f'"memory_item"."text_language" = t.l AND "memory_item"."search_vector" @@ {_T_LEXEME}::tsquery',
            [],
        )
        sql, params = self.select(holds)
        return (
            "SELECT DISTINCT ON (x.id) x.* FROM unnest(%s::text[], %s::text[]) AS t(l, lexeme) "  # noqa: S608
            f"CROSS JOIN LATERAL ({sql} LIMIT %s) AS x ORDER BY x.id",
            [[t[0] for t in terms], [t[1] for t in terms], *params, postings],
        )


def _scored(
    candidates: Candidates,
    terms: list[Term],
    stats: Stats,
    limit: int,
    require_all: bool,
    floor: float = 0.0,
    postings: int | None = None,
) -> list[tuple[Any, float, Any, float]]:
    if require_all:
        # Every word, in the item's own language: a language some word is missing
        # from cannot match.
        incomplete = {lang for lang, lx in terms if stats.df.get((lang, lx), 0) == 0}
        matching, joiner = [t for t in terms if t[0] not in incomplete], " & "
    else:
        matching, joiner = selective(terms, stats, floor=floor), " | "
    if not matching:
        return []
    if not require_all and postings is not None and any(stats.df[t] > postings for t in matching):
        msql, mparams = candidates.sampled(matching, postings)
    else:
        msql, mparams = candidates.select(matches(matching, joiner))
    idf = [stats.idf(t) for t in terms]
    total: dict[str, float] = {}
    for (lang, _lx), weight in zip(terms, idf, strict=True):
        total[lang] = total.get(lang, 0.0) + weight
    # Each candidate's vector is unnested once, keeping only the query's lexemes, and
    # materialized before the join with the terms: the planner, which guesses a few
    # dozen candidates, otherwise joined candidates to terms first and unnested every
    # vector once per query term (at 10k items, 160 of a term bridge's 200 ms). The
    # query's lexemes are picked out in C before the unnest (marked with weight A,
    # then kept by ts_filter), and the unnest runs in the select list, where it streams
    # its rows, not as a LATERAL function scan, which filled and read a tuplestore per
    # candidate: when a common word makes the whole tenant a candidate (1,000 items,
    # each ~13 lexemes) that per-row work was most of the statement (~45% less time,
    # same rows). ts_filter drops a lexeme without positions, which a stored vector
    # never has (the column is to_tsvector of the content; only strip() removes
    # them), so every term frequency is the lexeme's position count as before. Each
    # sum is taken in lexeme order: items of one wording score alike to the last bit,
    # so their tie is broken by recency, not by the order rows were grouped in.
    sql = (
        f"WITH m AS MATERIALIZED ({msql}), "  # noqa: S608 - compiled by Django, values are parameters
        "q AS (SELECT * FROM unnest(%s::text[], %s::text[], %s::float8[]) AS q(l, lexeme, idf)), "
        "u AS MATERIALIZED (SELECT id, created_at, text_language, dl, (e).lexeme, "
        "array_length((e).positions, 1)::float8 AS tf FROM (SELECT m.id, m.created_at, m.text_language, "
        "m.dl, unnest(ts_filter(setweight(setweight(m.search_vector, 'D'), 'A', %s::text[]), '{a}')) AS e "
        "FROM m) AS x) "
        "SELECT u.id, u.created_at, u.text_language, "
        "sum(q.idf * u.tf * %s / (u.tf + %s * (1 - %s + %s * u.dl / %s)) ORDER BY q.l, q.lexeme) AS score "
        "FROM u JOIN q ON q.l = u.text_language AND q.lexeme = u.lexeme "
        "GROUP BY u.id, u.created_at, u.text_language ORDER BY score DESC, u.created_at DESC, u.id LIMIT %s"
    )
    params = [
        *mparams, [t[0] for t in terms], [t[1] for t in terms], idf, sorted({t[1] for t in terms}),
        K1 + 1, K1, B, B, stats.avg_length, limit,
    ]  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [
            (pk, float(score), created, float(score) / (total.get(lang) or 1.0))
            for pk, created, lang, score in cursor.fetchall()
        ]
