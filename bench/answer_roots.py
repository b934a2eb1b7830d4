"""The root cause an answer states, in process, on stored items: answer-root@1 per set.

    .venv/bin/python bench/eval_quality.py --sets reasongraph,reasongraph-heldout,reasongraph-heldout4 \\
        --data-dir var/eval-rg                                  # stores the items
    .venv/bin/python bench/answer_roots.py --data-dir var/eval-rg
    .venv/bin/python bench/answer_roots.py --data-dir var/eval-rg --sets causal --misses

Reads the items a ReasonGraph run of ``bench/eval_quality.py`` wrote into
``--data-dir`` (one agent per set: ``causal``, ``extra``, ``heldout``, ``heldout4``;
where a data dir holds several runs, the agent with the most items) and asks
``memory.operations.knowledge.answer`` (mode discover, the API's defaults) every
question of each set: answer-root@1 (the stated root is the gold chain's first
fact), and chain@10 / recall@5 of the answer's facts. ``--misses`` prints, for each
wrong root, the stated chain root first with each fact's relevance and its place in
the gold chain (G0 is the root), then the gold facts it left out.

For weighing a change to the answer's walk with the retrieved facts held fixed:
run it before and after on the same data dir. Its level differs from the API run's
(the tenant's statistics here count every set stored, there only the sets written
so far), so compare this script's figures with each other. Not a test: it measures.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.eval_quality import DEFAULT_DATA, causal_cases, extra_cases  # noqa: E402
from bench.machine import machine  # noqa: E402

SETS = {
    "causal": ("causal_cases.jsonl", causal_cases),
    "extra": ("reasoning_cases_extra.jsonl", extra_cases),
    "heldout": ("causal_cases_batch3.jsonl", causal_cases),
    "heldout4": ("causal_cases_batch4_trnl.jsonl", causal_cases),
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data-dir", type=Path, required=True, help="a data dir a ReasonGraph eval run wrote"
    )
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("FEDMEM_BENCH_DATA", DEFAULT_DATA)))
    parser.add_argument("--sets", default=",".join(SETS), help=f"comma-separated, of {', '.join(SETS)}")
    parser.add_argument("--misses", action="store_true", help="print the stated chain of every wrong root")
    args = parser.parse_args()
    unknown = set(args.sets.split(",")) - set(SETS)
    if unknown:
        parser.error(f"unknown sets: {', '.join(sorted(unknown))}")
    os.environ["DJANGO_SETTINGS_MODULE"] = "fedmem_site.settings.base"
    os.environ["FEDMEM_DATA_DIR"] = str(args.data_dir.resolve())
    os.environ.setdefault("FEDMEM_LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.db.models import Count

    from governance.models import Agent
    from memory.enforcement import system_access
    from memory.models import MemoryItem
    from memory.operations.knowledge import AnswerRequest, answer

    print(machine())
    for name in args.sets.split(","):
        agent = (
            Agent.objects.filter(name=name)
            .annotate(items=Count("memory_items"))
            .order_by("-items", "pk")
            .first()
        )
        if agent is None:
            print(f"{name}: no agent of that name in {args.data_dir} (run eval_quality.py with its set)")
            continue
        filename, read = SETS[name]
        _facts, questions = read(args.data / "reasongraph" / filename)
        access = system_access(agent)
        pk_of = {
            text: str(pk) for pk, text in MemoryItem.objects.filter(agent=agent).values_list("pk", "content")
        }
        text_of = {pk: text for text, pk in pk_of.items()}
        roots = chain10 = recall5 = 0.0
        for q in questions:
            gold = [pk_of[g] for g in q["gold"] if g in pk_of]
            result = answer(access, AnswerRequest(query=q["query"]))
            top = [f["id"] for f in result.facts][:10]
            chain10 += sum(g in top for g in gold) / len(gold)
            recall5 += sum(g in top[:5] for g in gold) / len(gold)
            stated = [link["item_id"] for link in result.chain]
            right = bool(stated) and stated[0] == gold[0]
            roots += right
            if args.misses and not right:
                relevance = {f["id"]: f["why"]["relevance"] for f in result.facts if f.get("why")}
                anchor = [pk for pk in top if relevance.get(pk) == max(relevance.values(), default=None)][:1]
                print(f"  miss: {q['query']}")
                for pk in dict.fromkeys([*stated, *anchor]):
                    place = f"G{gold.index(pk)}" if pk in gold else "  "
                    print(
                        f"    {place} rel {relevance.get(pk, float('nan')):.2f}  {text_of.get(pk, pk)[:90]}"
                    )
                for pk in gold:
                    if pk not in stated and pk not in anchor:
                        seen = f"rel {relevance[pk]:.2f}" if pk in relevance else "not among the facts"
                        print(f"    -- G{gold.index(pk)} left out ({seen})  {text_of[pk][:80]}")
        n = len(questions)
        print(
            f"{name} ({n} questions): answer-root@1 {roots / n:.2f} ({int(roots)}/{n}), "
            f"answer facts chain@10 {chain10 / n:.2f}, recall@5 {recall5 / n:.2f}"
        )
    print(machine())


if __name__ == "__main__":
    main()
