"""Graph path: extraction throughput, and discover / trace latency.

    .venv/bin/python bench/graph.py                 # 2,000 facts
    .venv/bin/python bench/graph.py --items 10000

Writes N generated causal facts (chains of three, in both directions of wording,
across sessions) into a database of its own (FEDMEM_DB_NAME, default
``fedmem_bench_graph``) through the real write service, runs the real extraction
service on each (in this process, as the worker would) and prints:

* extraction throughput in facts/s next to bare embedding throughput of the same
  texts in the same run;
* discover and trace p50/p95 (service layer: visibility SQL, traversal, span
  linking) over ``--queries`` queries;
* the machine.

Not a test: it asserts nothing, it measures.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")
os.environ.setdefault("FEDMEM_DB_NAME", "fedmem_bench_graph")
os.environ.setdefault("FEDMEM_LOG_LEVEL", "WARNING")

from bench.recall import CAUSES, SERVICES, SYMPTOMS, machine, percentile  # noqa: E402

IMPACTS = ["failed checkouts", "angry support tickets", "lost revenue", "a missed SLA", "paged engineers"]


def generate(count: int, seed: int) -> list[tuple[str, str]]:
    """(session, text) triples of facts forming cause -> symptom -> impact chains."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    n = 0
    while len(out) < count:
        cause, service = rng.choice(CAUSES), rng.choice(SERVICES)
        symptom, impact = rng.choice(SYMPTOMS), rng.choice(IMPACTS)
        event = f"the {service} service {symptom} in incident {n}"
        out.append((f"s{n}a", f"{cause.capitalize()} led to {event}."))
        out.append((f"s{n}b", f"{impact.capitalize()} followed because of {event}."))
        out.append((f"s{n}c", f"{impact.capitalize()} in incident {n} caused an escalation to management."))
        n += 1
    return out[:count]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=2_000, help="facts to write and extract (default 2000)")
    parser.add_argument("--queries", type=int, default=100, help="discover and trace calls to time")
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    from governance.models import Agent, User
    from governance.services.agents import agent_create
    from governance.services.tenancy import tenant_get_or_create
    from memory.embeddings import embed_texts, get_embedder
    from memory.enforcement import Keys, read_scopes, system_access, visible_q
    from memory.extraction.nlp import get_nlp
    from memory.extraction.pipeline import extract_item
    from memory.models import MemoryItem
    from memory.reasoning import graph
    from memory.retrieval.hybrid import RecallQuery
    from memory.services.items import MemoryDraft, memory_remember_batch

    call_command("migrate", verbosity=0)
    info = machine()
    print(f"machine: {info['cores']} cores, {info['ram']} RAM, {info['cpu']}")
    get_embedder()
    get_nlp()
    tenant = tenant_get_or_create(slug="bench-graph", name="Bench graph")
    owner, _ = User.objects.get_or_create(username="bench-graph-owner")
    agent = Agent.objects.filter(tenant=tenant, name="graph-agent").first() or agent_create(
        tenant=tenant, name="graph-agent", created_by=owner
    )
    access = system_access(agent)
    facts = generate(args.items, seed=7)
    if MemoryItem.objects.filter(tenant=tenant).count() != args.items:
        # A throwaway bench database: emptied directly, not through the services.
        MemoryItem.objects.filter(tenant=tenant).delete()
        for start in range(0, len(facts), 100):
            drafts = [
                MemoryDraft(content=text, scope="agent", session_id=session)
                for session, text in facts[start : start + 100]
            ]
            memory_remember_batch(access=access, drafts=drafts)
        ids = list(MemoryItem.objects.filter(tenant=tenant).values_list("pk", flat=True))
        began = time.perf_counter()
        for pk in ids:
            extract_item(pk)
        extraction = len(ids) / (time.perf_counter() - began)
        texts = [text for _, text in facts]
        began = time.perf_counter()
        embed_texts(texts)
        bare = len(texts) / (time.perf_counter() - began)
        print(
            f"extraction: {extraction:.1f} facts/s; bare embedding: {bare:.1f} texts/s "
            f"(ratio {extraction / bare:.3f})"
        )
    else:
        print("facts already loaded and extracted (rerun with another --items to re-measure extraction)")

    view = graph.View(access, visible_q(access, read_scopes(access, None)))
    rng = random.Random(3)
    discover_ms, trace_ms = [], []
    for _ in range(args.queries):
        n = rng.randrange(max(1, args.items // 3))
        query = RecallQuery(query=f"what happened in incident {n}", scopes=("agent",), keys=Keys(), top_k=5)
        began = time.perf_counter()
        graph.discover(access, query, view, hops=2, max_results=20, max_visited=200)
        discover_ms.append((time.perf_counter() - began) * 1000)
        began = time.perf_counter()
        graph.trace(view, direction="effects", content=rng.choice(CAUSES), max_depth=5, max_visited=100)
        trace_ms.append((time.perf_counter() - began) * 1000)
    for name, values in (("discover", discover_ms), ("trace", trace_ms)):
        print(
            f"{name} at {args.items:,} facts: p50 {percentile(values, 0.5):.1f} ms, "
            f"p95 {percentile(values, 0.95):.1f} ms"
        )


if __name__ == "__main__":
    main()
