"""Every benchmark at a size that fits a few minutes, and one table of their figures.

    .venv/bin/python bench/run_all.py              # the quick sizes below
    .venv/bin/python bench/run_all.py --only recall,graph

Runs each benchmark of bench/ as its own process (recall, graph, federation,
erasure, eval_reasoning, load), prints a line saying so for any that does not
exist yet, and ends with one table: benchmark, arguments, wall time, status and
its headline figures (the lines of its output that carry p50/p95/p99, rates and
ratios), under the machine's cores and memory. docs/performance.md keeps the
latest table.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

from machine import describe

HERE = Path(__file__).resolve().parent
# name -> arguments sized to finish in a minute or two on a small machine.
PLAN = {
    "recall": ["--items", "2000", "--recalls", "100", "--writes", "200"],
    "graph": ["--items", "200", "--queries", "30"],
    "federation": ["--iterations", "30"],
    "erasure": [],
    "eval_reasoning": [],
    "load": ["--levels", "1,4,16", "--seconds", "10"],
}
# Lines worth carrying into the summary table.
HEADLINE = re.compile(
    r"p50|p95|p99|/s\b|ratio|items/s|ms\b|recall@|accuracy|score|^\s*\d+\s+(remember|recall|total)\b", re.I
)


def run(name: str, args: list[str], timeout: float) -> tuple[str, float, list[str]]:
    script = HERE / f"{name}.py"
    if not script.exists():
        return "not present yet", 0.0, []
    began = time.monotonic()
    try:
        done = subprocess.run(  # noqa: S603  (our own interpreter and scripts)
            [sys.executable, str(script), *args],
            cwd=HERE.parent,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:.0f}s", time.monotonic() - began, []
    elapsed = time.monotonic() - began
    lines = [line.rstrip() for line in done.stdout.splitlines() if line.strip()]
    print(f"\n=== {name} {' '.join(args)} ({elapsed:.0f}s, exit {done.returncode})")
    print("\n".join(lines))
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        return f"failed: {tail[:120]}", elapsed, lines
    headline = [line.strip() for line in lines if HEADLINE.search(line) and not line.startswith("machine")]
    return "ok", elapsed, headline


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", help="comma-separated names from: " + ", ".join(PLAN))
    parser.add_argument("--timeout", type=float, default=900, help="seconds per benchmark (default 900)")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(PLAN)
    machine = describe()
    rows = []
    for name in names:
        status, elapsed, headline = run(name, PLAN.get(name, []), args.timeout)
        if status == "not present yet":
            print(f"\n=== {name}: skipped, bench/{name}.py does not exist yet")
        rows.append((name, " ".join(PLAN.get(name, [])), elapsed, status, headline))

    print(f"\nmachine: {machine}")
    print("| benchmark | arguments | wall | status | figures |")
    print("|---|---|---|---|---|")
    for name, arguments, elapsed, status, headline in rows:
        figures = "<br>".join(headline[:12]) or "-"
        wall = f"{elapsed:.0f} s" if elapsed else "-"
        print(f"| {name} | `{arguments or '-'}` | {wall} | {status} | {figures} |")


if __name__ == "__main__":
    main()
