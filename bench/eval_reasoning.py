"""Reasoning eval: does the graph path find whole causal chains that plain vector
recall misses?

    .venv/bin/python bench/eval_reasoning.py

The labelled set is memory.graph_datasets (written for fedmem, shared with the
demo): 30 questions over five domains; each chain's facts are told by two agents in
separate sessions, with distractor facts that share words with the chain. The facts
are written through the real write service and extracted by the real extraction
service into a database of its own (FEDMEM_DB_NAME, default
``fedmem_bench_eval``); then every question is asked, as one of the dataset's
agents, through:

* ``vector``: plain vector recall, top 5 (the baseline);
* ``graph recall``: recall in graph mode (hybrid seeds expanded over causal links
  and entities), top 5;
* ``discover``: discover with 3 hops, up to 20 results.

Per method it prints, averaged over the questions: chain completeness (share of
the gold chain's facts anywhere in the answer), recall@5 and precision@5 (gold facts
among the first five), and the ordered-chain rate (the whole gold chain returned
with its facts in causal order or its reverse). Not a test: it asserts nothing.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")
os.environ.setdefault("FEDMEM_DB_NAME", "fedmem_bench_eval")
os.environ.setdefault("FEDMEM_LOG_LEVEL", "WARNING")

from bench.machine import machine  # noqa: E402


def ordered(answer: list[str], gold: tuple[str, ...]) -> bool:
    positions = [answer.index(text) for text in gold if text in answer]
    if len(positions) != len(gold):
        return False
    return positions == sorted(positions) or positions == sorted(positions, reverse=True)


def main() -> None:
    import django

    django.setup()
    from django.core.management import call_command

    from governance.models import Agent, User
    from governance.services.tenancy import tenant_get_or_create
    from memory.enforcement import Keys, read_scopes, system_access, visible_q
    from memory.graph_datasets import cases
    from memory.models import MemoryItem
    from memory.operations.recall import graph_recall
    from memory.reasoning import graph
    from memory.retrieval.hybrid import RecallQuery, retrieve
    from memory.services.graph_demo import graph_demo_load

    call_command("migrate", verbosity=0)
    info = machine()
    print(f"machine: {info['cores']} cores, {info['ram']} RAM, {info['cpu']}, load {info['load']}")
    tenant = tenant_get_or_create(slug="bench-eval", name="Bench eval")
    owner, _ = User.objects.get_or_create(username="bench-eval-owner")
    began = time.perf_counter()
    loaded = graph_demo_load(tenant=tenant, created_by=owner, extract_now=True)
    pending = MemoryItem.objects.filter(tenant=tenant).exclude(extraction_status="done")
    for pk in pending.values_list("pk", flat=True):
        from memory.extraction.pipeline import extract_item

        extract_item(pk)
    print(
        f"data: {loaded['facts']} facts ({loaded['created']} written now, in "
        f"{time.perf_counter() - began:.0f} s) by {len(loaded['agents'])} agents in "
        f"{len(loaded['domains'])} domains; {len(cases())} questions"
    )
    reader = system_access(Agent.objects.get(tenant=tenant, name="incident-agent"))
    scopes = read_scopes(reader, None)
    view = graph.View(reader, visible_q(reader, scopes))

    def query(question: str) -> RecallQuery:
        return RecallQuery(query=question, scopes=scopes, keys=Keys(), top_k=5)

    def vector(question: str) -> list[str]:
        rq = RecallQuery(query=question, scopes=scopes, keys=Keys(), top_k=5, mode="vector")
        return [hit.item.content for hit in retrieve(reader, rq)]

    def graph_mode(question: str) -> list[str]:
        return [r["content"] for r in graph_recall(reader, query(question), hops=3)]

    def discover(question: str) -> list[str]:
        found = graph.discover(reader, query(question), view, hops=3, max_results=20, max_visited=200)
        return [f.item.content for f in found]

    methods = {"vector (baseline)": vector, "graph recall": graph_mode, "discover": discover}
    all_cases = cases()
    header = ("method", "completeness", "recall@5", "precision@5", "ordered", "p50 ms")
    print(f"{header[0]:<20} " + " ".join(f"{h:>12}" for h in header[1:]))
    misses: dict[str, list[str]] = {}
    for name, method in methods.items():
        complete = recall = precision = chains = 0.0
        times = []
        for case in all_cases:
            t = time.perf_counter()
            answer = method(case.question)
            times.append((time.perf_counter() - t) * 1000)
            gold = set(case.gold)
            complete += len(gold & set(answer)) / len(gold)
            top = answer[:5]
            recall += len(gold & set(top)) / len(gold)
            precision += len(gold & set(top)) / 5
            chains += ordered(answer, case.gold)
            if name == "discover" and not gold <= set(answer):
                misses.setdefault(case.domain, []).append(case.question)
        n = len(all_cases)
        times.sort()
        print(
            f"{name:<20} {complete / n:>12.2f} {recall / n:>12.2f} {precision / n:>12.2f} "
            f"{chains / n:>12.2f} {times[len(times) // 2]:>12.0f}"
        )
    for domain, questions in sorted(misses.items()):
        print(f"discover missed part of a chain in {domain}: " + "; ".join(questions))


if __name__ == "__main__":
    main()
