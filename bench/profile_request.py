"""Where the Python time of one request goes: recall, graph recall, discover, trace.

    .venv/bin/python bench/profile_request.py --size 10k              # after run_all built that data
    .venv/bin/python bench/profile_request.py --size 10k --calls recall --repeat 50 --html var/p.html
    .venv/bin/python bench/profile_request.py --size 100k --calls recall,remember --layers --no-profile
    .venv/bin/python bench/profile_request.py --size 100k --calls graph --statements --no-profile --warm 20
    .venv/bin/python bench/profile_request.py --size 100k --calls graph,discover --phases --no-profile

Each call runs ``--repeat`` times in this process through the same URLs as the
server (Django's test client, the whole middleware and DRF stack), every query
distinct so each pays its embedding, under pyinstrument (``pip install
pyinstrument``; not a dependency of the project), after ``--warm`` distinct calls
of the same kind that are not measured. Prints the mean wall time per
call, the statements it ran, and the profile. ``--layers`` also prints the CPU time
per call of each layer (authentication, lockout check, rate limit, policy, input,
retrieval and its lexical, vector and final statements, the embedding model, framing, JSON),
measured as the CPU time of the thread running it (the model's as the process's,
since ONNX Runtime runs on threads of its own), the statements per call (counter
statements apart) and the CPU the database's backends spent per call: CPU time
carries over from a busy machine, wall time does not. ``--statements`` prints the
wall time per call of each statement shape (the driver's round trip included, the
statement's first 100 characters as its name), the costliest first. ``--phases``
prints the wall time per call of each step of the graph-aware rank on the request's
thread (the seeds, each round's reads, the waits for the reads beside it, the
PageRank solve, the chain). Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")
os.environ.setdefault("FEDMEM_LOG_LEVEL", "WARNING")
os.environ.setdefault("FEDMEM_API_RATE_LIMIT", "1000000/minute")

from bench.run_all import parse_size  # noqa: E402

# (label, module, attribute path, clock): the layers --layers times.
LAYERS = [
    ("request, whole", "django.test.client", "Client.post", "thread"),
    ("authentication", "governance.authentication", "BearerKeyAuthentication.authenticate", "thread"),
    ("  lockout check", "governance.authentication", "lockout_check", "thread"),
    ("  key lookup", "governance.authentication", "resolve_key", "thread"),
    ("rate limit", "core.throttling", "ApiKeyRateThrottle.allow_request", "thread"),
    ("access + policy", "memory.api.views", "AgentMemoryMixin.memory_access", "thread"),
    ("input parsing", "memory.api.views", "parse_input", "thread"),
    ("recall operation", "memory.operations.recall", "recall", "thread"),
    ("  retrieval", "memory.operations.recall", "retrieve", "thread"),
    ("    lexical (BM25, 2-3 statements)", "memory.retrieval.hybrid", "bm25_rows", "thread"),
    ("    vector search (HNSW)", "memory.retrieval.hybrid", "nearest_rows", "thread"),
    ("    final statement + rows", "django.db.models.query", "RawQuerySet.__iter__", "thread"),
    ("  framing", "memory.operations.recall", "_framed", "thread"),
    ("remember operation", "memory.operations.memories", "remember", "thread"),
    ("JSON rendering", "rest_framework.renderers", "JSONRenderer.render", "thread"),
    ("ORM compilation, anywhere (as_sql)", "django.db.models.sql.compiler", "SQLCompiler.as_sql", "thread"),
    ("embedding model (process CPU)", "memory.embeddings", "OnnxEmbedder.embed", "process"),
]

# The steps of the graph-aware rank (graph recall, discover, answer) --phases times:
# wall time on the request's thread, what a call waits for; reads that run beside it
# (core.beside) show as the waits for their results.
PHASES = [
    ("graph-aware rank, whole", "memory.retrieval.graphrank", "rank", "wall"),
    ("  seeds (hybrid retrieve)", "memory.retrieval.graphrank", "retrieve", "wall"),
    ("  session neighbours", "memory.retrieval.graphrank", "_session_neighbours", "wall"),
    ("  cause spans", "memory.retrieval.graphrank", "_cause_spans", "wall"),
    ("  mentions", "memory.retrieval.graphrank", "item_mentions_named", "wall"),
    ("  entity weights", "memory.retrieval.graphrank", "entity_weights", "wall"),
    ("  entity neighbours", "memory.retrieval.graphrank", "_entity_neighbours", "wall"),
    ("  waits for reads beside", "memory.retrieval.graphrank", "Beside.result", "wall"),
    ("  support (PageRank solve)", "memory.retrieval.graphrank", "support", "wall"),
    ("  chain pool", "memory.retrieval.graphrank", "Pool", "wall"),
    ("  asserted links", "memory.retrieval.graphrank", "asserted_links", "wall"),
    ("  chain walk", "memory.retrieval.graphrank", "walk_back", "wall"),
]


class Layers:
    """Wraps each of ``layers`` (LAYERS, or PHASES) for the duration of a with block,
    summing the time of its clock spent inside it (outermost entry per thread only;
    wall-clock layers on the caller's thread only), and counts statements and the
    database's CPU."""

    def __init__(self, layers: list[tuple[str, str, str, str]] = LAYERS) -> None:
        import importlib
        import threading

        self.layers = layers
        self.totals: dict[str, float] = {label: 0.0 for label, *_ in layers}
        self.patches: list[tuple[object, str, object]] = []
        self.depth = threading.local()
        self.statements = 0
        self.counter_statements = 0
        self.importlib = importlib

    def _wrap(self, label: str, func: object, clock: str) -> object:
        import functools
        import threading

        timer = {"thread": time.thread_time, "process": time.process_time, "wall": time.perf_counter}[clock]
        layers = self
        caller = threading.get_ident()

        @functools.wraps(func)  # type: ignore[arg-type]
        def timed(*args: object, **kwargs: object) -> object:
            if clock == "wall" and threading.get_ident() != caller:  # a read beside the call
                return func(*args, **kwargs)  # type: ignore[operator]
            depth = getattr(layers.depth, label, 0)
            setattr(layers.depth, label, depth + 1)
            began = timer()
            try:
                return func(*args, **kwargs)  # type: ignore[operator]
            finally:
                setattr(layers.depth, label, depth)
                if depth == 0:
                    layers.totals[label] += timer() - began

        return timed

    def _database_cpu(self) -> float:
        import psutil
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
            pids = [row[0] for row in cursor.fetchall()]
        total = 0.0
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                times = psutil.Process(pid).cpu_times()
                total += times.user + times.system
        return total

    def __enter__(self) -> Layers:
        from django.db import connection

        from core.counters import DatabaseCounterCache

        for label, module_name, path, clock in self.layers:
            owner: object = self.importlib.import_module(module_name)
            *outer, attr = path.split(".")
            for part in outer:
                owner = getattr(owner, part)
            original = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
            self.patches.append((owner, attr, original))
            setattr(owner, attr, self._wrap(label, original, clock))
        # Where the counters' statements run (older versions: _execute).
        name = "_cursor" if hasattr(DatabaseCounterCache, "_cursor") else "_execute"
        cursor = getattr(DatabaseCounterCache, name)
        self.patches.append((DatabaseCounterCache, name, cursor))

        def counted(cache: object, *args: object) -> object:
            self.counter_statements += 1
            return cursor(cache, *args)

        setattr(DatabaseCounterCache, name, counted)

        def count(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
            self.statements += 1
            return execute(sql, params, many, context)

        self.hook = connection.execute_wrapper(count)
        self.hook.__enter__()
        self.database_before = self._database_cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        self.database_after = self._database_cpu()
        self.hook.__exit__(None, None, None)
        for owner, attr, original in reversed(self.patches):
            setattr(owner, attr, original)

    def report(self, calls: int) -> None:
        wall = any(clock == "wall" for *_, clock in self.layers)
        what = "wall time on the request's thread" if wall else "CPU"
        print(f"   {what} per call, by layer (ms; nested layers are part of the one above):")
        for label, total in self.totals.items():
            if total:
                print(f"   {label:<38} {total * 1000 / calls:7.2f}")
        database = (self.database_after - self.database_before) * 1000 / calls
        print(f"   {'database backends (all statements)':<38} {database:7.2f}")
        print(
            f"   statements per call: {self.statements / calls:.1f} on Django's connection, "
            f"{self.counter_statements / calls:.1f} on the counters' connection"
        )


class Statements:
    """Wall time of every statement on Django's connection, by shape (its first 100
    characters, white space folded), while the block runs."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.count: dict[str, int] = {}

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            shape = " ".join(sql.split())[:100]
            self.seconds[shape] = self.seconds.get(shape, 0.0) + time.perf_counter() - began
            self.count[shape] = self.count.get(shape, 0) + 1

    def __enter__(self) -> Statements:
        from django.db import connection

        self.wrapping = connection.execute_wrapper(self)
        self.wrapping.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wrapping.__exit__(*exc)

    def report(self, calls: int) -> None:
        total = sum(self.seconds.values()) * 1000 / calls
        print(f"  statements: {sum(self.count.values()) / calls:.1f} per call, {total:.1f} ms per call")
        for shape, seconds in sorted(self.seconds.items(), key=lambda kv: -kv[1])[:20]:
            print(f"  {seconds * 1000 / calls:7.2f} ms  x{self.count[shape] / calls:4.1f}  {shape}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=parse_size, default=parse_size("10k"))
    parser.add_argument("--calls", default="recall,graph,discover,trace")
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--html", help="also write the last profile as HTML here")
    parser.add_argument("--no-profile", action="store_true", help="time only")
    parser.add_argument("--layers", action="store_true", help="CPU time per layer, statements per call")
    parser.add_argument("--statements", action="store_true", help="wall time per call of each statement")
    parser.add_argument(
        "--phases", action="store_true", help="wall time per call of each step of the graph-aware rank"
    )
    parser.add_argument(
        "--warm", type=int, default=1, help="distinct calls of each kind before the measured ones (1)"
    )
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
    # The loaded facts only, in a fixed order: facts an ingest or load phase adds (no
    # causal edges) would otherwise take their place in a later run's sample.
    loaded = MemoryItem.objects.filter(agent=agent, provenance__via="bench").order_by("pk")
    ids = [str(pk) for pk in loaded.values_list("pk", flat=True)[:500]]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {secret}", HTTP_HOST="127.0.0.1")
    prefix = f"/v1/memory/agents/{agent.pk}"
    counter = iter(range(10**9))

    def query() -> str:
        return f"what happened in incident {next(counter) * 7 % max(1, args.size // 3)}"

    def remember() -> dict[str, object]:
        return {"content": f"The billing service had incident {next(counter)} today.", "user_id": "u1"}

    calls = {
        "recall": lambda: ("/recall", {"query": query(), "top_k": 8}),
        "remember": lambda: ("/memories", remember()),
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
        for _ in range(args.warm):
            path, body = calls[name]()
            client.post(prefix + path, body, content_type="application/json")
        with CaptureQueriesContext(connection) as captured:
            response = client.post(prefix + path, body | {"query": query()} if "query" in body else body,
                                   content_type="application/json")  # fmt: skip
        assert response.status_code == 200, response.content[:300]
        # Read now: every request the loop below makes clears Django's query log.
        sql_ms = sum(float(q["time"]) for q in captured.captured_queries) * 1000
        one_call = len(captured.captured_queries)
        layers = Layers() if args.layers else Layers(PHASES) if args.phases else None
        profiler = None
        if not args.no_profile:
            from pyinstrument import Profiler

            profiler = Profiler(interval=0.0005)
            profiler.start()
        took = []
        shapes = Statements() if args.statements else None
        with layers or contextlib.nullcontext(), shapes or contextlib.nullcontext():
            for _ in range(args.repeat):
                path, body = calls[name]()
                began = time.perf_counter()
                client.post(prefix + path, body, content_type="application/json")
                took.append((time.perf_counter() - began) * 1000)
        print(
            f"\n== {name}: p50 {statistics.median(took):.1f} ms, mean {statistics.mean(took):.1f} ms; "
            f"{one_call} statements, {sql_ms:.1f} ms in the driver (one call)"
        )
        if layers is not None:
            layers.report(args.repeat)
        if shapes is not None:
            shapes.report(args.repeat)
        if profiler is not None:
            profiler.stop()
            print(profiler.output_text(unicode=False, color=False, show_all=False))
            if args.html:
                Path(args.html).with_suffix(f".{name}.html").write_text(profiler.output_html())
    print(f"machine: {describe()}")


if __name__ == "__main__":
    main()
