"""Graph path: extraction throughput, and discover / trace latency at 10k and 100k facts.

    .venv/bin/python bench/graph.py                          # 10,000 and 100,000 facts
    .venv/bin/python bench/graph.py --sizes 10000 --queries 50
    .venv/bin/python bench/graph.py --sizes 10000 --queries 20 --sample 0 --stages

Runs in a database of its own (FEDMEM_DB_NAME, default ``fedmem_bench_graph``).

1. Extraction: ``--sample`` generated facts (default 300) are written through the
   real write service and extracted by the real extraction service (spaCy parse,
   entities, causal rules, span embeddings, span linking through the HNSW and GIN
   indexes), in this process as the worker would; printed in facts/s next to bare
   embedding throughput of the same texts in the same run.
2. Latency: for each size, a tenant holding that many facts of incident chains
   (cause -> service symptom -> business impact -> escalation, three facts per
   incident, each in its own session, same wording as step 1) is loaded **in
   bulk**: items, entities, mentions, causal edges and span links are inserted
   directly. Embeddings are real, computed once per distinct wording with the
   incident number left out (so facts of different incidents with the same wording
   share a vector). Span terms and the chain walk's parse summaries are the real
   ones. Span links are chosen by the linker's own rule
   (``memory.extraction.links.span_match``: term overlap or cosine) among edges of
   matching wording, best ``FANOUT`` per edge and direction, as the linker stores
   them; the rule is applied here in Python instead of one index query per edge
   (100k facts would take hours through the write path).
   Then ``--queries`` discover and trace calls run through the real service layer
   (visibility SQL, hybrid seed recall with query embedding, stored-link traversal)
   and their p50/p95 are printed.

Not a test: it asserts nothing, it measures.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")
os.environ.setdefault("FEDMEM_DB_NAME", "fedmem_bench_graph")
os.environ.setdefault("FEDMEM_LOG_LEVEL", "WARNING")

from bench.recall import CAUSES, SERVICES, SYMPTOMS, machine, percentile  # noqa: E402

HNSW = [
    ("memory_item_embedding_hnsw", "memory_item", "embedding"),
    ("memory_edge_cause_hnsw", "memory_causal_edge", "cause_embedding"),
    ("memory_edge_effect_hnsw", "memory_causal_edge", "effect_embedding"),
]
IMPACTS = ["failed checkouts", "angry support tickets", "lost revenue", "a missed SLA", "paged engineers"]


@dataclass(frozen=True)
class Span:
    """A span's wording without its incident number, and the number (or None)."""

    wording: str
    number: int | None

    @property
    def text(self) -> str:
        return self.wording if self.number is None else f"{self.wording} {self.number}"


@dataclass(frozen=True)
class Fact:
    session: str
    text: str
    wording: str  # the text without the incident number (what its embedding is of)
    cause: Span
    effect: Span
    cue: str
    entities: tuple[str, ...]


def generate(count: int, seed: int) -> list[Fact]:
    """Three facts per incident: cause -> symptom, symptom -> impact, impact -> escalation."""
    rng = random.Random(seed)
    out: list[Fact] = []
    n = 0
    while len(out) < count:
        cause, service = rng.choice(CAUSES), rng.choice(SERVICES)
        symptom, impact = rng.choice(SYMPTOMS), rng.choice(IMPACTS)
        event = Span(f"the {service} service {symptom} in incident", n)
        hurt = Span(f"{impact.capitalize()} in incident", n)
        out.append(
            Fact(
                f"s{n}a", f"{cause.capitalize()} led to {event.text}.",
                f"{cause.capitalize()} led to {event.wording}.", Span(cause.capitalize(), None), event,
                "led to", (cause, f"{service} service", f"incident {n}"),
            )
        )  # fmt: skip
        out.append(
            Fact(
                f"s{n}b", f"{hurt.text} happened because of {event.text}.",
                f"{hurt.wording} happened because of {event.wording}.", event,
                Span(f"{hurt.wording}", n), "because of", (impact, f"{service} service", f"incident {n}"),
            )
        )  # fmt: skip
        out.append(
            Fact(
                f"s{n}c", f"{hurt.text} caused an escalation to management.",
                f"{hurt.wording} caused an escalation to management.", hurt,
                Span("an escalation to management", None), "caused", (impact, "management", f"incident {n}"),
            )
        )  # fmt: skip
        n += 1
    return out[:count]


def extraction_throughput(access, facts: list[Fact]) -> None:  # type: ignore[no-untyped-def]
    from memory.embeddings import embed_texts
    from memory.extraction.pipeline import extract_item
    from memory.models import CausalEdge, MemoryItem, SpanLink
    from memory.services.items import MemoryDraft, memory_remember_batch

    MemoryItem.objects.filter(tenant_id=access.tenant_id).delete()
    for start in range(0, len(facts), 100):
        drafts = [
            MemoryDraft(content=f.text, scope="agent", session_id=f.session)
            for f in facts[start : start + 100]
        ]
        memory_remember_batch(access=access, drafts=drafts)
    ids = list(MemoryItem.objects.filter(tenant_id=access.tenant_id).values_list("pk", flat=True))
    began = time.perf_counter()
    for pk in ids:
        extract_item(pk)
    extraction = len(ids) / (time.perf_counter() - began)
    texts = [f.text for f in facts]
    began = time.perf_counter()
    embed_texts(texts)
    bare = len(texts) / (time.perf_counter() - began)
    edges = CausalEdge.objects.filter(tenant_id=access.tenant_id).count()
    links = SpanLink.objects.filter(tenant_id=access.tenant_id).count()
    print(
        f"extraction (real write + extraction path, {len(ids)} facts): {extraction:.1f} facts/s; "
        f"bare embedding: {bare:.1f} texts/s (ratio {extraction / bare:.3f}); "
        f"{edges} edges, {links} span links stored"
    )


def choose_links(facts: list[Fact], vectors: dict, span_terms_of) -> dict[tuple[int, int], float]:  # type: ignore[no-untyped-def]
    """Span links by the linker's rule (``span_match``), best FANOUT per edge and
    direction, as (source fact, target fact) -> score; computed per pair of
    wordings instead of one index query per edge."""
    from memory.extraction.links import FANOUT, span_match

    # Span links by the linker's rule (span_match), best FANOUT per edge and
    # direction. Spans of one wording differ only by the incident number, so the
    # rule is evaluated once per pair of wordings (same number, different number).
    groups: dict[str, dict[str, list[int]]] = {"cause": defaultdict(list), "effect": defaultdict(list)}
    numbered: dict[tuple[str, str, int | None], list[int]] = defaultdict(list)
    for i, f in enumerate(facts):
        for side in ("cause", "effect"):
            span = getattr(f, side)
            groups[side][span.wording].append(i)
            numbered[(side, span.wording, span.number)].append(i)

    def rule(a: Span, b: Span, same: bool) -> float | None:
        na = None if a.number is None else 1
        nb = None if b.number is None else (1 if same else 2)
        match = span_match(span_terms_of(Span(a.wording, na)), vectors[a.wording],
                           span_terms_of(Span(b.wording, nb)), vectors[b.wording])  # fmt: skip
        return None if match is None else match.score

    # Which wordings of the other side can match a wording at all (same or
    # another incident number), computed once per pair of wordings.
    matching: dict[tuple[str, str], list[tuple[str, float | None, float | None]]] = {}

    def candidates(span: Span, side: str) -> list[tuple[str, float | None, float | None]]:
        key = (span.wording, side)
        if key not in matching:
            found = []
            for wording, members in groups[side].items():
                probe = getattr(facts[members[0]], side)
                same, other = rule(span, probe, True), rule(span, probe, False)
                if same is not None or other is not None:
                    found.append((wording, same, other))
            matching[key] = found
        return matching[key]

    def best(span: Span, side: str, me: int) -> list[tuple[int, float]]:
        found: list[tuple[float, int]] = []
        for wording, same, other in candidates(span, side):
            twins = numbered.get((side, wording, span.number), []) if span.number is not None else []
            if same is not None:
                found.extend((-same, i) for i in twins if i != me)
            if other is not None:
                twin_set = set(twins)
                members = groups[side][wording]
                picked = [i for i in members[: FANOUT + len(twins) + 1] if i != me and i not in twin_set]
                found.extend((-other, i) for i in picked[:FANOUT])
        found.sort()
        return [(i, -score) for score, i in found[:FANOUT]]

    links: dict[tuple[int, int], float] = {}
    for i, f in enumerate(facts):
        for j, score in best(f.effect, "cause", i):
            links.setdefault((i, j), score)
        for j, score in best(f.cause, "effect", i):
            links.setdefault((j, i), score)
    return links


def bulk_load(tenant, agent, facts: list[Fact]) -> None:  # type: ignore[no-untyped-def]
    from django.db import connection, transaction

    from memory.embeddings import embed_texts
    from memory.extraction.clauses import summaries
    from memory.extraction.pipeline import span_terms
    from memory.models import CausalEdge, Entity, MemoryItem, Mention

    began = time.perf_counter()
    wordings = sorted({f.wording for f in facts})
    span_wordings = sorted({s.wording for f in facts for s in (f.cause, f.effect)})
    names = sorted({e for f in facts for e in f.entities})
    vectors = dict(zip(wordings + span_wordings, embed_texts(wordings + span_wordings), strict=True))
    name_vectors = dict(zip(names, embed_texts(names), strict=True)) if len(names) < 5000 else {}
    terms = dict(zip(span_wordings, span_terms(span_wordings), strict=True))
    took = time.perf_counter() - began
    print(f"  embedded {len(wordings) + len(span_wordings)} distinct wordings in {took:.0f} s")
    began = time.perf_counter()
    texts = sorted({f.text for f in facts})
    # What the write stores for the chain walk (memory.extraction.clauses), from the real parse.
    clauses = dict(zip(texts, summaries(texts), strict=True))
    print(f"  parsed {len(texts)} texts for their clause summaries in {time.perf_counter() - began:.0f} s")

    def span_terms_of(span: Span) -> list[str]:
        base = terms[span.wording]
        return sorted({*base, str(span.number)}) if span.number is not None else base

    with connection.cursor() as cursor:
        # Built once after the load instead of row by row (the same definitions).
        for name, _table, _column in HNSW:
            cursor.execute(f"DROP INDEX IF EXISTS {name}")
    with transaction.atomic():
        MemoryItem.objects.filter(tenant=tenant).delete()
        Entity.objects.filter(tenant=tenant).delete()
        items = [
            MemoryItem(
                tenant=tenant, agent=agent, session_id=f.session, scope="agent", scopes=["agent"],
                content=f.text, content_hash=hashlib.sha256(f.text.encode()).hexdigest(),
                embedding=vectors[f.wording], extraction_status="done", provenance={"via": "bench"},
                clauses=clauses[f.text],
            )
            for f in facts
        ]  # fmt: skip
        MemoryItem.objects.bulk_create(items, batch_size=2000)
        fallback = next(iter(vectors.values()))
        entities = Entity.objects.bulk_create(
            [
                Entity(
                    tenant=tenant,
                    name=name,
                    normalized=name.lower(),
                    embedding=name_vectors.get(name, fallback),
                )
                for name in names
            ],
            batch_size=5000,
        )
        by_name = {e.name: e.pk for e in entities}
        Mention.objects.bulk_create(
            [
                Mention(tenant=tenant, item=item, entity_id=by_name[name], text=name, start=0, end=len(name))
                for item, f in zip(items, facts, strict=True)
                for name in f.entities
            ],
            batch_size=5000,
        )
        edges = CausalEdge.objects.bulk_create(
            [
                CausalEdge(
                    tenant=tenant, item=item, cause=f.cause.text, effect=f.effect.text, cue=f.cue,
                    cause_terms=span_terms_of(f.cause), effect_terms=span_terms_of(f.effect),
                    cause_embedding=vectors[f.cause.wording], effect_embedding=vectors[f.effect.wording],
                )
                for item, f in zip(items, facts, strict=True)
            ],
            batch_size=2000,
        )  # fmt: skip
        links = choose_links(facts, vectors, span_terms_of)
        rows = [(edges[i].pk, edges[j].pk, score) for (i, j), score in links.items()]
        with connection.cursor() as cursor:
            for start in range(0, len(rows), 50_000):
                chunk = rows[start : start + 50_000]
                cursor.execute(
                    """
                    INSERT INTO memory_span_link (tenant_id, source_id, target_id, method, score)
                    SELECT %s, s, t, CASE WHEN sc >= 0.5 THEN 'terms' ELSE 'vector' END, sc
                    FROM unnest(%s::bigint[], %s::bigint[], %s::float8[]) AS u(s, t, sc)
                    """,
                    [tenant.pk, [r[0] for r in chunk], [r[1] for r in chunk], [r[2] for r in chunk]],
                )
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
        for name, table, column in HNSW:
            cursor.execute(
                f"CREATE INDEX {name} ON {table} USING hnsw ({column} vector_cosine_ops) "
                "WITH (m = 16, ef_construction = 64)"
            )
        cursor.execute("ANALYZE memory_item; ANALYZE memory_causal_edge; ANALYZE memory_span_link; "
                       "ANALYZE memory_mention; ANALYZE memory_entity")  # fmt: skip
    print(
        f"  bulk-loaded {len(items):,} facts, {len(edges):,} edges, {len(rows):,} span links, "
        f"{len(entities):,} entities in {time.perf_counter() - began:.0f} s"
    )


def measure(access, size: int, queries: int, stages: bool = False) -> None:  # type: ignore[no-untyped-def]
    from memory.enforcement import Keys, read_scopes, visible_q
    from memory.models import MemoryItem
    from memory.reasoning import graph
    from memory.retrieval.hybrid import RecallQuery

    view = graph.View(access, visible_q(access, read_scopes(access, None)))
    ids = list(MemoryItem.objects.filter(tenant_id=access.tenant_id).values_list("pk", flat=True)[:5000])
    rng = random.Random(3)
    from memory.retrieval import graphrank

    timings: dict[str, list[float]] = {
        "discover": [], "discover (graph-aware rank)": [], "trace (from text)": [], "trace (from item)": [],
    }  # fmt: skip
    for _ in range(queries):
        n = rng.randrange(max(1, size // 3))
        query = RecallQuery(query=f"what happened in incident {n}", scopes=("agent",), keys=Keys(), top_k=5)
        began = time.perf_counter()
        graph.discover(access, query, view, hops=2, max_results=20, max_visited=200)
        timings["discover"].append((time.perf_counter() - began) * 1000)
        # What POST discover and recall mode graph run (memory.operations.graph.discover).
        began = time.perf_counter()
        graphrank.rank(access, query, view, hops=2, limit=20, max_visited=200)
        timings["discover (graph-aware rank)"].append((time.perf_counter() - began) * 1000)
        began = time.perf_counter()
        graph.trace(view, direction="effects", content=rng.choice(CAUSES), max_depth=5, max_visited=100)
        timings["trace (from text)"].append((time.perf_counter() - began) * 1000)
        began = time.perf_counter()
        graph.trace(view, direction="causes", item_id=rng.choice(ids), max_depth=5, max_visited=100)
        timings["trace (from item)"].append((time.perf_counter() - began) * 1000)
    for name, values in timings.items():
        print(
            f"{name} at {size:,} facts: p50 {percentile(values, 0.5):.1f} ms, "
            f"p95 {percentile(values, 0.95):.1f} ms ({len(values)} calls)"
        )
    if stages:
        rank_stages(access, view, size, queries)


# The steps of the graph-aware rank that --stages times (names graphrank calls).
STAGES = [
    "retrieve", "_session_neighbours", "_term_neighbours", "_cause_spans", "_causal_neighbours",
    "item_mentions_named", "entity_weights", "_entity_neighbours", "entity_synonyms", "session_sizes",
    "support", "asserted_links", "Pool", "walk_back",
]  # fmt: skip


def rank_stages(access, view, size: int, queries: int) -> None:  # type: ignore[no-untyped-def]
    """Where the graph-aware rank's time goes: each step's mean wall time per call."""
    from memory.enforcement import Keys
    from memory.retrieval import graphrank
    from memory.retrieval.hybrid import RecallQuery

    spent: dict[str, float] = defaultdict(float)

    def timed(name: str, f):  # type: ignore[no-untyped-def]
        def call(*args, **kwargs):  # type: ignore[no-untyped-def]
            began = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - began

        return call

    originals = {name: getattr(graphrank, name) for name in STAGES}
    rng = random.Random(5)
    try:
        for name, f in originals.items():
            setattr(graphrank, name, timed(name, f))
        began = time.perf_counter()
        for _ in range(queries):
            n = rng.randrange(max(1, size // 3))
            query = RecallQuery(
                query=f"what happened in incident {n}", scopes=("agent",), keys=Keys(), top_k=5
            )
            graphrank.rank(access, query, view, hops=2, limit=20, max_visited=200)
        total = (time.perf_counter() - began) * 1000 / queries
    finally:
        for name, f in originals.items():
            setattr(graphrank, name, f)
    print(f"graph-aware rank by step at {size:,} facts ({queries} calls, mean per call {total:.1f} ms):")
    for name, seconds in sorted(spent.items(), key=lambda kv: -kv[1]):
        print(f"  {name}: {seconds * 1000 / queries:.1f} ms")
    rest = total - sum(spent.values()) * 1000 / queries
    print(f"  the rest (graph building, fusion, chain bonus): {rest:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", default="10000,100000", help="fact counts to measure (default 10000,100000)"
    )
    parser.add_argument("--sample", type=int, default=300, help="facts for the extraction throughput (300)")
    parser.add_argument("--queries", type=int, default=100, help="discover and trace calls per size (100)")
    parser.add_argument(
        "--stages", action="store_true", help="then time the graph-aware rank step by step (as many calls)"
    )
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    from governance.models import Agent, User
    from governance.services.agents import agent_create
    from governance.services.tenancy import tenant_get_or_create
    from memory.embeddings import get_embedder
    from memory.enforcement import system_access
    from memory.extraction.nlp import get_nlp
    from memory.models import MemoryItem

    call_command("migrate", verbosity=0)
    info = machine()
    print(f"machine: {info['cores']} cores, {info['ram']} RAM, {info['cpu']}, load {info['load']}")
    get_embedder()
    get_nlp()
    # As a serving process after its warm-up (providers.apps.start_warmup): what is
    # loaded by now is frozen, so full collections do not walk it during the calls.
    import gc

    gc.freeze()
    owner, _ = User.objects.get_or_create(username="bench-graph-owner")

    def agent_in(slug: str):  # type: ignore[no-untyped-def]
        tenant = tenant_get_or_create(slug=slug, name=slug)
        agent = Agent.objects.filter(tenant=tenant, name="graph-agent").first() or agent_create(
            tenant=tenant, name="graph-agent", created_by=owner
        )
        return tenant, agent

    if args.sample:
        _, agent = agent_in("bench-graph-extract")
        extraction_throughput(system_access(agent), generate(args.sample, seed=11))
    print(
        "latency data: synthetic incident chains bulk-loaded per size (real embeddings per wording, real "
        "span terms, span links chosen by the linker's rule); discover and trace run through the real "
        "service layer (see the module docstring)"
    )
    for size in (int(s) for s in args.sizes.split(",") if s):
        tenant, agent = agent_in(f"bench-graph-{size}")
        if MemoryItem.objects.filter(tenant=tenant).count() != size:
            bulk_load(tenant, agent, generate(size, seed=7))
        else:
            print(f"  {size:,} facts already loaded")
        measure(system_access(agent), size, args.queries, args.stages)


if __name__ == "__main__":
    main()
