"""Every performance figure in one run, next to its goal and the bare baselines.

    .venv/bin/python bench/run_all.py --size 100k          # the figures docs/performance.md carries
    .venv/bin/python bench/run_all.py --size 10k --only latency,load
    .venv/bin/python bench/run_all.py --legacy             # the older per-benchmark scripts instead

One run, in order (each phase can be picked with ``--only``):

1. **baselines**: the bare models on this machine, now: one query through ONNX
   Runtime and through PyTorch, a batch through ONNX Runtime (texts/s), the spaCy
   parse (texts/s), one 16 KB text's parse and its personal-data detection, and
   an HTTP round trip to ``/health`` of the server below.
2. **data**: ``--size`` facts bulk-loaded with ``COPY`` and real embeddings
   (``bench/loader.py``; embeddings cached under ``var/bench/``), into a database of
   its own (``fedmem_bench_<size>``), unless that many are already there.
3. **latency**: the default server (``manage.py fedmem_run``, exactly what ``make
   run`` starts) on a free port, one client, through HTTP, every query distinct
   (so each pays its embedding): recall, graph recall, discover, trace from an
   item and from text; p50/p95 of the calls after the first ``WARM_CALLS`` of each
   kind, whose p50 and max are printed apart (a started server fills its caches and
   prepares its statements on its first calls).
4. **explain**: every SQL statement of one recall, graph recall, discover and
   trace at this size with ``EXPLAIN (ANALYZE, BUFFERS)``, written to
   ``var/bench/explain-<size>.txt`` (docs/performance.md keeps a snapshot).
5. **ingest**: fresh facts through the batch endpoint until extraction has
   settled (no item pending), in facts/s, against the bare ONNX batch rate, the
   ceiling one embedding and one spaCy parse per fact leave on this machine's
   cores, and the server's CPU per fact (web, worker, database; what carries over
   from a busy machine); with ``--profile``, then ``bench/ingest.py``'s per-stage profile of the web write
   path and the extraction task, in this process.
6. **load**: ``bench/load.py``'s remember/recall mix against the same server at
   1, 4 and 16 clients.
7. **quality**: ``bench/eval_reasoning.py`` with the PyTorch and the ONNX
   runtime, and the largest difference of its figures.

Ends with one table: figure, value, goal, met or not, and the ratio to the bare
baseline where one applies, under the machine and its load average at start and
end. On a shared machine the ratios are what carry over. Not a test: it asserts
nothing.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")
os.environ.setdefault("FEDMEM_LOG_LEVEL", "WARNING")

from bench.machine import describe  # noqa: E402

PHASES = ("baselines", "data", "latency", "explain", "ingest", "load", "quality")
INGEST_FACTS = 600
QUERIES = 150
# Calls of each kind after the server starts, timed and reported apart (latency).
WARM_CALLS = 20


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def parse_size(text: str) -> int:
    match = re.fullmatch(r"(\d+)([kK]?)", text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"size like 100k or 5000, not {text!r}")
    return int(match.group(1)) * (1000 if match.group(2) else 1)


class Figures:
    """The rows of the final table, in the order they were measured."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str, str]] = []

    def add(self, name: str, value: float, unit: str, goal: str = "", ratio: str = "") -> None:
        met = ""
        if goal:
            op, bound = goal.split(" ", 1)
            limit = float(bound.split()[0])
            met = "yes" if (value <= limit if op == "<=" else value >= limit) else "no"
        shown = f"{value:.1f} {unit}" if value >= 10 or unit != "ms" else f"{value:.2f} {unit}"
        self.rows.append((name, shown, goal and f"{goal}", met, ratio))
        print(
            f"  {name}: {shown}"
            + (f" (goal {goal}: {met})" if goal else "")
            + (f"; {ratio}" if ratio else "")
        )

    def note(self, name: str, text: str) -> None:
        self.rows.append((name, text, "", "", ""))
        print(f"  {name}: {text}")


def timed(call: Any, count: int) -> list[float]:
    out = []
    for i in range(count):
        began = time.perf_counter()
        call(i)
        out.append((time.perf_counter() - began) * 1000)
    return out


# --- phases ------------------------------------------------------------------------


def baselines(figures: Figures, base: dict[str, float]) -> None:
    from bench.graph import generate
    from memory.embeddings import load_embedder
    from memory.extraction.nlp import get_nlp
    from memory.pii import detect_personal_data

    print("\n== baselines (bare models, this machine, now)")
    onnx = load_embedder("onnx")
    torch = load_embedder("torch")
    for embedder, name in ((onnx, "onnx"), (torch, "torch")):
        embedder.embed(["warm up"])
        ms = timed(lambda i, e=embedder: e.embed([f"what happened in incident {i} to checkout?"]), 100)
        base[f"query_{name}"] = statistics.median(ms)
        goal = "<= 5 ms" if name == "onnx" else ""
        ratio = f"onnx is {base['query_torch'] / base['query_onnx']:.1f}x faster" if name == "torch" else ""
        figures.add(f"query embedding, {name} (bare model), p50", statistics.median(ms), "ms", goal, ratio)
    texts = [f.text for f in generate(512, seed=5)]
    began = time.perf_counter()
    onnx.embed(texts)
    base["batch_onnx"] = len(texts) / (time.perf_counter() - began)
    figures.add("bare batch embedding, onnx", base["batch_onnx"], "texts/s")
    nlp = get_nlp()
    list(nlp.pipe(texts[:32]))
    began = time.perf_counter()
    list(nlp.pipe(texts, batch_size=64))
    base["parse"] = len(texts) / (time.perf_counter() - began)
    figures.add("bare spaCy parse", base["parse"], "texts/s")
    long = (" ".join(texts) + " Maria Gonzalez wrote to maria@example.org. ")[:16384]
    began = time.perf_counter()
    nlp(long)
    parse_ms = (time.perf_counter() - began) * 1000
    figures.add("bare spaCy parse of one 16 KB text", parse_ms, "ms")
    began = time.perf_counter()
    detect_personal_data([long + " "])  # a new text: not the parse just made
    pii_ms = (time.perf_counter() - began) * 1000
    figures.add(
        "personal-data detection of one 16 KB text (parse included)",
        pii_ms,
        "ms",
        "<= 1000 ms",
        f"{pii_ms / parse_ms:.1f}x the bare parse",
    )


def data(size: int) -> tuple[Any, Any]:
    from bench.graph import generate
    from bench.loader import VERSION, build_indexes, load
    from governance.models import Agent, User
    from governance.services.agents import agent_create
    from governance.services.tenancy import tenant_get_or_create
    from memory.models import MemoryItem

    print(f"\n== data: {size:,} facts")
    owner, _ = User.objects.get_or_create(username="bench-owner")
    tenant = tenant_get_or_create(slug=f"bench-{size}", name=f"bench {size}")
    agent = Agent.objects.filter(tenant=tenant, name="bench-agent").first() or agent_create(
        tenant=tenant, name="bench-agent", created_by=owner
    )
    # Only the loaded facts count (the load phase adds memories of its own), and only
    # those the current loader wrote.
    loaded = MemoryItem.objects.filter(tenant=tenant, provenance__via="bench", provenance__loader=VERSION)
    have = loaded.count()
    if have == size:
        print(f"  {size:,} facts already loaded")
        build_indexes()
    else:
        cost = load(tenant, agent, generate(size, seed=7))
        print(
            "  loaded {facts:,.0f} facts, {edges:,.0f} edges, {links:,.0f} span links, "
            "{entities:,.0f} entities in {total_seconds:.0f} s (embedding {embed_seconds:.0f} s{cached}, "
            "parse summaries {parse_seconds:.0f} s, COPY {copy_seconds:.0f} s, "
            "indexes {index_seconds:.0f} s)".format(
                **cost, cached=" (cached)" if cost["embed_cached"] else ""
            )
        )
    return tenant, agent


def api_key(tenant: Any, agent: Any) -> str:
    from governance.models import ApiKey
    from governance.services.agents import MAX_ACTIVE_KEYS, api_key_create, api_key_revoke

    # Each run makes a key of its own; the oldest earlier bench keys make room (an
    # agent holds at most MAX_ACTIVE_KEYS active ones).
    earlier = ApiKey.objects.active().filter(agent=agent, name__startswith="bench-").order_by("created_at")
    for key in list(earlier)[: max(0, earlier.count() - MAX_ACTIVE_KEYS + 1)]:
        api_key_revoke(key=key, actor=None)
    _, secret = api_key_create(tenant=tenant, agent=agent, name=f"bench-{int(time.time())}")
    return secret


class Server:
    """``manage.py fedmem_run`` with its defaults (what ``make run`` starts)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = ROOT / "var" / "bench" / f"server-{port}.log"

    def __enter__(self) -> Server:
        from bench.load import wait_ready

        self.log.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        # The API rate limit protects a deployment; this run measures the server.
        env["FEDMEM_API_RATE_LIMIT"] = "1000000/minute"
        self.proc = subprocess.Popen(  # noqa: S603 - our own interpreter and command
            [sys.executable, "manage.py", "fedmem_run", "--no-demo", "--port", str(self.port)],
            cwd=ROOT,
            env=env,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )
        proc = self.proc
        if wait_ready(self.base, lambda: proc.poll() is None):
            return self
        self.__exit__()
        raise SystemExit(f"the server did not start; see {self.log}")

    def __exit__(self, *exc: object) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def latency(
    figures: Figures, base: dict[str, float], server: Server, agent: Any, secret: str, size: int
) -> None:
    import httpx

    from memory.models import MemoryItem

    print(f"\n== latency at {size:,} facts: HTTP, one client, embedding included")
    prefix = f"{server.base}/v1/memory/agents/{agent.pk}"
    # The loaded facts only, in a fixed order: facts an ingest or load phase adds (no
    # causal edges) would otherwise take their place in a later run's sample.
    loaded = MemoryItem.objects.filter(agent=agent, provenance__via="bench").order_by("pk")
    ids = [str(pk) for pk in loaded.values_list("pk", flat=True)[:5000]]
    rng = random.Random(17)
    incidents = max(1, size // 3)
    with httpx.Client(headers={"Authorization": f"Bearer {secret}"}, timeout=60) as http:

        def post(path: str, body: dict[str, Any]) -> None:
            response = http.post(prefix + path, json=body)
            if response.status_code >= 400:
                raise SystemExit(f"{path}: {response.status_code} {response.text[:300]}")

        health = timed(lambda i: http.get(server.base + "/health"), 50)
        base["http"] = statistics.median(health)
        figures.add("HTTP round trip (/health), p50", base["http"], "ms")
        # Distinct queries (an incident number each): the query cache never answers
        # (a small size has fewer incidents than calls: its numbers come round again).
        numbers = rng.sample(range(incidents), min(incidents, 6 * (QUERIES + WARM_CALLS)))
        asked = itertools.cycle(numbers)

        def query() -> str:
            return f"what happened in incident {next(asked)}"

        post("/recall", {"query": "warm up", "top_k": 8})
        cases = [
            ("recall", 50, lambda i: post("/recall", {"query": query(), "top_k": 8})),
            ("graph recall", 80, lambda i: post("/recall", {"query": query(), "top_k": 8, "mode": "graph"})),
            ("discover", 80, lambda i: post("/discover", {"query": query()})),
            ("trace from an item", 30,
             lambda i: post("/trace", {"item_id": rng.choice(ids), "direction": "causes"})),
            ("trace from text", 0, lambda i: post("/trace", {"content": query(), "direction": "effects"})),
        ]  # fmt: skip
        for name, goal, call in cases:
            # The first calls after the server starts are timed apart: they fill each
            # web process's caches and each connection's prepared statements, which a
            # running server has, and would otherwise be most of the p95 of a run this
            # short (two processes, five custom plans per statement and connection).
            cold = timed(call, WARM_CALLS)
            ms = timed(call, QUERIES)
            p50, p95 = percentile(ms, 0.5), percentile(ms, 0.95)
            figures.add(
                f"{name}, p95 (p50 {p50:.1f} ms)",
                p95,
                "ms",
                f"<= {goal} ms" if goal else "",
                f"{p95 / base['query_onnx']:.0f}x a bare query embedding, {p95 / base['http']:.0f}x /health",
            )
            figures.note(
                f"{name}, its first {WARM_CALLS} calls after start (not in the p95 above)",
                f"p50 {percentile(cold, 0.5):.1f} ms, max {max(cold):.1f} ms",
            )


def explain(size: int, agent: Any, secret: str) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) of every statement of one call of each kind, made
    in this process through the same URLs (Django's test client), so the plans are
    the ones the server runs."""
    from django.db import connection, transaction
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from memory.models import MemoryItem

    print(f"\n== explain at {size:,} facts")
    item = str(MemoryItem.objects.filter(agent=agent).values_list("pk", flat=True).first())
    client = Client(HTTP_AUTHORIZATION=f"Bearer {secret}", HTTP_HOST="127.0.0.1")
    prefix = f"/v1/memory/agents/{agent.pk}"
    calls = {
        "recall": ("/recall", {"query": "what happened in incident 4242", "top_k": 8}),
        "graph recall": ("/recall", {"query": "what happened in incident 4243", "top_k": 8, "mode": "graph"}),
        "discover": ("/discover", {"query": "what happened in incident 4244"}),
        "trace from an item": ("/trace", {"item_id": item, "direction": "causes"}),
    }
    out = [f"# EXPLAIN (ANALYZE, BUFFERS) at {size:,} facts; {describe()}\n"]
    for name, (path, body) in calls.items():
        with CaptureQueriesContext(connection) as captured:
            client.post(prefix + path, body, content_type="application/json")
        statements = [
            q["sql"]
            for q in captured.captured_queries
            if q["sql"].lstrip().upper().startswith(("SELECT", "WITH"))
        ]
        out.append(f"\n## {name}: {len(captured.captured_queries)} statements, {len(statements)} read\n")
        # The call's own settings (HNSW breadth, iterative scans) apply to its plans.
        settings_sql = [
            q["sql"] for q in captured.captured_queries if q["sql"].lstrip().upper().startswith("SET ")
        ]
        out.append("".join(f"\n    {sql}" for sql in settings_sql) + "\n")
        for sql in statements:
            # ANALYZE runs the statement (recall's stamps last_recalled_at): rolled back.
            with transaction.atomic(), connection.cursor() as cursor:
                for setting in settings_sql:
                    cursor.execute(setting)
                cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
                plan = [row[0] for row in cursor.fetchall()]
                transaction.set_rollback(True)
            took = next((line for line in plan if line.startswith("Execution Time")), "")
            out.append(f"\n```sql\n{sql[:1500]}\n```\n```\n" + "\n".join(plan) + "\n```\n")
            print(f"  {name}: {took:<28} {sql[:90]!r}")
    path = ROOT / "var" / "bench" / f"explain-{size}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)  # a fresh checkout has no var/
    path.write_text("".join(out), encoding="utf-8")
    print(f"  plans written to {path}")


def ingest(figures: Figures, base: dict[str, float], server: Server) -> None:
    import httpx

    from bench.graph import generate
    from bench.load import cpu_seconds, cpu_since, server_processes
    from governance.models import User
    from governance.services.agents import agent_create
    from governance.services.tenancy import tenant_get_or_create
    from memory.embeddings import load_embedder
    from memory.extraction.nlp import get_nlp
    from memory.models import MemoryItem

    print(f"\n== ingest: {INGEST_FACTS} facts through the batch endpoint, until extraction settles")
    owner, _ = User.objects.get_or_create(username="bench-owner")
    # A tenant of its own per run: span linking reads the tenant's earlier edges, so
    # a shared one grew with every run and made later runs slower (database CPU per
    # fact 16.5 -> 25.5 ms over four runs at 100k).
    run = time.time_ns()
    tenant = tenant_get_or_create(slug=f"bench-ingest-{run}", name=f"bench ingest {run}")
    agent = agent_create(tenant=tenant, name=f"ingest-{run}", created_by=owner)
    secret = api_key(tenant, agent)
    stamp = int(time.time())
    texts = [f"{f.text[:-1]} (run {stamp})." for f in generate(INGEST_FACTS, seed=stamp % 1000)]
    embedder = load_embedder("onnx")  # loaded before the clock starts
    embedder.embed(texts[:8])

    def bare_rate() -> float:
        began = time.perf_counter()
        embedder.embed(texts)
        return len(texts) / (time.perf_counter() - began)

    # Before and after the phase; the better of the two is the machine's rate (the
    # server's Celery children may still be loading their models during the first).
    bare_before = bare_rate()
    prefix = f"{server.base}/v1/memory/agents/{agent.pk}"
    pid = server.proc.pid if server.proc else None
    cpu_before = cpu_seconds(server_processes(pid))
    with httpx.Client(headers={"Authorization": f"Bearer {secret}"}, timeout=300) as http:
        began = time.perf_counter()
        for start in range(0, len(texts), 100):
            items = [
                {"content": t, "scope": "agent", "session_id": f"s{start}"}
                for t in texts[start : start + 100]
            ]
            response = http.post(prefix + "/memories/batch", json={"items": items})
            if response.status_code >= 400:
                raise SystemExit(f"batch: {response.status_code} {response.text[:300]}")
        written = time.perf_counter() - began
        deadline = time.monotonic() + 900
        while MemoryItem.objects.filter(agent=agent, extraction_status="pending").exists():
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        settled = time.perf_counter() - began
    parts = cpu_since(cpu_before, pid)
    bare = max(bare_before, bare_rate())
    done = MemoryItem.objects.filter(agent=agent, extraction_status="done").count()
    figures.add("batch writes through HTTP (written)", len(texts) / written, "facts/s")
    rate = done / settled
    figures.add(
        "ingest until extraction settled",
        rate,
        "facts/s",
        "",
        f"ratio {rate / bare:.2f} to the bare ONNX batch ({bare:.0f} texts/s, same texts, the better of "
        f"before and after; goal >= 0.6)"
        + (f"; {rate / base['parse']:.2f} to one bare spaCy parse" if "parse" in base else ""),
    )
    # The most any ingest could reach here: a fact's own embedding and one spaCy parse
    # (personal data, entities, causal rules and the contradiction check all read it),
    # the process CPU each costs per text on these texts, spread over every core, and
    # nothing else (no span embeddings, no SQL, no HTTP).
    began = time.process_time()
    embedder.embed(texts)
    embed_cpu = (time.process_time() - began) / len(texts)
    nlp = get_nlp()
    began = time.process_time()
    list(nlp.pipe(texts, batch_size=64))
    parse_cpu = (time.process_time() - began) / len(texts)
    ceiling = (os.cpu_count() or 1) / (embed_cpu + parse_cpu)
    figures.add(
        "ingest ceiling: one embedding and one parse per fact, nothing else",
        ceiling,
        "facts/s",
        "",
        f"ratio {ceiling / bare:.2f} to the bare ONNX batch; CPU per text: embedding "
        f"{embed_cpu * 1000:.2f} ms, parse {parse_cpu * 1000:.2f} ms, on {os.cpu_count()} cores",
    )
    # What carries over from a busy machine: the server's CPU per fact, by part (the
    # polling above runs in this process, not the server's).
    count, cpu = max(1, done), max(sum(parts.values()), 1e-9)
    split = ", ".join(f"{part} {value * 1000 / count:.1f}" for part, value in parts.items())
    figures.add(
        "ingest: server CPU per fact",
        cpu * 1000 / count,
        "ms",
        "",
        f"{split}; {(os.cpu_count() or 1) * count / cpu:.0f} facts/s on idle cores",
    )


def load_mix(figures: Figures, server: Server, agent: Any, secret: str, seconds: float) -> None:
    from bench.load import run_level, warm

    print("\n== load: remember/recall mix, closed-loop clients")
    print(f"{'clients':>7} {'op':>8} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'errors':>7}")
    warm(server.base, secret, str(agent.pk))
    rates = {}
    for clients in (1, 4, 16):
        # With the server's pid, the CPU of its web and worker processes is counted too.
        pid = server.proc.pid if server.proc else None
        result = run_level(server.base, secret, str(agent.pk), clients, seconds, server_pid=pid)
        rates[clients] = result
    r16 = rates[16]
    figures.add("load: req/s at 1 client", rates[1]["rate"], "req/s")
    figures.add(
        "load: req/s at 4 clients",
        rates[4]["rate"],
        "req/s",
        "",
        f"{rates[4]['rate'] / rates[1]['rate']:.2f}x 1 client",
    )
    figures.add("load: req/s at 16 clients", r16["rate"], "req/s", ">= 60 req/s")
    figures.add("load: p95 at 16 clients", r16["p95"], "ms", "<= 300 ms")
    figures.add("load: errors at 16 clients", float(r16["errors"]), "", "<= 0 errors")


def quality(figures: Figures) -> None:
    print("\n== quality: bench/eval_reasoning.py, PyTorch and ONNX runtimes")
    results: dict[str, dict[str, list[float]]] = {}
    for runtime in ("torch", "onnx"):
        env = dict(
            os.environ, FEDMEM_EMBEDDING_RUNTIME=runtime, FEDMEM_DB_NAME=f"fedmem_bench_eval_{runtime}"
        )
        done = subprocess.run(  # noqa: S603
            [sys.executable, str(HERE / "eval_reasoning.py")], cwd=ROOT, env=env, capture_output=True,
            text=True, timeout=900, check=False,
        )  # fmt: skip
        rows = {}
        for line in done.stdout.splitlines():
            match = re.match(
                r"(vector \(baseline\)|graph recall|discover)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)",
                line,
            )
            if match:
                rows[match.group(1)] = [float(x) for x in match.groups()[1:]]
        results[runtime] = rows
        print(f"  {runtime}: " + "; ".join(f"{k} {v}" for k, v in rows.items()) or done.stderr[-300:])
    if results["torch"] and results["onnx"]:
        delta = max(
            abs(a - b)
            for method, values in results["torch"].items()
            for a, b in zip(values, results["onnx"].get(method, values), strict=True)
        )
        # A row of a markdown table: no pipes in the name.
        figures.add("eval_reasoning: largest difference onnx / torch of its figures", delta, "", "<= 0.01")
    else:
        figures.note("eval_reasoning", "did not run; see its output above")


def table(figures: Figures, started: str, size: int) -> None:
    print(f"\nmachine at start: {started}\nmachine at end:   {describe()}\nfacts: {size:,}\n")
    print("| figure | value | goal | met | against the bare baseline |")
    print("|---|---|---|---|---|")
    for name, value, goal, met, ratio in figures.rows:
        print(f"| {name} | {value} | {goal or '-'} | {met or '-'} | {ratio or '-'} |")


def legacy(only: str | None, timeout: float) -> None:
    plan = {
        "recall": ["--items", "2000", "--recalls", "100", "--writes", "200"],
        "graph": ["--items", "200", "--queries", "30"],
        "federation": ["--iterations", "30"],
        "erasure": [],
        "eval_reasoning": [],
        "load": ["--levels", "1,4,16", "--seconds", "10"],
    }
    for name in only.split(",") if only else list(plan):
        print(f"\n=== {name} {' '.join(plan.get(name, []))}", flush=True)
        subprocess.run(  # noqa: S603
            [sys.executable, str(HERE / f"{name}.py"), *plan.get(name, [])],
            cwd=ROOT,
            timeout=timeout,
            check=False,
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=parse_size, default=parse_size("10k"), help="facts (10k, 100k, ...)")
    parser.add_argument("--only", help="comma-separated phases from: " + ", ".join(PHASES))
    parser.add_argument("--load-seconds", type=float, default=15.0, help="seconds per load level (15)")
    parser.add_argument("--port", type=int, default=0, help="server port (default: a free one)")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="ingest: also time each stage in this process (bench/ingest.py)",
    )
    parser.add_argument("--legacy", action="store_true", help="run the older per-benchmark scripts")
    parser.add_argument("--timeout", type=float, default=900, help="legacy: seconds per benchmark")
    args = parser.parse_args()
    if args.legacy:
        legacy(args.only, args.timeout)
        return
    phases = args.only.split(",") if args.only else list(PHASES)
    unknown = set(phases) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases: {', '.join(sorted(unknown))}")
    os.environ.setdefault("FEDMEM_DB_NAME", f"fedmem_bench_{args.size}")

    import django

    django.setup()
    from django.core.management import call_command

    from bench.load import free_port

    started = describe()
    print(f"machine: {started}")
    call_command("migrate", verbosity=0)
    figures = Figures()
    base: dict[str, float] = {}
    if "baselines" in phases or "latency" in phases:
        baselines(figures, base)
    tenant, agent = data(args.size)
    secret = api_key(tenant, agent)
    if "explain" in phases:
        explain(args.size, agent, secret)
    if {"latency", "ingest", "load"} & set(phases):
        with Server(args.port or free_port()) as server:
            if "latency" in phases:
                latency(figures, base, server, agent, secret, args.size)
            if "ingest" in phases:
                ingest(figures, base, server)
            if "load" in phases:
                load_mix(figures, server, agent, secret, args.load_seconds)
    if "ingest" in phases and args.profile:
        from bench.ingest import profile

        rates = profile(400)
        figures.add(
            "ingest profile, in-process (web + extraction)",
            rates["both"],
            "facts/s",
            "",
            f"ratio {rates['both'] / rates['embed']:.2f} to the bare ONNX batch "
            f"({rates['embed']:.0f} texts/s)",
        )
    if "quality" in phases:
        quality(figures)
    table(figures, started, args.size)


if __name__ == "__main__":
    main()
