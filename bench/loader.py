"""Bulk loader for the large benchmarks: N facts in minutes, with real embeddings.

Facts are the incident chains of ``bench/graph.py`` (cause -> symptom -> impact ->
escalation, three facts per incident, each in its own session). Every fact's text
is embedded on its own with the configured runtime, in batches, and the vectors
are kept under ``var/bench/`` (keyed by the texts and the model), so a rerun
loads in a fraction of the time. Span embeddings are real, one per wording (a
span differs from its twins only by the incident number); span terms are the real
ones; span links are chosen by the linker's own rule (``bench.graph.choose_links``).

Rows go in with ``COPY`` (items, entities, mentions, causal edges, span links),
with every column the model declares, through the fields' own database
conversion, so a new column with a default needs no change here. The HNSW
indexes are dropped before and built once after, then every table is analysed.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "var" / "bench"
EMBED_BATCH = 256


# Raised whenever the rows the loader writes change: data loaded by an older version is
# loaded again, not measured as if it were the current one (3: pages filled to the item
# table's fillfactor, memory migration 0015; 4: each item's parse summary, which the
# write stores and the chain walk reads: without it every ranked call parsed up to 50
# facts with spaCy, which no written fact costs; 5: each item's text language, which
# the write detects: COPY bypasses save(), so every fact was analysed as `simple`,
# without stemming or stopwords, and "the" and "in" were BM25 terms of every fact).
VERSION = 5
PARSE_BATCH = 1000


def copy_rows(model: Any, objs: list[Any]) -> None:
    """``COPY`` ``objs`` into ``model``'s table: every concrete, non-generated
    column, converted as ``save()`` would convert it. Primary keys must be set."""
    from django.db import connection

    fields = [f for f in model._meta.concrete_fields if not getattr(f, "generated", False)]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for obj in objs:
            copy.write_row([f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields])


def reserve_ids(model: Any, count: int) -> list[int]:
    """``count`` values of the table's identity sequence, so COPY rows can carry
    their keys (and rows referring to them can be written in the same pass)."""
    from django.db import connection

    if not count:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
            [model._meta.db_table, model._meta.pk.column, count],
        )
        return [row[0] for row in cursor.fetchall()]


def embed_cached(texts: list[str], label: str) -> tuple[np.ndarray, float, bool]:
    """Embeddings of ``texts`` (configured runtime, batches of EMBED_BATCH), from the
    cache when the same texts were embedded by the same model before. Returns the
    vectors, the seconds spent embedding (0 on a cache hit) and whether it hit."""
    from django.conf import settings

    from memory.embedding_export import fingerprint
    from memory.embeddings import configured_model_path, embed_texts

    model_dir = configured_model_path()
    digest = hashlib.sha256(
        "\x1f".join([fingerprint(model_dir), settings.FEDMEM_EMBEDDING_RUNTIME, *texts]).encode()
    ).hexdigest()[:16]
    path = CACHE / f"{label}-{len(texts)}-{digest}.npy"
    if path.exists():
        return np.load(path), 0.0, True
    began = time.perf_counter()
    parts = [embed_texts(texts[i : i + EMBED_BATCH]) for i in range(0, len(texts), EMBED_BATCH)]
    vectors = np.concatenate(parts) if parts else np.zeros((0, 384), dtype=np.float32)
    took = time.perf_counter() - began
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors, took, False


def summaries_cached(texts: list[str]) -> tuple[list[Any], float]:
    """The parse summary of each text as the write stores it
    (:func:`memory.extraction.clauses.summaries`, from the real spaCy parse), from the
    cache when the same texts were parsed by the same model and summary version.
    Returns the summaries and the seconds spent parsing (0 on a cache hit)."""
    import json

    import spacy
    from django.conf import settings

    from memory.extraction import clauses

    digest = hashlib.sha256(
        "\x1f".join(
            [settings.FEDMEM_PII_SPACY_MODEL, spacy.__version__, str(clauses.VERSION), *texts]
        ).encode()
    ).hexdigest()[:16]
    path = CACHE / f"clauses-{len(texts)}-{digest}.json"
    if path.exists():
        return json.loads(path.read_text()), 0.0
    began = time.perf_counter()
    out: list[Any] = []
    for i in range(0, len(texts), PARSE_BATCH):
        out += clauses.summaries(texts[i : i + PARSE_BATCH])
    took = time.perf_counter() - began
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out))
    return out, took


def build_indexes() -> None:
    """The HNSW indexes (the migrations' definitions), where missing, and fresh
    statistics. Idempotent: a load interrupted between dropping and building them
    is repaired by the next run."""
    from django.db import connection

    from bench.graph import HNSW

    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '512MB'")
        for name, table, column in HNSW:
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {name} ON {table} USING hnsw ({column} vector_cosine_ops) "
                "WITH (m = 16, ef_construction = 64)"
            )
        for table in (
            "memory_item",
            "memory_causal_edge",
            "memory_span_link",
            "memory_mention",
            "memory_entity",
        ):
            cursor.execute(f"ANALYZE {table}")


def load(tenant: Any, agent: Any, facts: list[Any]) -> dict[str, float]:
    """Replace ``tenant``'s memory with ``facts``; returns what the load cost."""
    from django.db import connection, transaction

    from bench.graph import HNSW, Span, choose_links
    from memory.extraction.pipeline import span_terms
    from memory.models import CausalEdge, Entity, MemoryItem, Mention, SpanLink
    from memory.retrieval.language import detect
    from memory.text import sentence_spans

    # Every bench fact is one sentence, so, as through the write path, no item has
    # sentence vectors (memory.models.ItemSentence); a generator that wrote longer
    # facts would need them loaded too.
    if any(len(sentence_spans(f.text)) > 1 for f in facts):
        raise ValueError("the loader writes no sentence vectors: every fact must be one sentence")
    began = time.perf_counter()
    item_vectors, item_seconds, hit = embed_cached([f.text for f in facts], "items")
    span_wordings = sorted({s.wording for f in facts for s in (f.cause, f.effect)})
    names = sorted({e for f in facts for e in f.entities})
    # Every entity name is embedded as the write path embeds it: a vector shared by all
    # "incident N" names made each pair of them synonyms (cosine 1) and every ranked
    # neighbourhood one dense clique, which the product never builds.
    small, small_seconds, _ = embed_cached(span_wordings + names, "spans")
    vectors = dict(zip(span_wordings + names, small, strict=True))
    terms = dict(zip(span_wordings, span_terms(span_wordings), strict=True))
    summaries, parse_seconds = summaries_cached([f.text for f in facts])
    embedded = time.perf_counter() - began

    def span_terms_of(span: Span) -> list[str]:
        base = terms[span.wording]
        return sorted({*base, str(span.number)}) if span.number is not None else base

    links = choose_links(facts, vectors, span_terms_of)
    with connection.cursor() as cursor:
        for name, _table, _column in HNSW:
            cursor.execute(f"DROP INDEX IF EXISTS {name}")
    copy_began = time.perf_counter()
    with transaction.atomic():
        MemoryItem.objects.filter(tenant=tenant).delete()
        Entity.objects.filter(tenant=tenant).delete()
        items = [
            MemoryItem(
                tenant=tenant, agent=agent, session_id=f.session, scope="agent", scopes=["agent"],
                content=f.text, content_hash=hashlib.sha256(f.text.encode()).hexdigest(),
                embedding=item_vectors[i], extraction_status="done", clauses=summaries[i],
                text_language=detect(f.text),
                provenance={"via": "bench", "loader": VERSION},
            )
            for i, f in enumerate(facts)
        ]  # fmt: skip
        copy_rows(MemoryItem, items)
        entity_ids = dict(zip(names, reserve_ids(Entity, len(names)), strict=True))
        copy_rows(
            Entity,
            [
                Entity(
                    pk=entity_ids[name],
                    tenant=tenant,
                    name=name,
                    normalized=name.lower(),
                    embedding=vectors[name],
                )
                for name in names
            ],
        )
        mentions = [(item, name) for item, f in zip(items, facts, strict=True) for name in f.entities]
        copy_rows(
            Mention,
            [
                Mention(pk=pk, tenant=tenant, item=item, entity_id=entity_ids[name], text=name, start=0,
                        end=len(name))
                for pk, (item, name) in zip(reserve_ids(Mention, len(mentions)), mentions, strict=True)
            ],
        )  # fmt: skip
        edge_ids = reserve_ids(CausalEdge, len(facts))
        copy_rows(
            CausalEdge,
            [
                CausalEdge(
                    pk=edge_ids[i], tenant=tenant, item=item, cause=f.cause.text, effect=f.effect.text,
                    cue=f.cue, cause_terms=span_terms_of(f.cause), effect_terms=span_terms_of(f.effect),
                    cause_embedding=vectors[f.cause.wording], effect_embedding=vectors[f.effect.wording],
                )
                for i, (item, f) in enumerate(zip(items, facts, strict=True))
            ],
        )  # fmt: skip
        pairs = list(links.items())
        copy_rows(
            SpanLink,
            [
                SpanLink(
                    pk=pk, tenant=tenant, source_id=edge_ids[i], target_id=edge_ids[j],
                    method=SpanLink.Method.TERMS if score >= 0.5 else SpanLink.Method.VECTOR, score=score,
                )
                for pk, ((i, j), score) in zip(reserve_ids(SpanLink, len(pairs)), pairs, strict=True)
            ],
        )  # fmt: skip
    copied = time.perf_counter() - copy_began
    index_began = time.perf_counter()
    build_indexes()
    return {
        "facts": len(items),
        "edges": len(facts),
        "links": len(pairs),
        "entities": len(names),
        "embed_seconds": item_seconds + small_seconds,
        "embed_cached": float(hit),
        "parse_seconds": parse_seconds,
        "prepare_seconds": embedded,
        "copy_seconds": copied,
        "index_seconds": time.perf_counter() - index_began,
        "total_seconds": time.perf_counter() - began,
    }
