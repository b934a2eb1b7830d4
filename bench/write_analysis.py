"""CPU of a write's analysis (personal-data detection, extraction inputs, embedding)
when several writes arrive at once in one web process.

    .venv/bin/python bench/write_analysis.py                  # 4 writers x 40 short texts, twice
    .venv/bin/python bench/write_analysis.py --writers 1      # one at a time

Calls ``memory.services.write.prepare.analyse`` (what every remember runs before
its transaction) from ``--writers`` threads at once, each with distinct short texts
like bench/load.py's, and prints the process CPU and wall time per write: the
detection batches what arrives together and the embedder shares passes, so CPU per
write falls with concurrency. CPU time carries over from a busy machine better
than wall time. Needs no database. Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")
os.environ.setdefault("FEDMEM_LOG_LEVEL", "WARNING")

TOPICS = ["billing", "search", "checkout", "auth", "reports", "payments", "inventory", "alerts"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--writers", type=int, default=4, help="threads writing at once (default 4)")
    parser.add_argument("--writes", type=int, default=40, help="writes per thread (default 40)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    import django

    django.setup()
    from bench.machine import describe
    from memory.services.write.prepare import analyse

    analyse(["Warm-up: the billing service is fine."])  # loads spaCy, presidio, the embedder
    rng = random.Random()

    def writer() -> None:
        for _ in range(args.writes):
            analyse([f"The {rng.choice(TOPICS)} service had incident {rng.randrange(10**9)} today."])

    print(f"machine: {describe()}")
    count = args.writers * args.writes
    for _ in range(args.rounds):
        cpu, wall = time.process_time(), time.perf_counter()
        threads = [threading.Thread(target=writer) for _ in range(args.writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(
            f"{args.writers} writers: process CPU {(time.process_time() - cpu) * 1000 / count:.1f} ms "
            f"per write, wall {(time.perf_counter() - wall) * 1000 / count:.1f} ms per write"
        )
    print(f"machine at end: {describe()}")


if __name__ == "__main__":
    main()
