"""LoCoMo recall in process, one retrieval setting at several values, on stored items.

    .venv/bin/python bench/eval_quality.py --sets locomo --data-dir var/eval-locomo   # stores the items
    .venv/bin/python bench/locomo_settings.py --data-dir var/eval-locomo \\
        --setting FEDMEM_HYBRID_SENTENCE_WEIGHT --values 0,0.6

Reads the items a LoCoMo run of ``bench/eval_quality.py`` wrote into ``--data-dir``
(one agent per conversation, ``locomo-N``) and calls the retrieval core
(``memory.retrieval.hybrid.retrieve``, top 10, no stamps) for every question with
the setting at each value: turn any@10 / all@10 for the tune half (0-4), the
held-out half (5-9) and all, then the time of a retrieval per value, measured with
the values interleaved question by question (query embeddings cached first, so the
time is the statements and their Python). For choosing a weight and pricing it on
the same items; the figures users see come from ``eval_quality.py`` through the API.
Not a test: it measures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.eval_quality import DEFAULT_DATA, locomo_conversations  # noqa: E402
from bench.machine import machine  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True, help="a data dir a LoCoMo eval run wrote")
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("FEDMEM_BENCH_DATA", DEFAULT_DATA)))
    parser.add_argument("--setting", required=True, help="a FEDMEM_* setting retrieval reads at call time")
    parser.add_argument("--values", required=True, help="comma-separated numbers")
    parser.add_argument("--timing-questions", type=int, default=30, help="per conversation (0: no timing)")
    args = parser.parse_args()
    os.environ["DJANGO_SETTINGS_MODULE"] = "fedmem_site.settings.base"
    os.environ["FEDMEM_DATA_DIR"] = str(args.data_dir.resolve())
    os.environ.setdefault("FEDMEM_LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.conf import settings

    from governance.models import Agent
    from memory.embeddings import embed_query
    from memory.enforcement import Keys, system_access
    from memory.models import MemoryItem
    from memory.retrieval.hybrid import RecallQuery, retrieve

    print(machine())
    values = [float(v) for v in args.values.split(",")]
    conversations = locomo_conversations(args.data / "locomo" / "locomo10.zip")
    agents = {a.name: a for a in Agent.objects.filter(name__startswith="locomo-")}
    asked = []  # (conversation, access, question, evidence, turns by item id)
    for n, conv in enumerate(conversations):
        access = system_access(agents[f"locomo-{n}"])
        turns = {
            str(pk): turn
            for pk, turn in MemoryItem.objects.filter(agent=access.agent).values_list("pk", "metadata__turn")
        }
        for q in conv["qa"]:
            if q.get("category") != 5 and q.get("evidence"):
                asked.append((n, access, q["question"], set(q["evidence"]), turns))

    def ranked(access, question):  # type: ignore[no-untyped-def]
        rq = RecallQuery(query=question, scopes=access.policy.read_scopes, keys=Keys(), top_k=10, stamp=False)
        return retrieve(access, rq)

    print(f"\n{args.setting}: turn any@10 / all@10 ({len(asked)} questions)")
    for value in values:
        setattr(settings, args.setting, value)
        counts = {"tune": [0, 0, 0], "held out": [0, 0, 0]}
        for n, access, question, evidence, turns in asked:
            found = {turns.get(str(hit.item.pk)) for hit in ranked(access, question)}
            cell = counts["tune" if n < 5 else "held out"]
            cell[0] += 1
            cell[1] += bool(evidence & found)
            cell[2] += evidence <= found
        both = [counts["tune"][i] + counts["held out"][i] for i in range(3)]
        shown = "  ".join(
            f"{name} {c[1] / c[0]:.3f} / {c[2] / c[0]:.3f}" for name, c in [*counts.items(), ("all", both)]
        )
        print(f"  {value:g}: {shown}")
    if args.timing_questions <= 0:
        return
    # The first questions of each conversation.
    per_conversation: dict[int, int] = {}
    sample = []
    for entry in asked:
        if per_conversation.get(entry[0], 0) < args.timing_questions:
            per_conversation[entry[0]] = per_conversation.get(entry[0], 0) + 1
            sample.append(entry)
    for _, _, question, _, _ in sample:
        embed_query(question)
    times: dict[float, list[float]] = {value: [] for value in values}
    for warm in (True, False):
        for _, access, question, _, _ in sample:
            for value in values:
                setattr(settings, args.setting, value)
                began = time.perf_counter()
                ranked(access, question)
                if not warm:
                    times[value].append((time.perf_counter() - began) * 1000)
    print(f"\nretrieval time, {len(sample)} questions, values interleaved (query embedding cached)")
    for value, xs in times.items():
        xs.sort()
        print(f"  {value:g}: p50 {statistics.median(xs):.1f} ms, p95 {xs[int(len(xs) * 0.95)]:.1f} ms")
    print(machine())


if __name__ == "__main__":
    main()
