"""Graph-aware ranking: the one retrieval core of recall mode ``graph``, ``discover``
and ``answer``.

1. **Candidates**: the hybrid list (dense + BM25, ``SEED_POOL`` long) and the
   graph neighbourhood of its facts, ``hops`` rounds deep: facts sharing a
   *specific* entity (:mod:`memory.retrieval.specificity`: hubs, dates, numbers,
   pronouns and generic nouns never bridge), facts whose causal edge continues
   one of theirs (the stored span links), and the turns right before and after
   each seed in its session (a conversation's neighbourhood).
2. **Graph**: items, their bridging entities and their sessions, item -> entity
   weighted by the entity's specificity, entity -> entity where two spans name the
   same thing (embedding cosine >= ``FEDMEM_ENTITY_SYNONYM_THRESHOLD``: "loading
   bays" / "the remaining bay"), item -> item along causal links and term bridges,
   item -> session node for the candidates written in one session.
3. **Support**: personalized PageRank over that graph, restarting at the seeds in
   proportion to their query relevance (cf. HippoRAG 2), solved exactly; a fact's
   graph score is the mass it receives from the *other* restart nodes (its own
   relevance echoing back through its own entities is no evidence). Fused with the
   dense and lexical relevance: ``relevance + GRAPH_WEIGHT x support / max``
   where ``relevance = DENSE_WEIGHT x cosine + (1 - DENSE_WEIGHT) x lexical``.
4. **Chain**: the causes behind the best direct match, walked back one best cause
   at a time (:mod:`memory.reasoning.chain`, the walk ``answer`` states), each gain
   ``CHAIN_BONUS`` times its link score, and only a cause a stored span link
   asserts may overtake the best direct match left. A root cause that shares no
   word with the question can so rise above facts that are merely similar to it.

Every read is inside ``view`` (visibility in SQL); the result says why each fact
ranked: its signals, the bridges and links that reached it.
"""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection
from django.db.models import Q

from core.beside import Beside
from core.statements import fetch
from memory.embeddings import embed_query
from memory.enforcement import MemoryAccess
from memory.models import CausalEdge, Entity, MemoryItem, Mention
from memory.reasoning.chain import Pool, asserted_links, walk_back
from memory.retrieval.hybrid import RecallQuery, retrieve, stamp_recalled
from memory.retrieval.lexical import TtlCounts, bm25_rows_many, tenant_stats
from memory.retrieval.specificity import bridge_weight, distinctions, session_weight
from memory.retrieval.vectors import stored_vectors

SEED_POOL = 30
# What the rank reads of a seed's row (its session's turns and its words); the rows it
# returns are read whole at the end. Every other column (JSON, arrays, six timestamps)
# was converted into a model field for 30 rows that nothing read.
SEED_COLUMNS = ("agent_id", "session_id", "content")
# The best-ranked facts a chain may be walked back through.
CHAIN_POOL = 50
# What a place on that chain adds to a fact's score, times its link score (at most 1).
CHAIN_BONUS = 0.5
# Mentions read per bridging entity, and per entity when counting its facts.
BRIDGES_PER_ENTITY = 20
DF_CAP = 5000
DENSE_WEIGHT = 0.6
GRAPH_WEIGHT = 2.0
DAMPING = 0.7
ITERATIONS = 30
CAUSAL_WEIGHT = 2.0
SESSION_WEIGHT = 1.5
# The best SESSION_SEEDS seeds bring up to SESSION_WINDOW turns on each side of them in
# their session; the other seeds their turns right before and after.
SESSION_SEEDS = 5
SESSION_WINDOW = 6
TERM_WEIGHT = 1.0
# Term bridges: from the best TERM_SOURCES facts of each round, to TERM_BRIDGES
# facts each whose BM25 coverage of the source's words reaches TERM_FLOOR.
TERM_SOURCES = 4
TERM_BRIDGES = 6
TERM_FLOOR = 0.15
# Items a source's word brings as candidates, as BRIDGES_PER_ENTITY for an entity: a
# word in every incident report would otherwise make each source score a share of the
# whole tenant, thousands of facts at 10k.
TERM_POSTINGS = 50
# Named causes: of the facts best matching a source's cause span, the first few whose
# BM25 coverage of the span's words reaches twice the term bridges' floor (the fact
# must say much of what the span names, not share one word with it).
NAMED_CAUSES = 3
NAMED_FLOOR = 0.3
# Restart mass: a softmax over the seeds' relevance at this temperature.
TEMPERATURE = 0.05


@dataclass
class Ranked:
    # A MemoryItem as returned; a graph.Candidate (its id, agent, session, similarity)
    # while the rank orders a few hundred.
    item: Any
    score: float
    relevance: float
    similarity: float
    lexical: float
    graph: float
    kind: str  # seed | terms | entity | causal | session
    hop: int
    seed_id: Any
    path: list[dict[str, Any]] = field(default_factory=list)
    vector_rank: int | None = None
    keyword_rank: int | None = None
    # On the causal chain walked back from the best match: its place (1: the nearest
    # cause) and the score of its link to the fact after it.
    chain: dict[str, Any] | None = None

    def why(self) -> dict[str, Any]:
        return {
            "chain": self.chain,
            "score": round(self.score, 4),
            "relevance": round(self.relevance, 4),
            "similarity": round(self.similarity, 4),
            "lexical": round(self.lexical, 4),
            "graph": round(self.graph, 4),
            "reached_by": self.kind,
            "bridges": [s for s in self.path if s["bridge"] != "causal"][-3:],
            "links": [s for s in self.path if s["bridge"] == "causal"][-3:],
        }


@dataclass
class _Reach:
    kind: str
    hop: int
    seed: Any
    path: list[dict[str, Any]]


def relevance(similarity: float | None, lexical: float | None) -> float:
    return DENSE_WEIGHT * (similarity or 0.0) + (1 - DENSE_WEIGHT) * (lexical or 0.0)


def _mention_counts(entity_ids: list[int]) -> dict[int, int]:
    with connection.cursor() as cursor:
        # Each count reads at most DF_CAP index entries: a hub is a hub at any size.
        cursor.execute(
            "SELECT e.id, (SELECT count(*) FROM (SELECT 1 FROM memory_mention m "
            "WHERE m.entity_id = e.id LIMIT %s) AS c) FROM unnest(%s::bigint[]) AS e(id)",
            [DF_CAP, entity_ids],
        )
        return dict(cursor.fetchall())


# Mention counts per (tenant, entity), kept as the term statistics are: counting a hub's
# mentions (up to DF_CAP index entries) on every rank was a tenth of the rank's
# statements' time at 100k facts.
entity_counts = TtlCounts()


def entity_weights(
    tenant_id: Any, entity_ids: list[int], documents: int, names: Names | None = None
) -> dict[int, tuple[str, float]]:
    """entity id -> (name, bridge weight) for the entities that may bridge. ``names``:
    the entities' (name, normalized, label) known already (read with the mentions:
    :func:`item_mentions_named`); the others are read and added to it."""
    if not entity_ids:
        return {}
    known = {} if names is None else names
    missing = [pk for pk in entity_ids if pk not in known]
    if missing:
        for pk, *row in fetch(("entity names",), Q(pk__any=missing), _entity_rows):
            known[pk] = tuple(row)  # type: ignore[assignment]
    df = entity_counts.get_many(tenant_id, list(entity_ids), _mention_counts)
    out = {}
    for pk in entity_ids:
        if pk not in known:  # an entity deleted meanwhile
            continue
        name, normalized, label = known[pk]
        weight = bridge_weight(normalized, label, df.get(pk, 0), documents)
        if weight > 0:
            out[pk] = (name, weight)
    return out


def _entity_rows(condition: Q) -> Any:
    return Entity.objects.filter(condition).values_list("pk", "name", "normalized", "label")


def item_mentions(tenant_id: Any, item_ids: list[Any]) -> list[tuple[Any, int]]:
    return fetch(("item mentions",), Q(tenant_id=tenant_id, item_id__any=list(item_ids)), _mention_rows)


# entity id -> (name, normalized name, label)
Names = dict[int, tuple[str, str, str]]


def item_mentions_named(tenant_id: Any, item_ids: list[Any], names: Names) -> list[tuple[Any, int]]:
    """:func:`item_mentions`, each entity's (name, normalized, label) put in ``names``:
    the rank weighs the entities it meets, and read apart their names cost a statement."""
    rows = fetch(
        ("item mentions named",), Q(tenant_id=tenant_id, item_id__any=list(item_ids)), _named_mention_rows
    )
    for _item, entity, name, normalized, label in rows:
        names[entity] = (name, normalized, label)
    return [(item, entity) for item, entity, *_names in rows]


def _named_mention_rows(condition: Q) -> Any:
    return (
        Mention.objects.filter(condition)
        .order_by("item_id", "entity_id")
        .values_list("item_id", "entity_id", "entity__name", "entity__normalized", "entity__label")
        .distinct()
    )


def _mention_rows(condition: Q) -> Any:
    return (
        Mention.objects.filter(condition)
        .order_by("item_id", "entity_id")
        .values_list("item_id", "entity_id")
        .distinct()
    )


def _entity_neighbours(view: Any, entity_ids: list[int], exclude: set[Any]) -> list[tuple[int, Any]]:
    """(entity, visible item) for up to BRIDGES_PER_ENTITY items per entity."""
    rows = view.mentions(entity_ids, limit=BRIDGES_PER_ENTITY + 1)
    return [(e, item) for e, item in rows if item not in exclude]


# The best CAUSAL_LINKS links out of the items' edges and the best into them, by score
# (ties by the edges' ids). Each edge's best links are read in order from the span-link
# index of its direction, and the two edges' items and spans are joined to the kept
# links only: joined first, with the tenant tested on every link, a frontier of a few
# hundred items at 10k facts scanned the whole link table (~60 ms) to keep 400 rows.
# A link joins two edges of one tenant; the kept rows' edges are tested for it.
CAUSAL_LINKS = 200
_LINKS_OF_EDGES = (
    "(SELECT {outward} AS outward, l.source_id, l.target_id, l.score, l.{near} AS k1, l.{far} AS k2 "
    "FROM memory_causal_edge e CROSS JOIN LATERAL (SELECT x.source_id, x.target_id, x.score "
    "FROM memory_span_link x WHERE x.{near} = e.id ORDER BY x.score DESC, x.{far} LIMIT %(limit)s) AS l "
    "WHERE e.tenant_id = %(tenant)s AND e.item_id = ANY(%(items)s::uuid[]) "
    "ORDER BY l.score DESC, l.{near}, l.{far} LIMIT %(limit)s)"
)
# Fixed fragments only: column names from this module; every value is a bound parameter.
_CAUSAL_NEIGHBOURS_SQL = (
    "SELECT o.outward, s.item_id, t.item_id, s.effect, t.cause, o.score FROM ("  # noqa: S608
    + _LINKS_OF_EDGES.format(outward="true", near="source_id", far="target_id")
    + " UNION ALL "
    + _LINKS_OF_EDGES.format(outward="false", near="target_id", far="source_id")
    + ") AS o JOIN memory_causal_edge s ON s.id = o.source_id "
    "JOIN memory_causal_edge t ON t.id = o.target_id "
    "WHERE s.tenant_id = %(tenant)s AND t.tenant_id = %(tenant)s "
    "ORDER BY o.outward DESC, o.score DESC, o.k1, o.k2"
)


def _causal_neighbours(tenant_id: Any, item_ids: list[Any]) -> list[tuple[Any, Any, str, str, float]]:
    """(item, other item, this item's span, the other's span, link score) along stored
    span links in either direction, the best CAUSAL_LINKS of each; visibility is
    applied when rows are read."""
    if not item_ids:
        return []
    with connection.cursor() as cursor:
        values = {"tenant": tenant_id, "items": list(item_ids), "limit": CAUSAL_LINKS}
        cursor.execute(_CAUSAL_NEIGHBOURS_SQL, values)
        rows = cursor.fetchall()
    out = []
    for outward, source_item, target_item, effect, cause, score in rows:
        if outward:
            out.append((source_item, target_item, effect, cause, score))
        else:
            out.append((target_item, source_item, cause, effect, score))
    return [row for row in out if row[0] != row[1]]


# Per frontier row, up to ``width`` turns of its session before it and after it, each
# with how many turns away it is (the (agent, session, created_at) index, in order).
_SESSION_WINDOW_SQL = (
    "SELECT s.id, x.id, x.d FROM unnest(%s::uuid[], %s::uuid[], %s::text[], %s::timestamptz[], %s::int[]) "
    "AS s(id, agent_id, session_id, created_at, width) CROSS JOIN LATERAL ("
    "(SELECT m.id, row_number() OVER (ORDER BY m.created_at DESC) AS d FROM memory_item m "
    "WHERE m.agent_id = s.agent_id AND m.session_id = s.session_id AND m.created_at < s.created_at "
    "ORDER BY m.created_at DESC LIMIT s.width) UNION ALL "
    "(SELECT m.id, row_number() OVER (ORDER BY m.created_at) AS d FROM memory_item m "
    "WHERE m.agent_id = s.agent_id AND m.session_id = s.session_id AND m.created_at > s.created_at "
    "ORDER BY m.created_at LIMIT s.width)) AS x"
)


def _session_neighbours(items: list[MemoryItem], widths: list[int]) -> list[tuple[Any, Any, int]]:
    """(item, a turn of its session, how many turns away), up to ``widths[i]`` turns
    before and after ``items[i]`` in its session, same agent; nearest first."""
    rows = [(i.pk, i.agent_id, i.session_id, i.created_at, w) for i, w in zip(items, widths, strict=True)]
    rows = [r for r in rows if r[2] and r[4] > 0]
    if not rows:
        return []
    with connection.cursor() as cursor:
        cursor.execute(_SESSION_WINDOW_SQL, [[r[n] for r in rows] for n in range(5)])
        return sorted(cursor.fetchall(), key=lambda r: r[2])


def session_sizes(keys: list[tuple[Any, str]]) -> dict[tuple[Any, str], int]:
    """(agent, session id) -> how many items it holds (counted up to DF_CAP)."""
    if not keys:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.agent_id, s.session_id, (SELECT count(*) FROM (SELECT 1 FROM memory_item m "
            "WHERE m.agent_id = s.agent_id AND m.session_id = s.session_id LIMIT %s) AS c) "
            "FROM unnest(%s::uuid[], %s::text[]) AS s(agent_id, session_id)",
            [DF_CAP, [k[0] for k in keys], [k[1] for k in keys]],
        )
        return {(agent, session): count for agent, session, count in cursor.fetchall()}


_WORDS = re.compile(r"\w+")


def _shared_words(a: str, b: str) -> list[str]:
    from memory.retrieval.specificity import GENERIC_NOUNS, PRONOUNS, TIME_WORDS

    skip = PRONOUNS | TIME_WORDS | GENERIC_NOUNS
    wa = {w for w in _WORDS.findall(a.lower()) if len(w) > 3 and w not in skip}
    return sorted(wa & {w for w in _WORDS.findall(b.lower()) if len(w) > 3})[:5]


def _term_neighbours(
    view: Any, tenant_id: Any, sources: list[tuple[Any, str, bool]]
) -> tuple[list[tuple[Any, Any, float]], list[tuple[Any, Any, float]]]:
    """The term bridges, for facts whose shared thing the entity spans name differently
    ("higher training throughput" / "model training throughput"): for each (item, its
    text, False) of ``sources``, (item, item sharing its rarest words, BM25 coverage of
    the item's words). And the *named causes*: for each (item, cause span an edge of it
    names, True), (item, a fact stating that cause, coverage of the span's words) — "Da
    die SSD die maximale Schreibgeschwindigkeit erreicht hat, ..." names what "Der
    SSD-Laufwerk hat eine Schreibgeschwindigkeit von 550 MB/s erreicht." states; the
    span's bridges are term bridges too."""
    bridges: list[tuple[Any, Any, float]] = []
    named: list[tuple[Any, Any, float]] = []
    if not sources:
        return bridges, named
    # One statement parses every source's words and one reads their statistics; each
    # source is then scored by its own BM25 statement (see bm25_rows_many), which reads
    # no candidate that could not reach the floor: a source's common words select none.
    found = bm25_rows_many(
        view.q, tenant_id, [text for _pk, text, _span in sources], TERM_BRIDGES + 1, floor=TERM_FLOOR,
        postings=TERM_POSTINGS,
    )  # fmt: skip
    for (source, _text, span), rows in zip(sources, found, strict=True):
        # The source itself is among its best rows unless a capped word left it out.
        others = [row for row in rows if row[0] != source]
        for pk, _score, _created, coverage in others[:TERM_BRIDGES]:
            if coverage >= TERM_FLOOR:
                bridges.append((source, pk, min(coverage, 1.0)))
        if span:
            named += [
                (source, pk, min(coverage, 1.0))
                for pk, _score, _created, coverage in others[:NAMED_CAUSES]
                if coverage >= NAMED_FLOOR
            ]
    return bridges, named


def term_sources(items: list[MemoryItem], spans: list[tuple[Any, str]]) -> list[tuple[Any, str, bool]]:
    """What :func:`_term_neighbours` looks up: each item's text, then each (item, cause
    span it names) of ``spans``."""
    return [(item.pk, item.content, False) for item in items] + [(pk, span, True) for pk, span in spans]


def _cause_spans(tenant_id: Any, item_ids: list[Any]) -> list[tuple[Any, str]]:
    """(item, cause span) of each edge the items assert, in the items' order (a span
    an item names twice, once)."""
    spans: dict[Any, list[str]] = {}
    if item_ids:
        # Compiled once (core.statements): the ORM took most of this read's millisecond.
        condition = Q(tenant_id=tenant_id, item_id__any=list(item_ids))
        for item_id, cause in fetch(("cause spans",), condition, _cause_span_rows):
            spans.setdefault(item_id, []).append(cause)
    return [(pk, cause) for pk in item_ids for cause in dict.fromkeys(spans.get(pk, []))]


def _cause_span_rows(condition: Q) -> Any:
    return CausalEdge.objects.filter(condition).order_by("id").values_list("item_id", "cause")


def entity_vectors(entity_ids: list[int]) -> tuple[list[int], np.ndarray]:
    """The entities' ids and their embeddings as float32 rows, in that order (read in
    pgvector's binary form: :func:`memory.retrieval.vectors.stored_vectors`)."""
    return stored_vectors(Entity, entity_ids)


def entity_synonyms(entity_ids: list[int], names: Names | None = None) -> list[tuple[int, int, float]]:
    """Pairs of distinct entities whose names' embeddings are near enough to be one thing,
    and whose identifiers and distinguishing words agree ("incident 12" and "incident 13"
    embed at cosine 0.85, "the north warehouse" and "the south warehouse" at 0.80; they
    are two things each: :func:`memory.retrieval.specificity.may_be_one`)."""
    threshold = settings.FEDMEM_ENTITY_SYNONYM_THRESHOLD
    if len(entity_ids) < 2 or threshold >= 1:
        return []
    ids, matrix = entity_vectors(entity_ids)
    if len(ids) < 2:
        return []
    # The normalized names: those given (entity_weights read them), else read now.
    if names is None or any(pk not in names for pk in ids):
        names = {pk: tuple(row) for pk, *row in fetch(("entity names",), Q(pk__any=list(ids)), _entity_rows)}  # type: ignore[misc]
    normalized = {pk: names[pk][1] for pk in ids if pk in names}
    # Names with the same distinctions share a code; only equal codes may pair.
    codes: dict[frozenset[str], int] = {}
    code = np.fromiter(
        (codes.setdefault(distinctions(normalized.get(pk, "")), len(codes)) for pk in ids), np.intp
    )
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = matrix / np.where(norms == 0, 1, norms)
    sims = matrix @ matrix.T
    near = np.triu(sims, 1) >= threshold
    near &= code[:, None] == code[None, :]
    out = []
    for a, b in zip(*np.nonzero(near), strict=True):
        out.append((ids[a], ids[b], float(sims[a, b])))
    return out


def rank(
    access: MemoryAccess, rq: RecallQuery, view: Any, *, hops: int, limit: int, max_visited: int = 400
) -> list[Ranked]:
    """The ``limit`` best facts for ``rq`` by relevance fused with graph score."""
    # The seeds are candidates, not what is returned: the returned facts are stamped
    # (last_recalled_at, idle retention) at the end, bridged ones included.
    hits = retrieve(
        access,
        replace(rq, top_k=max(SEED_POOL, rq.top_k), mode="hybrid", stamp=False, columns=SEED_COLUMNS),
    )
    if not hits:
        return []
    tenant_id = access.tenant_id
    # Inside the rank a fact is keyed by its id's integer (uuid.UUID hashes and compares
    # in Python, and the rank looked ids up some 15k times a call); ``uid`` gives the id
    # back for the reads and the answer.
    uid: dict[int, Any] = {h.item.pk.int: h.item.pk for h in hits}
    seeds = {h.item.pk.int: h for h in hits}
    reach: dict[int, _Reach] = {k: _Reach("seed", 0, k, []) for k in seeds}
    documents = tenant_stats(tenant_id, []).documents

    # Edges of the subgraph, filled while expanding.
    causal: list[tuple[int, int, float]] = []

    def reached(pk: Any, parent: int, kind: str, hop: int, **detail: Any) -> None:
        # The step is spelled out only for a fact reached first (most are met again).
        if (k := pk.int) not in reach and len(reach) < max_visited:
            origin = reach[parent]
            step = {"from_item": str(uid[parent]), "to_item": str(pk), "bridge": kind, **detail}
            reach[k] = _Reach(kind, hop, origin.seed, [*origin.path, step])
            uid[k] = pk

    # The session around the best matches: the turns of one conversation (one
    # incident's notes) tell one matter, whose cause is often told turns earlier.
    widths = [SESSION_WINDOW if n < SESSION_SEEDS else 1 for n in range(len(hits))]
    for a, b, _turns in _session_neighbours([h.item for h in hits], widths):
        reached(b, a.int, "session", 1)
    frontier = list(seeds)
    weights: dict[int, tuple[str, float]] = {}
    # Every entity met, read with the mentions or by the weights: the synonyms reuse them.
    names: Names = {}
    terms: list[tuple[int, int, float]] = []
    sources = [h.item for h in hits[:TERM_SOURCES]]
    # The mentions of every item read so far: the graph below needs them again.
    read_mentions: set[int] = set()
    known_mentions: list[tuple[int, int]] = []
    for hop in range(1, hops + 1):
        if not frontier or len(reach) >= max_visited:
            break
        before = set(reach)
        # The round's reads depend on none of each other: the term bridges (in two
        # halves) and the causal neighbours run beside the mentions (core.beside) when
        # they may. What the sources name as their causes is looked up as well: a
        # stated cause joins its effect as a causal neighbour, as a stored span link would.
        texts = term_sources(sources, _cause_spans(tenant_id, [item.pk for item in sources]))
        half = (len(texts) + 1) // 2
        side_terms = [Beside(_term_neighbours, view, tenant_id, texts[:half])]
        side_terms.append(Beside(_term_neighbours, view, tenant_id, texts[half:]))
        asked = [uid[k] for k in frontier]
        side_causal = Beside(_causal_neighbours, tenant_id, asked)
        mentions = [(i.int, e) for i, e in item_mentions_named(tenant_id, asked, names)]
        found_terms, named = [], []
        for side in side_terms:
            part_terms, part_named = side.result()
            found_terms += part_terms
            named += part_named
        terms += [(a.int, b.int, coverage) for a, b, coverage in found_terms]
        causal += [(a.int, b.int, score) for a, b, score in named]
        for a, b, coverage in sorted(found_terms, key=lambda t: -t[2]):
            reached(b, a.int, "terms", hop, weight=round(coverage, 3))
        for a, b, span_a, span_b, score in side_causal.result():
            causal.append((a.int, b.int, score))
            reached(b, a.int, "causal", hop, link={"from": span_a, "to": span_b})
        read_mentions.update(frontier)
        known_mentions += mentions
        new_entities = sorted({e for _, e in mentions} - set(weights))
        weights.update(entity_weights(tenant_id, new_entities, documents, names))
        source: dict[int, Any] = {}
        for item_id, entity_id in mentions:
            if entity_id in weights:
                source.setdefault(entity_id, item_id)
        # The most specific entities first: when room runs out, hubs-to-be lose.
        bridging = sorted(source, key=lambda e: -weights[e][1])
        for entity_id, item_id in _entity_neighbours(view, bridging, set()):
            name, weight = weights[entity_id]
            reached(item_id, source[entity_id], "entity", hop, entity=name, weight=round(weight, 3))
        frontier = [k for k in reach if k not in before]
        if hop == hops or not frontier or len(reach) >= max_visited:
            break  # no next round (at 100k facts the first fills the candidates)
        # The next round's term sources: the strongest term bridges just found.
        new = set(frontier)
        fresh = [b for a, b, _c in sorted(found_terms, key=lambda t: -t[2]) if b.int in new]
        rows_next = {i.pk: i for i in view.items_of(fresh, only=("id", "content"))}
        sources = [rows_next[pk] for pk in dict.fromkeys(fresh) if pk in rows_next][:TERM_SOURCES]

    # Rows (visibility holds for every one) with their similarity to the query.
    vector = "[" + ",".join(f"{x:.9g}" for x in embed_query(rq.query).tolist()) + "]"
    # What the graph needs of each candidate; whole rows (every field parsed into a
    # model) are read below for the returned ones only, not for a few hundred.
    side_rows = Beside(view.candidates, [uid[k] for k in reach], vector)
    # The mentions no round has read, beside the rows: those of a reached item the
    # view hides are read too, and left out below with the item.
    unread = item_mentions_named(tenant_id, [uid[k] for k in reach if k not in read_mentions], names)
    rows = {row.pk.int: row for row in side_rows.result()}
    ids = [k for k in reach if k in rows]
    index = {k: i for i, k in enumerate(ids)}
    # The mentions of the graph's facts, each with its fact's place.
    all_mentions: list[tuple[int, int]] = []
    mention_at: list[int] = []
    for mention in (*known_mentions, *((i.int, e) for i, e in unread)):
        if (at := index.get(mention[0])) is not None:
            all_mentions.append(mention)
            mention_at.append(at)
    fresh_entities = sorted({e for _, e in all_mentions} - set(weights))
    weights.update(entity_weights(tenant_id, fresh_entities, documents, names))
    entity_ids = sorted({e for _, e in all_mentions if e in weights})
    # The nodes: the facts, then the entities, then the sessions.
    entity_at = {e: len(ids) + place for place, e in enumerate(entity_ids)}
    # Sessions as nodes: the facts one conversation (or one incident's notes) holds
    # together, joined through one node so a long session does not make a clique.
    sessions: dict[tuple[str, Any, str], list[int]] = {}
    for k in ids:
        if (row := rows[k]).session_id:
            sessions.setdefault(("session", row.agent_id, row.session_id), []).append(k)
    sessions = {key: members for key, members in sessions.items() if len(members) > 1}
    session_at = {key: len(ids) + len(entity_at) + place for place, key in enumerate(sessions)}
    n = len(ids) + len(entity_at) + len(session_at)
    # The synonyms' vectors and the sessions' sizes are read beside the graph's build.
    side_synonyms = Beside(entity_synonyms, entity_ids, names)
    side_sizes = Beside(session_sizes, [(agent, session) for _kind, agent, session in sessions])

    rel = np.zeros(n)
    sim = np.zeros(n)
    lex = np.zeros(n)
    for i, pk in enumerate(ids):  # index[pk] == i
        hit = seeds.get(pk)
        sim[i] = float(rows[pk].similarity or 0.0)
        lex[i] = float(hit.signals.get("lexical", 0.0)) if hit else 0.0
        rel[i] = relevance(sim[i], lex[i])

    adjacency = np.zeros((n, n))
    # The mention rows are distinct (item, entity) pairs, so each cell gets one weight.
    cells = [(at, e) for at, (_i, e) in zip(mention_at, all_mentions, strict=True) if e in weights]
    if cells:
        at_item = np.fromiter((at for at, _e in cells), np.intp, len(cells))
        at_entity = np.fromiter((entity_at[e] for _at, e in cells), np.intp, len(cells))
        w_mention = np.fromiter((weights[e][1] for _at, e in cells), float, len(cells))
        np.add.at(adjacency, (at_item, at_entity), w_mention)
        np.add.at(adjacency, (at_entity, at_item), w_mention)
    entities_at: dict[int, set[int]] = {}
    for item_key, entity_id in all_mentions:
        if entity_id in weights:
            entities_at.setdefault(item_key, set()).add(entity_id)
    # The chain below asks by item id.
    entities_of = {uid[k]: entities for k, entities in entities_at.items()}
    synonym_entities: set[tuple[int, int]] = set()
    for a, b, sim_ab in side_synonyms.result():
        adjacency[entity_at[a], entity_at[b]] += sim_ab
        adjacency[entity_at[b], entity_at[a]] += sim_ab
        synonym_entities |= {(a, b), (b, a)}
    # Facts naming near-synonymous spans (asked pair by pair, as the shared entities).
    synonym_pairs = SynonymSpans(entities_of, synonym_entities)
    for a, b, score in causal:
        if a in index and b in index:
            adjacency[index[a], index[b]] += CAUSAL_WEIGHT * score
            adjacency[index[b], index[a]] += CAUSAL_WEIGHT * score
    for a, b, coverage in terms:
        if a in index and b in index:
            adjacency[index[a], index[b]] += TERM_WEIGHT * coverage
            adjacency[index[b], index[a]] += TERM_WEIGHT * coverage
    # A session node weighs like an entity: by its specificity across the tenant (a
    # handful of notes of one incident join more than a long conversation does).
    sizes = side_sizes.result()
    for key, members in sessions.items():
        w = SESSION_WEIGHT * session_weight(sizes.get(key[1:], len(members)), documents)
        for k in members:
            adjacency[index[k], session_at[key]] += w
            adjacency[session_at[key], index[k]] += w
    restart = _restart(rel, [index[k] for k in seeds if k in index])
    # What the other seeds say of a fact: the walk's mass at it minus the share that
    # started at the fact itself and came back (through its own entities, its session).
    graph_score = support(adjacency, restart)
    top = max(float(graph_score[: len(ids)].max()), 1e-12)

    ranked = []
    for i, pk in enumerate(ids):
        g = float(graph_score[i]) / top
        hit = seeds.get(pk)
        r = reach[pk]
        ranked.append(
            Ranked(
                item=rows[pk], score=float(rel[i]) + GRAPH_WEIGHT * g, relevance=float(rel[i]),
                similarity=float(sim[i]), lexical=float(lex[i]), graph=g, kind=r.kind, hop=r.hop,
                seed_id=uid[r.seed],
                path=r.path, vector_rank=hit.vector_rank if hit else None,
                keyword_rank=hit.keyword_rank if hit else None,
            )
        )  # fmt: skip
    ranked.sort(key=_order)
    # The graph orders what follows the best direct match, never demotes it.
    if not ranked:
        return []
    # The first of the most relevant, by position (not list.index: quadratic).
    at = max(range(len(ranked)), key=lambda i: (ranked[i].relevance, -i))
    best = ranked.pop(at)
    # Then the causes behind it, walked back one best cause at a time (the chain a
    # why-question asks for), through the best-ranked facts of the neighbourhood.
    pool = [best.item.pk, *(r.item.pk for r in ranked[:CHAIN_POOL])]
    joined = SharedEntity(entities_of)
    chain_pool = Pool(tenant_id, pool)
    asserted = asserted_links(tenant_id, pool, edges=chain_pool.all_edges)
    steps = walk_back(best.item.pk, chain_pool, asserted, Either(joined, synonym_pairs))
    by_pk = {r.item.pk: r for r in ranked}
    sessions = {pk: (r.item.agent_id, r.item.session_id) for pk, r in by_pk.items() if r.item.session_id}
    if best.item.session_id:
        sessions[best.item.pk] = (best.item.agent_id, best.item.session_id)
    # Each cause gains in proportion to the strength of its link. Unless a stored span
    # link asserts it, a cause may not overtake the best direct match left: a walk
    # through shared subjects and hub phrases can step into a similar story told
    # elsewhere, and a fixed bonus then lifted its facts above good direct matches.
    ceiling = ranked[0].score if ranked else 0.0
    for position, ((pk, link), (effect, _next)) in enumerate(reversed(list(pairwise(steps))), start=1):
        found = by_pk[pk]
        basis = link_basis(pk, effect, asserted, joined, synonym_pairs, sessions)
        found.chain = {"position": position, "link": round(link, 4), "basis": basis}
        bonus = CHAIN_BONUS * min(link, 1.0)
        if basis != "asserted":
            bonus = max(0.0, min(bonus, ceiling - found.score - 1e-6))
        found.score += bonus
    ranked.sort(key=_order)
    out = [best, *ranked][:limit]
    # The returned facts are stamped (idle retention) while their rows are read.
    stamp = Beside(stamp_recalled, [r.item.pk for r in out]) if rq.stamp else None
    # The parse summaries are read by the chain pool, not from these rows.
    full = {
        item.pk: item
        for item in view.items_of(
            [r.item.pk for r in out], defer=("embedding", "search_vector", "clauses"), similar_to=vector
        )
    }
    if stamp is not None:
        stamp.result()
    # A fact deleted since it was ranked (a moment ago) is left out.
    return [replace(r, item=full[r.item.pk]) for r in out if r.item.pk in full]


def _order(r: Ranked) -> tuple[float, float, str]:
    # Scores equal to 1e-9 are a tie (facts of one wording; the solver's last bits must
    # not order them): relevance, then the id decide.
    return (-round(r.score, 9), -r.relevance, str(r.item.pk))


class SharedEntity(Container[tuple[Any, Any]]):
    """The pairs of distinct facts that mention one bridging entity, asked pair by pair.
    Spelled out, the set is quadratic in the facts an entity reaches (a specific entity
    of a few hundred candidates made ~100 ms of set building per rank); the walk and
    the chain bonus only ever ask whether one pair is in it."""

    def __init__(self, entities_of: dict[Any, set[int]]) -> None:
        self.entities_of = entities_of

    def __contains__(self, pair: object) -> bool:
        x, y = pair  # type: ignore[misc]
        if x == y:
            return False
        mine, theirs = self.entities_of.get(x), self.entities_of.get(y)
        return bool(mine and theirs) and not mine.isdisjoint(theirs)  # type: ignore[union-attr]


class SynonymSpans(Container[tuple[Any, Any]]):
    """The pairs of distinct facts of which one mentions an entity and the other a
    near-synonym of it, asked pair by pair (spelled out, quadratic as SharedEntity)."""

    def __init__(self, entities_of: dict[Any, set[int]], synonyms: set[tuple[int, int]]) -> None:
        self.entities_of = entities_of
        self.synonyms = synonyms  # both directions

    def __contains__(self, pair: object) -> bool:
        x, y = pair  # type: ignore[misc]
        if x == y or not self.synonyms:
            return False
        theirs = self.entities_of.get(y, set())
        return any((a, b) in self.synonyms for a in self.entities_of.get(x, ()) for b in theirs)


class Either(Container[tuple[Any, Any]]):
    """A pair in one container or the other (their union, without building it)."""

    def __init__(self, *parts: Container[tuple[Any, Any]]) -> None:
        self.parts = parts

    def __contains__(self, pair: object) -> bool:
        return any(pair in part for part in self.parts)


def link_basis(
    cause: Any,
    effect: Any,
    asserted: dict[tuple[Any, Any], Any],
    joined: Container[tuple[Any, Any]],
    synonyms: Container[tuple[Any, Any]],
    sessions: dict[Any, Any],
) -> str:
    """What joins a chain step: a stored span link, a specific entity or synonym span,
    one session, or only shared word stems."""
    if (cause, effect) in asserted:
        return "asserted"
    if (cause, effect) in joined or (cause, effect) in synonyms:
        return "entity"
    if cause in sessions and sessions[cause] == sessions.get(effect):
        return "session"
    return "words"


def _restart(rel: np.ndarray, seed_rows: list[int]) -> np.ndarray:
    p = np.zeros(len(rel))
    if not seed_rows:
        return p
    values = rel[seed_rows]
    mass = np.exp((values - values.max()) / TEMPERATURE)
    p[seed_rows] = mass / mass.sum()
    return p


def support(adjacency: np.ndarray, restart: np.ndarray) -> np.ndarray:
    """Per node, the personalized-PageRank mass it receives from every restart node but
    itself: ``pi - restart * diag(M)`` with ``pi = restart @ M`` and ``M = (1 - d)(I - d
    P)^-1`` solved exactly (the subgraph is a few hundred nodes). A seed's own
    relevance flowing back to it through its entities is no evidence for it; the
    mass that comes from *other* relevant facts is. A node without edges keeps its
    mass (nothing flows out of it) and gets no support."""
    n = len(restart)
    if n == 0:
        return np.zeros(0)
    out_weight = adjacency.sum(axis=1)
    # Only pi and diag(M) at the restart nodes are needed: one solve of A^T against
    # restart and the restart nodes' unit vectors (row s of A^-1 is column s of A^-T),
    # not the full inverse (an order of magnitude slower at a few hundred nodes).
    seeds = np.flatnonzero(restart)
    rhs = np.zeros((n, len(seeds) + 1))
    rhs[:, 0] = restart
    rhs[seeds, np.arange(1, len(seeds) + 1)] = 1.0
    solved = rhs.copy()  # a node without edges in or out: its row of A^T is the unit row
    # A pendant node (one neighbour j, no restart) is eliminated from the solve exactly:
    # its unknown is d * P[j, l] * x_j, and its walk back to j only adds d^2 * P[j, l]
    # to j's own term. About half the nodes of a rank's subgraph are such entities and
    # facts, and the solve's cost grows with the cube of what is left.
    edges = adjacency > 0
    linked = edges.any(axis=1) | edges.any(axis=0)
    anchor = np.argmax(edges, axis=1)
    pendant = (
        (edges.sum(axis=1) == 1) & (edges.sum(axis=0) == 1) & (np.argmax(edges, axis=0) == anchor)
        & (restart == 0) & (np.diagonal(adjacency) == 0)
    )  # fmt: skip
    pendant &= ~pendant[anchor]  # two pendants joined only to each other stay in
    kept = np.flatnonzero(linked & ~pendant)
    if len(kept):
        sub = adjacency[np.ix_(kept, kept)]
        weight = out_weight[kept, None]
        transition = np.divide(sub, weight, out=np.zeros_like(sub), where=weight > 0)
        system = np.eye(len(kept)) - DAMPING * transition.T
        position = np.full(n, -1)
        position[kept] = np.arange(len(kept))
        leaves = np.flatnonzero(pendant)
        to_leaf = adjacency[anchor[leaves], leaves] / out_weight[anchor[leaves]]
        np.add.at(system, (position[anchor[leaves]], position[anchor[leaves]]), -(DAMPING**2) * to_leaf)
        solved[kept] = np.linalg.solve(system, rhs[kept])
        solved[leaves] = DAMPING * to_leaf[:, None] * solved[anchor[leaves]]
    own = np.zeros(n)
    own[seeds] = solved[seeds, np.arange(1, len(seeds) + 1)]
    return np.maximum((1 - DAMPING) * (solved[:, 0] - restart * own), 0.0)


def personalized_pagerank(adjacency: np.ndarray, restart: np.ndarray) -> np.ndarray:
    """Stationary visit probabilities of a walk that follows weighted edges and jumps
    back to ``restart`` with probability 1 - DAMPING (dangling nodes jump back too)."""
    out_weight = adjacency.sum(axis=1)
    transition = np.divide(
        adjacency, out_weight[:, None], out=np.zeros_like(adjacency), where=out_weight[:, None] > 0
    )
    dangling = out_weight == 0
    scores = restart.copy()
    for _ in range(ITERATIONS):
        leaked = scores[dangling].sum()
        scores = (1 - DAMPING) * restart + DAMPING * (scores @ transition + leaked * restart)
    return scores
