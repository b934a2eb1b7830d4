"""BM25 over the stored ``tsvector``: any query word may match, rarer words weigh more.

Full-text search that requires every query word returns nothing for most natural
questions ("why did the delivery arrive late?"), and ``ts_rank`` does not know how
common a word is. This ranker scores each candidate by Okapi BM25 with the
tenant's statistics:

* the query's lexemes come from the same text-search configuration as the stored
  column (so both sides stem and split alike);
* document frequency per lexeme and the tenant's size come from the GIN index
  (one count per lexeme) and are cached per process for ``STATS_TTL`` seconds, so
  a repeated word costs nothing and the statistics follow the tenant's growth;
* candidates are the visible items containing the *rarest* query lexemes, taken
  from the rarest up while their summed document frequency stays within
  ``POSTINGS_BUDGET``: a common word ("service" in every incident) still scores the
  items it appears in but does not make the database rank a quarter of the table;
* term frequency is the lexeme's position count, document length the vector's
  lexeme count, both read from the row's ``tsvector`` in the same statement.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.contrib.postgres.search import SearchQuery
from django.db import connection
from django.db.models import FloatField
from django.db.models.expressions import RawSQL

from memory.models.items import TEXT_SEARCH_CONFIG

K1 = 0.9
B = 0.4
MAX_QUERY_TERMS = 32
# Summed document frequency of the lexemes that select candidates (see module doc).
POSTINGS_BUDGET = 4000
STATS_TTL = 300.0
_MAX_CACHED = 50_000

# Quoted lexemes joined by | or &: each is quoted before the cast, so no input can
# inject tsquery operators.
_LEXEME_TSQUERY = (
    "(SELECT string_agg('''' || replace(replace(lexeme, '\\', '\\\\'), '''', '''''') || '''', %s)"
    "::tsquery FROM unnest(%s::text[]) AS lexeme)"
)


class LexemeQuery(SearchQuery):
    """A tsquery of the given lexemes, any (``|``) or all (``&``) of them."""

    def __init__(self, lexemes: list[str], joiner: str) -> None:
        super().__init__(" ".join(lexemes))
        self.lexemes = lexemes
        self.joiner = joiner

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list[Any]]:
        return _LEXEME_TSQUERY, [self.joiner, self.lexemes]


@dataclass(frozen=True)
class Stats:
    documents: int
    avg_length: float
    df: dict[str, int]

    def idf(self, lexeme: str) -> float:
        n, df = self.documents, self.df.get(lexeme, 0)
        return math.log(1 + (n - df + 0.5) / (df + 0.5))


class _Cache:
    """Per-process term statistics per tenant, each entry valid for STATS_TTL seconds."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.corpus: dict[Any, tuple[float, int, float]] = {}
        self.df: dict[tuple[Any, str], tuple[float, int]] = {}

    def clear(self) -> None:
        with self.lock:
            self.corpus.clear()
            self.df.clear()


cache = _Cache()


def query_lexemes(text: str) -> list[str]:
    """The query's distinct lexemes as the stored column's configuration parses them."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT lexeme FROM unnest(to_tsvector(%s::regconfig, %s)) LIMIT %s",
            [TEXT_SEARCH_CONFIG, text, MAX_QUERY_TERMS],
        )
        return [row[0] for row in cursor.fetchall()]


def tenant_stats(tenant_id: Any, lexemes: list[str]) -> Stats:
    now = time.monotonic()
    with cache.lock:
        corpus = cache.corpus.get(tenant_id)
        known = {
            lx: hit[1]
            for lx in lexemes
            if (hit := cache.df.get((tenant_id, lx))) and now - hit[0] < STATS_TTL
        }
    missing = [lx for lx in lexemes if lx not in known]
    with connection.cursor() as cursor:
        if corpus is None or now - corpus[0] >= STATS_TTL:
            # The size by the (tenant, created_at) index; the mean length from a sample
            # (it only scales the length normalization).
            cursor.execute(
                "SELECT (SELECT count(*) FROM memory_item WHERE tenant_id = %s), "
                "(SELECT avg(length(search_vector)) FROM "
                "(SELECT search_vector FROM memory_item WHERE tenant_id = %s LIMIT 2000) AS s)",
                [tenant_id, tenant_id],
            )
            documents, avg_length = cursor.fetchone()
            corpus = (now, int(documents or 0), float(avg_length or 1.0))
        if missing:
            cursor.execute(
                "SELECT lexeme, (SELECT count(*) FROM memory_item WHERE tenant_id = %s AND search_vector @@ "
                "('''' || replace(replace(lexeme, '\\', '\\\\'), '''', '''''') || '''')::tsquery) "
                "FROM unnest(%s::text[]) AS lexeme",
                [tenant_id, missing],
            )
            known.update({lx: int(df) for lx, df in cursor.fetchall()})
    with cache.lock:
        if len(cache.df) > _MAX_CACHED:
            cache.df.clear()
        cache.corpus[tenant_id] = corpus
        for lx in missing:
            # A word no item holds yet is not cached: the next write may bring it.
            if known[lx] > 0:
                cache.df[(tenant_id, lx)] = (now, known[lx])
    # The cached size may lag behind the counts read just now.
    return Stats(max(corpus[1], *known.values(), 1), max(corpus[2], 1.0), known)


def selective(lexemes: list[str], stats: Stats, budget: int = POSTINGS_BUDGET) -> list[str]:
    """The rarest lexemes whose summed document frequency fits ``budget`` (at least one)."""
    present = sorted((lx for lx in lexemes if stats.df.get(lx, 0) > 0), key=lambda lx: (stats.df[lx], lx))
    chosen: list[str] = []
    spent = 0
    for lx in present:
        if chosen and spent + stats.df[lx] > budget:
            break
        chosen.append(lx)
        spent += stats.df[lx]
    return chosen


def bm25_rows(
    base: Any, tenant_id: Any, text: str, limit: int, *, require_all: bool = False
) -> list[tuple[Any, float, Any, float]]:
    """(id, BM25 score, created_at, coverage) of the best ``limit`` items of ``base``
    (a MemoryItem queryset already holding visibility and filters), best first.

    Coverage is the score over the query's summed IDF: about the share of the
    query's information the item holds (1 for every word once, in an item of
    average length), comparable across queries, unlike the raw score."""
    lexemes = query_lexemes(text)
    if not lexemes:
        return []
    stats = tenant_stats(tenant_id, lexemes)
    if require_all:
        if any(stats.df.get(lx, 0) == 0 for lx in lexemes):
            return []
        matching, joiner = lexemes, " & "
    else:
        matching, joiner = selective(lexemes, stats), " | "
    if not matching:
        return []
    candidates = base.filter(search_vector=LexemeQuery(matching, joiner)).annotate(
        dl=RawSQL('length("memory_item"."search_vector")', [], output_field=FloatField())
    )
    msql, mparams = candidates.values_list("id", "created_at", "search_vector", "dl").query.sql_with_params()
    idf = [stats.idf(lx) for lx in lexemes]
    total = sum(idf) or 1.0
    sql = (
        f"WITH m AS MATERIALIZED ({msql}), "  # noqa: S608 - compiled by Django, values are parameters
        "q AS (SELECT * FROM unnest(%s::text[], %s::float8[]) AS q(lexeme, idf)) "
        "SELECT m.id, m.created_at, "
        "sum(q.idf * t.tf * %s / (t.tf + %s * (1 - %s + %s * m.dl / %s))) AS score "
        "FROM m CROSS JOIN LATERAL unnest(m.search_vector) AS u "
        "JOIN q ON q.lexeme = u.lexeme "
        "CROSS JOIN LATERAL (SELECT coalesce(array_length(u.positions, 1), 1)::float8 AS tf) AS t "
        "GROUP BY m.id, m.created_at ORDER BY score DESC, m.created_at DESC, m.id LIMIT %s"
    )
    params = [*mparams, lexemes, idf, K1 + 1, K1, B, B, stats.avg_length, limit]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(pk, float(score), created, float(score) / total) for pk, created, score in cursor.fetchall()]
