"""Ranked retrieval over the memory items an agent may read.

The visibility condition from :mod:`memory.enforcement` (tenant, scope keys,
classification, validity, expiry) and the caller's filters are part of both
candidate lists, so the database filters before it ranks and nothing outside
the caller's view is ever scored:

* vector: cosine distance through the HNSW index (iterative scan, so filters
  that drop candidates do not starve the list), top ``FEDMEM_RETRIEVAL_CANDIDATES``;
  the search, then one statement that ranks what it found;
* keyword: BM25 over the generated ``tsvector`` (:mod:`memory.retrieval.lexical`),
  each item stemmed in its own language and matched by the query's lexemes in that
  language: any query word may match, weighted by the tenant's document
  frequencies, top ``FEDMEM_RETRIEVAL_CANDIDATES``;
* hybrid: the BM25 list is ranked by the database while the query is embedded
  (every word required only under ``FEDMEM_HYBRID_KEYWORD_MATCH=all``), then the
  vector list is read (a statement planned for its values on every run), and one
  statement, given both lists as arrays, fuses them, linearly (default: dense weight x
  cosine + the rest x BM25 coverage) or by reciprocal rank fusion (``1/(k + rank)``
  summed, k = ``FEDMEM_RRF_K``), plus an optional recency bonus; the optional
  cross-encoder then reranks the fused head.
* best sentence (linear fusion): the cosine of an item of several sentences is
  (1 - ``FEDMEM_HYBRID_SENTENCE_WEIGHT``) x its own + the weight x its best
  sentence's (``memory_item_sentence``, written with the item): an item's vector
  is the mean of all it says, and a turn that answers in one sentence of three
  sits between its topics. The neighbours in the context terms are scored alike.
* session context (linear fusion): an item written in a session is lifted by
  ``FEDMEM_HYBRID_CONTEXT_WEIGHT`` x the lead the better of its two neighbours in
  that session (the visible items written just before and just after it) has over
  its own fused score. In a conversation the answer to a question often sits in
  the turn after the one that words it ("what's your favourite game?" / "Xenoblade,
  I play it daily"), and a reply's meaning leans on the turn it answers. Only a
  better neighbour lifts: a bonus of the neighbour's whole score would favour every
  item that has neighbours over one that stands alone, which on short sessions of
  loosely related facts (and on languages the embedding model ranks flatly)
  promoted plain neighbours over the facts that answer. The neighbours are found in
  the same statement through the (agent, session, created_at) index, two probes per
  candidate, and only their score is used: a neighbour is never returned for being one.
  The items two places away lend their lead the same way, by
  ``FEDMEM_HYBRID_CONTEXT_FAR_WEIGHT``, added to the first (an answer often comes a
  turn later: "favourite game?" / "hmm, let me think" / "Xenoblade, every night");
  two more probes per candidate. The items around the best candidate of each list
  (``FEDMEM_HYBRID_NEIGHBOUR_ANCHORS``), as far as those two rings reach, join the
  candidates: an answer that shares no word with the question and little meaning
  ("Xenoblade, every night") is in neither list, and a lift only reaches candidates.
* event time (hybrid): when the query names a time ("in May 2023", "on 8 May",
  "last week", :mod:`memory.retrieval.when`), the items whose ``occurred_at`` lies
  inside it join the candidates (the nearest ``FEDMEM_RETRIEVAL_CANDIDATES`` by
  cosine, computed exactly over the dated items of the tenant through the partial
  (tenant, occurred_at) index) and gain ``FEDMEM_HYBRID_TIME_WEIGHT``. A time named
  in a question is often carried by no word of the answer ("What did she paint in
  July?" / "We painted a sunset together!", said in July), so neither list finds it
  otherwise; items without ``occurred_at`` are ranked as before.
* speaker (hybrid): an item whose transcript label the query names ("Melanie: ..."
  for "What has Melanie painted?", :mod:`memory.retrieval.speaker`) gains
  ``FEDMEM_HYBRID_SPEAKER_WEIGHT``, after session context like event time (the
  two speakers of a conversation alternate, so a bonus inside the context term
  would lift every turn that answers the named speaker as much as the speaker's
  own). The label is read in the same statement from the candidates' content; a
  query naming no capitalised word, or items without a label, rank as before.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from django.conf import settings
from django.contrib.postgres.search import SearchQuery
from django.db import connection, transaction
from django.db.models import BooleanField, FloatField, Q
from django.db.models.expressions import RawSQL

from core.statements import compiled
from memory.embeddings import embed_query
from memory.enforcement import Keys, MemoryAccess, visible_q
from memory.models import MemoryItem
from memory.retrieval.language import CONFIGS
from memory.retrieval.lexical import QUOTED_LEXEME, RECALL_POSTINGS, bm25_rows
from memory.retrieval.rerank import get_reranker
from memory.retrieval.speaker import LABEL_PATTERN, label, named_labels
from memory.retrieval.vectors import CHOSEN_ROWS
from memory.retrieval.when import Windows, windows

MODES = ("hybrid", "vector", "keyword")
MAX_QUERY_TERMS = 32
_WORD = re.compile(r"\w+")
# Every column a result needs; the embedding and tsvector stay in the database.
_COLUMNS = [
    "id", "tenant_id", "agent_id", "user_id", "session_id", "team", "project", "scope", "scopes",
    "content", "kind", "record_kind", "classification", "personal_data", "personal_data_types",
    "source", "provenance", "metadata", "content_hash", "created_at", "updated_at", "valid_from",
    "invalid_at", "occurred_at", "retention_until", "legal_hold", "shared_with", "extraction_status",
    "extraction_error",
]  # fmt: skip


# Idle retention needs the last time an item was recalled. The retrieval statement
# records it itself (no extra round trip): only rows not touched within the last
# hour are rewritten, so a hot item costs one write an hour, and rows another
# transaction holds are skipped rather than waited on (no recall ever blocks or
# deadlocks on this bookkeeping).
def _touch(rows: str, condition: str) -> str:
    """The stamp's UPDATE: the items of ``rows`` / ``condition`` not stamped within the
    hour, skipping rows another transaction holds."""
    return (
        "UPDATE memory_item SET last_recalled_at = now() WHERE id IN ("  # noqa: S608 - fixed fragments
        f"SELECT t.id FROM memory_item t {rows} WHERE {condition} "
        "(t.last_recalled_at IS NULL OR t.last_recalled_at < now() - interval '1 hour') "
        "ORDER BY t.id FOR UPDATE OF t SKIP LOCKED)"
    )


_TOUCH_CTE = f"touched AS ({_touch('JOIN res ON t.id = res.id', '')} RETURNING 1)"


@dataclass(frozen=True)
class RecallQuery:
    query: str
    scopes: tuple[str, ...]
    keys: Keys
    top_k: int
    mode: str = "hybrid"
    min_score: float | None = None
    recency_weight: float | None = None
    kinds: tuple[str, ...] = ()
    record_kinds: tuple[str, ...] = ()
    created_after: datetime | None = None
    created_before: datetime | None = None
    as_of: datetime | None = None
    include_superseded: bool = False
    datasets: tuple[Any, ...] = ()  # knowledge dataset pks: only their chunks
    # Stamp last_recalled_at on the hits (idle retention): off when the hits are a
    # caller's candidates, not what it returns (the graph rank stamps what it returns).
    stamp: bool = True
    # The item columns the hits carry (the others deferred; ``id`` and ``created_at``
    # always): a caller that reads its answer's rows again later takes what it needs.
    columns: tuple[str, ...] | None = None


@dataclass
class Hit:
    """One ranked item. ``score`` is local to this engine and mode (see docs)."""

    item: MemoryItem
    score: float
    similarity: float | None = None
    vector_rank: int | None = None
    keyword_rank: int | None = None
    keyword_score: float | None = None
    signals: dict[str, Any] = field(default_factory=dict)


# The query's words, parsed by every configuration an item may be stored with
# (each item's vector is built with its own language's; the console's filter spans
# tenants and languages, so "ERR-4471" or "Lieferungen" split and stem the same way
# on both sides), each language's lexemes joined with & (every word must match) or
# | (any word may), the languages' groups joined with |. Each lexeme is quoted
# before the cast, so no input can inject tsquery operators.
_TSQUERY_SQL = (
    "(SELECT string_agg('(' || arm || ')', ' | ')::tsquery FROM (SELECT (SELECT string_agg("  # noqa: S608
    f"{QUOTED_LEXEME}, %s) FROM (SELECT lexeme FROM unnest(to_tsvector(c::regconfig, %s)) LIMIT %s) "
    "AS words) AS arm FROM unnest(%s::text[]) AS c) AS arms WHERE arm IS NOT NULL)"
)
ALL_WORDS, ANY_WORD = " & ", " | "


class ParsedQuery(SearchQuery):
    """A tsquery built in the database from free text (see _TSQUERY_SQL)."""

    def __init__(self, text: str, joiner: str) -> None:
        super().__init__(text)
        self.text = text
        self.joiner = joiner

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list[Any]]:
        return _TSQUERY_SQL, [self.joiner, self.text, MAX_QUERY_TERMS, list(CONFIGS)]


def keyword_query(text: str, *, require_all: bool) -> ParsedQuery | None:
    """The tsquery expression for ``text``, or None when it holds no word at all
    (the console's text filter; ranking goes through :mod:`memory.retrieval.lexical`)."""
    if not _WORD.search(text):
        return None
    return ParsedQuery(text, ALL_WORDS if require_all else ANY_WORD)


def _filters(access: MemoryAccess, rq: RecallQuery, visible: Q | None = None) -> Q:
    if visible is None:
        visible = visible_q(access, rq.scopes, rq.keys, at=rq.as_of, include_superseded=rq.include_superseded)
    q = visible
    if rq.kinds:
        q &= Q(kind__in=list(rq.kinds))
    if rq.record_kinds:
        q &= Q(record_kind__in=list(rq.record_kinds))
    if rq.datasets:
        q &= Q(dataset_id__in=list(rq.datasets))
    if rq.created_after:
        q &= Q(created_at__gte=rq.created_after)
    if rq.created_before:
        q &= Q(created_at__lt=rq.created_before)
    return q


def _time_condition(win: Windows, column: str) -> tuple[str, list[Any]]:
    """SQL true when ``column`` (an occurred_at) lies in one of ``win``'s windows."""
    starts = [s for s, _e in win.ranges]
    ends = [e for _s, e in win.ranges]
    return (  # column is a fixed name chosen by the callers; the windows are parameters
        f"({column} IS NOT NULL AND (EXISTS (SELECT 1 FROM"  # noqa: S608
        f" unnest(%s::timestamptz[], %s::timestamptz[]) "
        f"AS w(s, e) WHERE {column} >= w.s AND {column} < w.e) "
        f"OR extract(month FROM {column} AT TIME ZONE 'UTC')::int = ANY(%s::int[])))",
        [starts, ends, list(win.months)],
    )


def _time_candidates_sql(base: Any, win: Windows, literal: str, limit: int) -> tuple[str, tuple[Any, ...]]:
    """The ``limit`` items inside ``win`` nearest the query, by exact cosine: the
    ``+ 0`` keeps the planner off the HNSW index, whose filtered scan would walk the
    whole graph when few items (or none) are dated; the partial (tenant,
    occurred_at) index bounds the rows read to the dated ones, within the span of
    the ranges when no month of any year is asked for."""
    condition, cparams = _time_condition(win, '"memory_item"."occurred_at"')
    # A fixed fragment; the windows are bound parameters.
    qs = base.filter(occurred_at__isnull=False).filter(
        RawSQL(condition, cparams, output_field=BooleanField())  # noqa: S611
    )
    if not win.months:
        qs = qs.filter(
            occurred_at__gte=min(s for s, _e in win.ranges), occurred_at__lt=max(e for _s, e in win.ranges)
        )
    qs = (
        qs.annotate(
            distance=RawSQL(
                '("memory_item"."embedding" <=> %s::vector) + 0', [literal], output_field=FloatField()
            )
        )
        .order_by("distance")
        .values_list("id", "distance")[:limit]
    )
    sql, params = qs.query.sql_with_params()
    return sql, tuple(params)


def _vector_sql(condition: Q, literal: str, limit: int) -> tuple[str, tuple[Any, ...]]:
    sql, params = compiled(
        ("vector", limit), condition, partial(_vector_rows, limit), markers=(QUERY_VECTOR,)
    )
    return sql, tuple(literal if p is QUERY_VECTOR else p for p in params)


def nearest_rows(condition: Q, literal: str, limit: int) -> list[tuple[Any, float]]:
    """(id, cosine distance) of the ``limit`` items meeting ``condition`` nearest the
    vector ``literal``, nearest first (the HNSW index's order)."""
    sql, params = _vector_sql(condition, literal, limit)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def _vector_rows(limit: int, condition: Q) -> Any:
    return (
        # The same operator and operand shape as the HNSW index (vector_cosine_ops).
        MemoryItem.objects.filter(condition)
        .annotate(
            distance=RawSQL(
                '"memory_item"."embedding" <=> %s::vector', [QUERY_VECTOR], output_field=FloatField()
            )
        )
        .order_by("distance")
        .values_list("id", "distance")[:limit]
    )


# Stands for the query's vector in a compiled statement, until a recall binds it.
QUERY_VECTOR = object()


def _neighbour_rows(condition: Q) -> Any:
    # Unordered: the model's default order (newest first) inside the CTE made every
    # probe for a later neighbour scan its session backwards and sort.
    return (
        MemoryItem.objects.filter(condition)
        .order_by()
        .values_list("id", "embedding", "agent_id", "session_id", "created_at")
    )


_KEYWORD_ROWS_CTE = (
    "k AS (SELECT * FROM unnest(%s::uuid[], %s::float8[], %s::timestamptz[], %s::float8[]) "
    "AS k(id, rank, created_at, coverage))"
)
# Equal text ranks are common (the same words matched): the newer item first.
_KEYWORD_RANKS_CTE = (
    "kr AS (SELECT id, rank, coverage, "
    "row_number() OVER (ORDER BY rank DESC, created_at DESC, id) AS r FROM k)"
)
_embedding_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="fedmem-embed")


def _vector_literal(vector: Any) -> str:
    # pgvector's text form; float32 needs no more than 9 significant digits.
    return "[" + ",".join(f"{x:.9g}" for x in vector.tolist()) + "]"


def _signals(row: Any, names: list[str]) -> dict[str, Any]:
    signals: dict[str, Any] = {}
    if names and (said_by := label(row.content)) in names:
        signals["speaker"] = said_by
    if row.kcoverage is not None:
        signals["lexical"] = float(row.kcoverage)
    if row.tmatch:
        signals["time_match"] = True
    if row.context is not None:
        # The better neighbour's fused score (before the context weight).
        signals["context"] = float(row.context)
    if row.sentence is not None:
        # The query's cosine with the item's best sentence (items of several).
        signals["sentence"] = float(row.sentence)
    if row.context_far is not None:
        # The better of the turns two apart, the same way.
        signals["context_far"] = float(row.context_far)
    return signals


def _neighbours(anchor: str, *, before: bool, offset: int = 0, limit: int = 1, columns: str = "n.id") -> str:
    """``columns`` of the visible items (``vis`` as ``n``) written just before or just
    after ``anchor``'s row in its session, nearest first: ``offset`` skips the nearest,
    ``limit`` caps them. One probe of the (agent, session, created_at, id) index.
    Fixed fragments only."""
    side, order = ("<", " DESC") if before else (">", "")
    # The anchor is a fixed alias and the bounds are integers chosen by the callers.
    return (
        f"SELECT {columns} FROM vis n WHERE {anchor}.session_id <> '' "  # noqa: S608
        f"AND n.agent_id = {anchor}.agent_id AND n.session_id = {anchor}.session_id "
        f"AND (n.created_at, n.id) {side} ({anchor}.created_at, {anchor}.id) "
        f"ORDER BY n.created_at{order}, n.id{order} {f'OFFSET {offset} ' if offset else ''}LIMIT {limit}"
    )


def _scored_columns(alias: str, sentence_weight: float) -> str:
    """``sim``, the query's cosine with ``alias``'s item, and ``best``, its best
    sentence's (one probe of the (item, position) index; NULL for an item of one
    sentence, and unread without a sentence weight). Fixed fragments only."""
    best = (
        "(SELECT max(1 - (s.embedding <=> qv.v)) FROM memory_item_sentence s "  # noqa: S608
        f"WHERE s.item_id = {alias}.id)"
        if sentence_weight > 0
        else "NULL::float8"
    )
    return f"1 - ({alias}.embedding <=> qv.v) AS sim, {best} AS best"


def stamp_recalled(ids: list[Any]) -> None:
    """Stamp ``last_recalled_at`` on these items, as the retrieval statement does on its
    hits: for a caller that returns other items than the hits it ranked from."""
    if not ids:
        return
    with _stamp_commit(), connection.cursor() as cursor:
        cursor.execute(_touch("", "t.id = ANY(%s::uuid[]) AND"), [list(ids)])


@contextlib.contextmanager
def _stamp_commit() -> Iterator[None]:
    """Where a stamp commits. Run on its own (autocommit), in a transaction of its own
    that does not wait for the WAL flush: the stamp only feeds idle retention, a crash
    loses at most the last fraction of a second of stamps (an item then looks recalled
    a little earlier than it was), and the wait was ~6 ms of a recall at 100k facts.
    Inside a caller's transaction the commit is the caller's, with its durability."""
    if not connection.get_autocommit():
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = off")
        yield


def retrieve(access: MemoryAccess, rq: RecallQuery, *, visible: Q | None = None) -> list[Hit]:
    """Rank what ``access`` may read. ``visible`` replaces that condition when the
    caller built it from :mod:`memory.enforcement` itself (the console's union of
    every agent a user may view); scopes and keys of ``rq`` are then unused."""
    if rq.mode not in MODES:
        raise ValueError(f"unknown search mode {rq.mode!r}")
    condition = _filters(access, rq, visible)
    base = MemoryItem.objects.filter(condition)
    candidates = settings.FEDMEM_RETRIEVAL_CANDIDATES
    reranker = get_reranker()
    # The reranker needs a deeper head than the answer to reorder.
    limit = min(max(rq.top_k * 4, rq.top_k), candidates * 2) if reranker else rq.top_k
    require_all = rq.mode == "hybrid" and settings.FEDMEM_HYBRID_KEYWORD_MATCH == "all"
    lexical = rq.mode in ("hybrid", "keyword") and bool(_WORD.search(rq.query))
    wanted = _COLUMNS
    if rq.columns is not None:
        if unknown := set(rq.columns) - set(_COLUMNS):
            raise ValueError(f"no item column {sorted(unknown)} to read")
        wanted = ["id", "created_at", *rq.columns]
    columns = ", ".join(f"m.{c}" for c in dict.fromkeys(wanted))
    params: list[Any] = []
    ctes: list[str] = []
    keyword_rows: list[tuple[Any, float, Any, float]] | None = None
    if rq.mode == "hybrid":
        # The query's embedding (torch, GIL released) is computed while the database
        # ranks the lexical candidates: the two slowest steps of a recall overlap.
        pending = _embedding_pool.submit(embed_query, rq.query)
        keyword_rows = (
            bm25_rows(
                condition,
                access.tenant_id,
                rq.query,
                candidates,
                require_all=require_all,
                postings=RECALL_POSTINGS,
            )
            if lexical
            else []
        )
        embedding = pending.result()
    else:
        embedding = embed_query(rq.query) if rq.mode == "vector" else None
        if lexical:
            keyword_rows = bm25_rows(
                condition, access.tenant_id, rq.query, candidates, postings=RECALL_POSTINGS
            )
    vector = _vector_literal(embedding) if embedding is not None else None
    if vector is not None:
        # The nearest candidates in a statement of their own, passed back as arrays
        # like the lexical ones: a nearest-neighbour search is planned for its values
        # on every run (vectors.planned_per_run), and the statement fusing the lists,
        # without one, may then keep a prepared plan (its planning was about a third
        # of it at 100k facts).
        nearest = nearest_rows(condition, vector, candidates)
        ctes.append(
            "v AS (SELECT * FROM unnest(%s::uuid[], %s::float8[]) AS v(id, distance)), "
            "vr AS (SELECT id, distance, row_number() OVER (ORDER BY distance, id) AS r FROM v), "
            "qv AS MATERIALIZED (SELECT %s::vector AS v)"
        )
        params.extend([[row[0] for row in nearest], [row[1] for row in nearest], vector])
    if keyword_rows is not None:
        # The candidates the database ranked a moment ago, passed back as arrays;
        # the score shown is BM25 mapped into [0, 1) (s / (s + 1)), so min_score
        # reads the same for every query.
        ctes.append(_KEYWORD_ROWS_CTE + ", " + _KEYWORD_RANKS_CTE)
        params.extend(
            [
                [row[0] for row in keyword_rows],
                [row[1] / (row[1] + 1) for row in keyword_rows],
                [row[2] for row in keyword_rows],
                [min(row[3], 1.0) for row in keyword_rows],
            ]
        )
    if not ctes or (rq.mode == "keyword" and not keyword_rows):  # keyword mode, nothing matched
        return []
    time_weight = settings.FEDMEM_HYBRID_TIME_WEIGHT
    win = (
        windows(rq.query, rq.as_of)
        if time_weight > 0 and vector is not None and keyword_rows is not None
        else Windows()
    )
    if win:
        tsql, tparams = _time_candidates_sql(base, win, vector, candidates)  # type: ignore[arg-type]
        ctes.append(f"tv AS MATERIALIZED ({tsql})")
        params.extend(tparams)
    k = settings.FEDMEM_RRF_K
    linear = settings.FEDMEM_HYBRID_FUSION == "linear"
    if vector is not None and keyword_rows is not None:
        # linear: dense weight x cosine + (1 - dense weight) x BM25 coverage (the
        # cosine of a keyword-only candidate is computed below); rrf: 1/(k + rank) summed.
        rrf = "0::float8" if linear else "coalesce(1.0 / (%s + vr.r), 0) + coalesce(1.0 / (%s + kr.r), 0)"
        fused = " ".join(  # fixed fragments only
            [
                "SELECT coalesce(vr.id, kr.id) AS fid, vr.r AS vrank, kr.r AS krank, kr.rank AS kscore,",
                "coalesce(kr.coverage, 0) AS kcoverage,",
                rrf,
                "AS base FROM vr FULL OUTER JOIN kr ON vr.id = kr.id",
            ]
        )
        if not linear:
            params.extend([k, k])
        if win:
            # The dated candidates neither list holds, scored below like the others.
            fused = (
                f"SELECT * FROM ({fused}) AS fb UNION ALL SELECT tv.id, NULL::bigint, NULL::bigint, "  # noqa: S608
                "NULL::float8, 0::float8, 0::float8 FROM tv "
                "WHERE tv.id NOT IN (SELECT id FROM vr) AND tv.id NOT IN (SELECT id FROM kr)"
            )
    elif vector is not None:
        linear = False
        fused = (
            "SELECT id AS fid, r AS vrank, NULL::bigint AS krank, NULL::float AS kscore, "
            "NULL::float AS kcoverage, 1 - distance AS base FROM vr"
        )
    else:
        linear = False
        fused = (
            "SELECT id AS fid, NULL::bigint AS vrank, r AS krank, rank AS kscore, coverage AS kcoverage, "
            "rank AS base FROM kr"
        )
    # The final statement reads the query's vector from one row (qv), bound once: as
    # a parameter per use it was a 5 KB literal sent and parsed some thirty times.
    # Each row's cosine (sim) and best sentence's (best) are computed once, in a
    # subquery over the row (m_c for the candidate, the ring's own for a
    # neighbour), and the score's terms name those columns: written out in each
    # term, as before, the same cosine was computed up to eight times a row, each
    # time reading the embedding back from TOAST (pgvector stores it out of line).
    sentence_weight = settings.FEDMEM_HYBRID_SENTENCE_WEIGHT if linear else 0.0
    similarity = "m_c.sim" if vector is not None else "NULL::float"
    select_params: list[Any] = []
    weight = settings.FEDMEM_RECENCY_WEIGHT if rq.recency_weight is None else rq.recency_weight
    context_join = ""
    context = "NULL::float"
    context_far = "NULL::float"
    sentence = "NULL::float"
    context_len = 0
    # OFFSET 0 keeps the planner from pulling the subquery up, which would copy its
    # expressions back into every term that names them.
    own_columns = _scored_columns("m", sentence_weight)
    own_join = ""
    if vector is not None:
        own_join = f"CROSS JOIN qv CROSS JOIN LATERAL (SELECT {own_columns} OFFSET 0) m_c "
    if linear:
        dense = settings.FEDMEM_HYBRID_DENSE_WEIGHT

        def cosine(alias: str) -> tuple[str, list[Any]]:
            """The query's cosine with ``alias``'s item, its best sentence weighed in."""
            if sentence_weight <= 0:
                return f"{alias}.sim", []
            return (
                f"((1 - %s) * {alias}.sim + %s * coalesce({alias}.best, {alias}.sim))",
                [sentence_weight, sentence_weight],
            )

        own_cosine, own_params = cosine("m_c")
        score = f"(%s * {own_cosine} + %s * f.kcoverage)"
        own_params = [dense, *own_params, 1 - dense]
        select_params.extend(own_params)
        if sentence_weight > 0:
            sentence = "m_c.best"
        context_weight = settings.FEDMEM_HYBRID_CONTEXT_WEIGHT
        if context_weight > 0:
            # The neighbours' fused scores, on the same scale as the item's own.
            prev_cosine, prev_params = cosine("nb_prev")
            next_cosine, next_params = cosine("nb_next")
            context = (
                f"greatest(%s * {prev_cosine} + %s * coalesce(kp.coverage, 0), "
                f"%s * {next_cosine} + %s * coalesce(kn.coverage, 0))"
            )
            context_params = [dense, *prev_params, 1 - dense, dense, *next_params, 1 - dense]
            # Textual order: the context column (before the score), then the score's
            # own terms, the weight and the context again.
            select_params[0:0] = context_params
            context_len = len(context_params)
            # Lifted toward a better neighbour, never by a worse one: a weaker
            # neighbour says nothing about the item, and an absolute bonus would
            # favour every item that has neighbours over one that stands alone.
            own = score
            score = f"({own} + %s * greatest(coalesce({context}, 0) - {own}, 0))"
            select_params.extend([context_weight, *context_params, *own_params])
            far_weight = settings.FEDMEM_HYBRID_CONTEXT_FAR_WEIGHT
            if far_weight > 0:
                # The turns two apart, toward their lead in the same way (added, so
                # an item between a strong turn and its answer gains from both).
                prev_cosine, prev_params = cosine("nb_prev2")
                next_cosine, next_params = cosine("nb_next2")
                context_far = (
                    f"greatest(%s * {prev_cosine} + %s * coalesce(kp2.coverage, 0), "
                    f"%s * {next_cosine} + %s * coalesce(kn2.coverage, 0))"
                )
                far_params = [dense, *prev_params, 1 - dense, dense, *next_params, 1 - dense]
                select_params[context_len:context_len] = far_params
                context_len += len(far_params)
                score = f"({score} + %s * greatest(coalesce({context_far}, 0) - {own}, 0))"
                select_params.extend([far_weight, *far_params, *own_params])
            nsql, nparams = compiled(("session neighbours",), condition, _neighbour_rows)
            ctes.append(f"vis AS NOT MATERIALIZED ({nsql})")
            params.extend(nparams)

            def ring(before: bool, offset: int = 0) -> str:
                # The neighbour's row first, then its cosine and best sentence, once:
                # scored inside the probe, a far ring's skipped row was scored too.
                probe = _neighbours("m", before=before, offset=offset, columns="n.id, n.embedding")
                return f"SELECT r.id, {_scored_columns('r', sentence_weight)} FROM ({probe}) r OFFSET 0"  # noqa: S608

            context_join += " " + " ".join(  # fixed fragments only
                [
                    f"LEFT JOIN LATERAL ({ring(True)}) nb_prev ON true",
                    f"LEFT JOIN LATERAL ({ring(False)}) nb_next ON true",
                    "LEFT JOIN kr kp ON kp.id = nb_prev.id LEFT JOIN kr kn ON kn.id = nb_next.id",
                ]
            )
            if far_weight > 0:
                context_join += " " + " ".join(  # fixed fragments only
                    [
                        f"LEFT JOIN LATERAL ({ring(True, 1)}) nb_prev2 ON true",
                        f"LEFT JOIN LATERAL ({ring(False, 1)}) nb_next2 ON true",
                        "LEFT JOIN kr kp2 ON kp2.id = nb_prev2.id LEFT JOIN kr kn2 ON kn2.id = nb_next2.id",
                    ]
                )
            anchors = settings.FEDMEM_HYBRID_NEIGHBOUR_ANCHORS
            if anchors > 0:
                # The items around the best candidate of each list join the
                # candidates: the turn that answers often follows the one that words
                # the question, and shares no word with it and little meaning, so
                # neither list holds it, and a lift only reaches candidates. As many
                # on each side as the context terms can lift (two with the far ring).
                reach = 2 if far_weight > 0 else 1
                fused = " ".join(  # fixed fragments; the count is a parameter
                    [
                        f"WITH f0 AS MATERIALIZED ({fused}) SELECT * FROM f0 UNION ALL",  # noqa: S608
                        "SELECT DISTINCT nb.id, NULL::bigint, NULL::bigint, NULL::float8,",
                        "0::float8, 0::float8",
                        "FROM f0 JOIN memory_item a ON a.id = f0.fid CROSS JOIN LATERAL",
                        f"(({_neighbours('a', before=True, limit=reach)})",
                        f"UNION ALL ({_neighbours('a', before=False, limit=reach)})) nb",
                        "WHERE (f0.vrank <= %s OR f0.krank <= %s) AND nb.id NOT IN (SELECT fid FROM f0)",
                    ]
                )
                params.extend([anchors, anchors])
    else:
        score = "f.base"
    if vector is not None and keyword_rows is not None and weight > 0:
        # A brand-new item gains weight x one first place in one list (rrf) or x the
        # dense weight (linear); halves every half-life.
        score += " + %s * power(0.5, extract(epoch FROM (now() - m.created_at)) / (86400.0 * %s)) * %s"
        select_params.extend(
            [
                weight,
                settings.FEDMEM_RECENCY_HALF_LIFE_DAYS,
                settings.FEDMEM_HYBRID_DENSE_WEIGHT if linear else 1 / (k + 1),
            ]
        )
    tmatch = "NULL::boolean"
    if win:
        tmatch, tparams = _time_condition(win, "m.occurred_at")
        score += f" + %s * ({tmatch})::int"
        select_params.extend([time_weight if linear else time_weight / (k + 1), *tparams])
        # The match column comes after similarity and context in the statement's text.
        select_params[context_len:context_len] = tparams
    speaker_weight = settings.FEDMEM_HYBRID_SPEAKER_WEIGHT
    names = (
        named_labels(rq.query)
        if speaker_weight > 0 and vector is not None and keyword_rows is not None
        else []
    )
    if names:
        # The label the item's content opens with, compared as written (case included).
        score += " + %s * coalesce(substring(m.content from %s) = ANY(%s::text[]), false)::int"
        select_params.extend([speaker_weight if linear else speaker_weight / (k + 1), LABEL_PATTERN, names])
    where = ""
    where_params: list[Any] = []
    if rq.min_score is not None:
        # min_score is a floor on cosine similarity (vector, hybrid) or on the text rank (keyword).
        if vector is not None:
            where = "WHERE m_c.sim >= %s"
            where_params = [rq.min_score]
        else:
            where = "WHERE f.kscore >= %s"
            where_params = [rq.min_score]
    # Every interpolated piece is a fixed fragment chosen above or SQL compiled by
    # Django; every value (vector, tsquery, ids, weights) is a bound parameter.
    # Ties (common under rank fusion) go to the better vector rank, then the newer item.
    order = "score DESC, vrank NULLS LAST, created_at DESC, id"
    # f is materialized: inlined, its FULL JOIN key (coalesce of two ids) hides the
    # primary key from the planner, which then scanned every item of the tenant and
    # rebuilt the fused candidates once per item (at 10k items 180 ms of a 200 ms
    # recall; materialized, the statement takes ~3 ms).
    sql = (
        f"WITH {', '.join(ctes)}, f AS MATERIALIZED ({fused}), "  # noqa: S608
        f"res AS (SELECT {columns}, f.vrank, f.krank, f.kscore, f.kcoverage, {similarity} AS similarity, "
        f"{context} AS context, {context_far} AS context_far, {sentence} AS sentence, {tmatch} AS tmatch, "
        f"{score} AS score "
        f"FROM f JOIN memory_item m ON m.id = f.fid {own_join}{context_join} "
        f"{where} ORDER BY {order} LIMIT %s)"
        f"{', ' + _TOUCH_CTE if rq.stamp else ''} SELECT * FROM res ORDER BY {order}"
        # The dated candidates (tv) are a search of their own, planned per run.
        f"{'' if win else ' ' + CHOSEN_ROWS}"
    )
    params = [*params, *select_params, *where_params, limit]
    with _stamp_commit() if rq.stamp else contextlib.nullcontext():
        rows = list(MemoryItem.objects.raw(sql, params))
    hits = [
        Hit(
            item=row,
            score=float(row.score),
            similarity=None if row.similarity is None else float(row.similarity),
            vector_rank=row.vrank,
            keyword_rank=row.krank,
            keyword_score=None if row.kscore is None else float(row.kscore),
            signals=_signals(row, names),
        )
        for row in rows
    ]
    if reranker is not None and hits:
        scores = reranker.scores(rq.query, [hit.item.content for hit in hits])
        for hit, rerank_score in zip(hits, scores, strict=True):
            hit.signals["fused_score"] = hit.score
            hit.score = rerank_score
        hits.sort(key=lambda hit: hit.score, reverse=True)
        hits = hits[: rq.top_k]
    return hits
