"""Ingest: where a batch write's time goes, per stage, in the web path and the extraction task.

    .venv/bin/python bench/ingest.py --profile              # in this process, 400 facts
    .venv/bin/python bench/ingest.py --profile --facts 800
    .venv/bin/python bench/run_all.py --size 10k --only ingest --profile   # the live figure too

``--profile`` writes fresh facts through the real batch endpoint (Django's test
client, in this process: authentication, DRF, the write services, the database),
100 per request, and then runs the extraction tasks those writes enqueued, in this
process, as the worker would (the outbox messages are captured instead of sent to
the broker). Each stage is timed by wrapping the function that does it, wherever
it is imported; times are exclusive (a stage's time excludes the stages it calls),
so a phase's stages and its remainder ("overhead") add up to its wall time. The
web path runs personal-data detection in a thread beside the item embedding; the
stages of that thread are listed too, marked, and overlap the others.

The bare embedder (ONNX, the same texts in one batch) and the bare spaCy parse
(``nlp.pipe`` of the same texts) are measured in the same run; the ratio of facts/s
to the bare embedder is what carries over on a shared machine. Not a test: it
asserts nothing.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")
os.environ.setdefault("FEDMEM_LOG_LEVEL", "WARNING")

BATCH = 100

# (module, function name, stage). A function is wrapped in every loaded module that
# holds it under that name, so ``from x import f`` call sites are timed too.
STAGES = [
    ("django.test.client", "Client.post", "request (HTTP framing, auth, DRF, policy)"),
    ("memory.services.write.prepare", "validate_draft", "input checks and write policy"),
    ("memory.pii", "detect_personal_data", "personal-data detection (presidio)"),
    ("memory.extraction.nlp", "parse", "spaCy parse"),
    ("memory.extraction.nlp", "lemma_docs", "spaCy parse of spans (no entity recognition)"),
    ("memory.embeddings", "embed_texts", "embedding"),
    ("memory.services.write.store", "store", "DB writes (items, history, outbox)"),
    ("memory.services.contradictions", "contradictions_check", "contradiction check"),
    ("memory.extraction.handoff", "write_inputs", "extraction inputs at write time"),
    ("memory.tasks", "extract_items.run", "task (load, retries, slicing)"),
    ("memory.extraction.pipeline", "load_items", "load items SQL"),
    ("memory.extraction.entities", "find_entities", "entities (from the parse)"),
    ("memory.extraction.causal", "extract_relations", "causal rules (from the parse)"),
    ("memory.extraction.pipeline", "span_terms", "span terms (lemmas)"),
    ("memory.extraction.pipeline", "known_entities", "known entities SQL"),
    ("memory.extraction.pipeline", "store_many", "DB writes (mentions, edges, status)"),
    ("memory.extraction.pipeline", "store", "DB writes item by item (a chunk failed)"),
    ("memory.extraction.pipeline", "_entity_for", "entity lookup / merge / create SQL"),
    ("memory.extraction.links", "link_edges", "span linking SQL"),
    ("memory.extraction.pipeline", "delete_orphan_entities", "orphan entities SQL"),
]


OURS = {"core", "governance", "memory", "providers", "fedmem_site", "bench"}


class Profile:
    """Exclusive time per stage and thread: a stage's own time, its callees' excluded."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.seconds: dict[tuple[str, bool], float] = defaultdict(float)
        self.calls: dict[tuple[str, bool], int] = defaultdict(int)
        self.main = threading.get_ident()
        self.undo: list[tuple[Any, str, Any]] = []

    def timed(self, stage: str, func: Any) -> Any:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            stack = self.local.__dict__.setdefault("stack", [])
            began = time.perf_counter()
            stack.append(0.0)
            try:
                return func(*args, **kwargs)
            finally:
                took = time.perf_counter() - began
                inner = stack.pop()
                key = (stage, threading.get_ident() != self.main)
                self.seconds[key] += took - inner
                self.calls[key] += 1
                if stack:
                    stack[-1] += took

        wrapper.__profiled__ = True  # type: ignore[attr-defined]
        return wrapper

    def install(self) -> None:
        import importlib

        for module_name, name, stage in STAGES:
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            owner_name, _, attr = name.rpartition(".")
            owner = getattr(module, owner_name) if owner_name else module
            original = getattr(owner, attr, None)
            if original is None or getattr(original, "__profiled__", False):
                continue
            wrapped = self.timed(stage, original)
            holders = (
                [owner]
                if owner_name
                else [m for n, m in list(sys.modules.items()) if m is not None and n.split(".")[0] in OURS]
            )
            for holder in holders:
                if vars(holder).get(attr) is original:
                    setattr(holder, attr, wrapped)
                    self.undo.append((holder, attr, original))

    def remove(self) -> None:
        for holder, attr, original in reversed(self.undo):
            setattr(holder, attr, original)
        self.undo.clear()

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()

    def table(self, title: str, wall: float, facts: int) -> None:
        print(f"\n{title}: {facts} facts in {wall:.2f} s = {facts / wall:.1f} facts/s")
        print(f"  {'stage':<48} {'calls':>6} {'s':>7} {'ms/fact':>8} {'share':>6}")
        own = sum(s for (_, side), s in self.seconds.items() if not side)
        rows = sorted(self.seconds.items(), key=lambda kv: (kv[0][1], -kv[1]))
        for (stage, side), seconds in rows:
            name = f"{stage}{' [detection thread]' if side else ''}"
            print(
                f"  {name:<48} {self.calls[(stage, side)]:>6} {seconds:>7.2f} "
                f"{seconds * 1000 / facts:>8.2f} {seconds / wall:>6.0%}"
            )
        rest = wall - own
        label = "other (not in any stage)"
        print(f"  {label:<48} {'':>6} {rest:>7.2f} {rest * 1000 / facts:>8.2f} {rest / wall:>6.0%}")


def texts_for(count: int, stamp: int) -> list[str]:
    from bench.graph import generate

    return [f"{f.text[:-1]} (run {stamp})." for f in generate(count, seed=stamp % 1000)]


def bare_rates(texts: list[str]) -> dict[str, float]:
    """The bare embedder and the bare parser over ``texts``, now."""
    from memory.embeddings import load_embedder
    from memory.extraction.nlp import get_nlp

    onnx = load_embedder("onnx")
    onnx.embed(["warm up"])
    began = time.perf_counter()
    onnx.embed(texts)
    embed = len(texts) / (time.perf_counter() - began)
    nlp = get_nlp()
    list(nlp.pipe(["warm up"]))
    began = time.perf_counter()
    list(nlp.pipe(texts, batch_size=64))
    parse = len(texts) / (time.perf_counter() - began)
    return {"embed": embed, "parse": parse}


def profile(facts: int) -> dict[str, float]:
    """Write ``facts`` fresh facts through the batch endpoint and extract them, in this
    process, stage by stage. Returns the phases' facts/s and the bare rates."""
    from django.test import Client

    import core.tasks
    from bench.machine import describe
    from bench.run_all import api_key
    from governance.models import User
    from governance.services.agents import agent_create
    from governance.services.tenancy import tenant_get_or_create
    from memory.models import MemoryItem
    from memory.tasks import extract_items

    print(f"\n== ingest profile: {facts} facts, {BATCH} per batch request, in this process")
    print(f"  machine: {describe()}")
    owner, _ = User.objects.get_or_create(username="bench-owner")
    # A tenant of its own per run: span linking reads the tenant's earlier edges.
    run = time.time_ns()
    tenant = tenant_get_or_create(slug=f"bench-ingest-{run}", name=f"bench ingest {run}")
    agent = agent_create(tenant=tenant, name=f"profile-{run}", created_by=owner)
    secret = api_key(tenant, agent)
    stamp = int(time.time())
    texts = texts_for(facts, stamp)
    # Warm every model and cache path on other texts first: the profile is of steady state.
    warm = texts_for(32, stamp + 1)
    client = Client(headers={"authorization": f"Bearer {secret}"})
    prefix = f"/v1/memory/agents/{agent.pk}"
    captured: list[Any] = []
    original_publish = core.tasks.publish

    def capture(message: Any) -> bool:
        captured.append(message)
        return True

    core.tasks.publish = capture
    prof = Profile()
    try:
        post_batch(client, prefix, warm)
        run_tasks(extract_items, captured)
        bare = bare_rates(texts)
        prof.install()
        began = time.perf_counter()
        for start in range(0, len(texts), BATCH):
            post_batch(client, prefix, texts[start : start + BATCH], session=f"s{start}")
        web = time.perf_counter() - began
        prof.table("web write path (batch endpoint)", web, len(texts))
        prof.reset()
        began = time.perf_counter()
        run_tasks(extract_items, captured)
        task = time.perf_counter() - began
        prof.table("extraction task", task, len(texts))
    finally:
        prof.remove()
        core.tasks.publish = original_publish
    pending = MemoryItem.objects.filter(agent=agent, extraction_status="pending").count()
    total = web + task
    # The machine's load moves during a run: the bare rates before and after the
    # phases, and the ratio to their mean.
    after = bare_rates(texts)
    print(
        f"\n  bare ONNX batch {bare['embed']:.0f} texts/s before, {after['embed']:.0f} after; "
        f"bare spaCy parse {bare['parse']:.0f} / {after['parse']:.0f} texts/s (same texts, this run)"
    )
    bare = {key: (bare[key] + after[key]) / 2 for key in bare}
    print(
        f"  both phases: {len(texts) / total:.1f} facts/s ({pending} left pending); "
        f"ratio to the bare embedder {len(texts) / total / bare['embed']:.2f} "
        f"(web path {len(texts) / web / bare['embed']:.2f}, "
        f"extraction task {len(texts) / task / bare['embed']:.2f})"
    )
    print(f"  machine at end: {describe()}")
    return {"web": len(texts) / web, "task": len(texts) / task, "both": len(texts) / total, **bare}


def post_batch(client: Any, prefix: str, texts: list[str], session: str = "warm") -> None:
    items = [{"content": t, "scope": "agent", "session_id": session} for t in texts]
    response = client.post(prefix + "/memories/batch", {"items": items}, content_type="application/json")
    if response.status_code >= 400:
        raise SystemExit(f"batch: {response.status_code} {response.content[:300]!r}")


def run_tasks(task: Any, captured: list[Any]) -> None:
    """Run the captured extraction messages (and any they enqueue) in this process."""
    while captured:
        message = captured.pop(0)
        if message.task_name == task.name:
            task.apply(args=message.args, kwargs=message.kwargs, throw=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--profile", action="store_true", help="time each stage (the only mode)")
    parser.add_argument("--facts", type=int, default=400)
    args = parser.parse_args()
    os.environ.setdefault("FEDMEM_DB_NAME", "fedmem_bench_ingest")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    profile(args.facts)


if __name__ == "__main__":
    main()
