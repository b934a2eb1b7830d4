"""Where the Python time of one request goes: recall, graph recall, discover, trace.

    .venv/bin/python bench/profile_request.py --size 10k              # after run_all built that data
    .venv/bin/python bench/profile_request.py --size 10k --calls recall --repeat 50 --html var/p.html

Each call runs ``--repeat`` times in this process through the same URLs as the
server (Django's test client, the whole middleware and DRF stack), every query
distinct so each pays its embedding, under pyinstrument (``pip install
pyinstrument``; not a dependency of the project). Prints the mean wall time per
call, the statements it ran, and the profile. Not a test: it asserts nothing.
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
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")
os.environ.setdefault("FEDMEM_LOG_LEVEL", "WARNING")
os.environ.setdefault("FEDMEM_API_RATE_LIMIT", "1000000/minute")

from bench.run_all import parse_size  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=parse_size, default=parse_size("10k"))
    parser.add_argument("--calls", default="recall,graph,discover,trace")
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--html", help="also write the last profile as HTML here")
    parser.add_argument("--no-profile", action="store_true", help="time only")
    args = parser.parse_args()
    os.environ.setdefault("FEDMEM_DB_NAME", f"fedmem_bench_{args.size}")

    import django

    django.setup()
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from bench.machine import describe
    from bench.run_all import api_key
    from governance.models import Agent
    from governance.services.tenancy import tenant_get_or_create
    from memory.embeddings import embed_query
    from memory.models import MemoryItem

    tenant = tenant_get_or_create(slug=f"bench-{args.size}", name=f"bench {args.size}")
    agent = Agent.objects.get(tenant=tenant, name="bench-agent")
    secret = api_key(tenant, agent)
    ids = [str(pk) for pk in MemoryItem.objects.filter(agent=agent).values_list("pk", flat=True)[:500]]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {secret}", HTTP_HOST="127.0.0.1")
    prefix = f"/v1/memory/agents/{agent.pk}"
    counter = iter(range(10**9))

    def query() -> str:
        return f"what happened in incident {next(counter) * 7 % max(1, args.size // 3)}"

    calls = {
        "recall": lambda: ("/recall", {"query": query(), "top_k": 8}),
        "graph": lambda: ("/recall", {"query": query(), "top_k": 8, "mode": "graph"}),
        "discover": lambda: ("/discover", {"query": query()}),
        "trace": lambda: ("/trace", {"item_id": ids[next(counter) % len(ids)], "direction": "causes"}),
    }
    print(f"machine: {describe()}")
    embed_query("warm up")
    bare = []
    for i in range(30):
        began = time.perf_counter()
        embed_query(f"bare query number {i} about checkout")
        bare.append((time.perf_counter() - began) * 1000)
    print(f"query embedding through the batcher, p50 {statistics.median(bare):.2f} ms")
    for name in args.calls.split(","):
        path, body = calls[name]()
        client.post(prefix + path, body, content_type="application/json")  # warm
        with CaptureQueriesContext(connection) as captured:
            response = client.post(prefix + path, body | {"query": query()} if "query" in body else body,
                                   content_type="application/json")  # fmt: skip
        assert response.status_code == 200, response.content[:300]
        sql_ms = sum(float(q["time"]) for q in captured.captured_queries) * 1000
        profiler = None
        if not args.no_profile:
            from pyinstrument import Profiler

            profiler = Profiler(interval=0.0005)
            profiler.start()
        took = []
        for _ in range(args.repeat):
            path, body = calls[name]()
            began = time.perf_counter()
            client.post(prefix + path, body, content_type="application/json")
            took.append((time.perf_counter() - began) * 1000)
        print(
            f"\n== {name}: p50 {statistics.median(took):.1f} ms, mean {statistics.mean(took):.1f} ms; "
            f"{len(captured.captured_queries)} statements, {sql_ms:.1f} ms in the driver (one call)"
        )
        if profiler is not None:
            profiler.stop()
            print(profiler.output_text(unicode=False, color=False, show_all=False))
            if args.html:
                Path(args.html).with_suffix(f".{name}.html").write_text(profiler.output_html())
    print(f"machine: {describe()}")


if __name__ == "__main__":
    main()
