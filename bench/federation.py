"""Federated recall overhead and the hung-source bound.

Six local engines (fedmem's ``custom`` HTTP protocol on 127.0.0.1) answer after
fixed latencies. The whole path is measured — guarded egress client, adapter,
fan-out, fusion:

1. each engine alone, ``--iterations`` times → its p95;
2. all six federated, ``--iterations`` times → federated p95;
   overhead = federated p95 - slowest engine's p95 (goal <= 10 ms);
3. five engines plus one that never answers, timeout ``--timeout-ms`` →
   every answer must be ``partial`` within timeout + 50 ms.

The engines run in a separate process (as real engines would), so their request
handling does not compete with fedmem's threads for one interpreter lock.

Run: ``.venv/bin/python bench/federation.py [--iterations 100]``. It starts the
embedded PostgreSQL (settings import) but never touches it. Local servers only,
bound to 127.0.0.1; every loop is bounded and the server process stops on exit.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import describe

from providers.tests.servers import LocalServer, Resp

LATENCIES_MS = (5, 10, 20, 30, 40, 50)


def engine_server(latency_ms: float, hung: bool = False) -> LocalServer:
    server = LocalServer(max_seconds=600).start()
    records = [
        {
            "id": f"{latency_ms}-{i}",
            "kind": "fact",
            "text": f"fact {i} shared",
            "score": 1.0 / (i + 1),
        }
        for i in range(10)
    ]

    def recall(req):
        server.sleep(30 if hung else latency_ms / 1000)
        return Resp(200, {"results": records[: req.json["top_k"]]})

    server.route("POST", "/recall", recall)
    return server


def serve(conn: Any) -> None:
    """Child process: start the engines, send their URLs, stop when told (or after 10 minutes)."""
    servers = [engine_server(latency) for latency in LATENCIES_MS] + [engine_server(0, hung=True)]
    conn.send([server.url for server in servers])
    conn.poll(600)
    for server in servers:
        server.stop()


def source(url: str, name: str) -> Any:
    from providers import federation
    from providers.adapters.base import EngineConfig, OperationContext
    from providers.adapters.custom import HttpCustomAdapter

    config = EngineConfig(
        engine_id=name,
        provider="custom",
        base_url=url,
        timeout_seconds=35.0,
        allow_development_hosts=True,
    )
    ctx = OperationContext(operation="recall", tenant_id="bench", tenant_slug="bench", agent_id="bench-agent")
    return federation.AdapterSource(HttpCustomAdapter(config), ctx)


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def timed(sources: list[Any], timeout_ms: int) -> tuple[float, dict]:
    from providers import federation

    started = time.perf_counter()
    result = federation.federated_recall(sources, query="shared fact", top_k=10, timeout_ms=timeout_ms)
    return (time.perf_counter() - started) * 1000, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--timeout-ms", type=int, default=200)
    args = parser.parse_args()
    iterations = max(10, min(args.iterations, 1000))

    parent, child = multiprocessing.get_context("spawn").Pipe()
    process = multiprocessing.get_context("spawn").Process(target=serve, args=(child,), daemon=True)
    process.start()
    if not parent.poll(60):
        raise SystemExit("the engine process did not start")
    *urls, hung_url = parent.recv()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")
    os.environ.setdefault("FEDMEM_ENGINES_ALLOW_HTTP", "1")  # the bench engines are plain HTTP on loopback
    os.environ.setdefault("FEDMEM_LOG_LEVEL", "WARNING")
    import django

    django.setup()
    try:
        sources = [
            source(url, f"engine-{latency}ms") for url, latency in zip(urls, LATENCIES_MS, strict=True)
        ]
        for _ in range(5):  # warm up connections, imports, thread pools
            timed(sources, 5000)

        alone: dict[str, float] = {}
        for one in sources:
            alone[one.engine_id] = p95([timed([one], 5000)[0] for _ in range(iterations)])
        together = []
        for _ in range(iterations):
            elapsed, result = timed(sources, 5000)
            assert result["status"] == "ok", result["sources"]
            together.append(elapsed)
        slowest = max(alone.values())
        federated = p95(together)

        with_hung = [*sources[:5], source(hung_url, "engine-hung")]
        hung_runs = []
        for _ in range(max(10, iterations // 5)):
            elapsed, result = timed(with_hung, args.timeout_ms)
            assert result["status"] == "partial", result["status"]
            assert result["sources"][-1]["status"] == "timed_out"
            hung_runs.append(elapsed)
    finally:
        parent.send("stop")
        process.join(10)
        if process.is_alive():
            process.terminate()

    bound = args.timeout_ms + 50
    median = statistics.median(together)
    worst = max(hung_runs)
    print(f"machine: {describe()}")
    print(f"iterations: {iterations} (hung-source runs: {len(hung_runs)})")
    for name, value in alone.items():
        print(f"  {name:>16} alone p95: {value:7.2f} ms")
    overhead = federated - slowest
    print(f"federated (6 sources) p95: {federated:7.2f} ms, median {median:7.2f} ms")
    print(f"overhead = federated p95 - slowest source p95 = {overhead:6.2f} ms (goal <= 10 ms)")
    hung_p95 = p95(hung_runs)
    print(f"hung source, timeout {args.timeout_ms} ms: partial every time; p95 {hung_p95:7.2f} ms,")
    print(f"  max {worst:7.2f} ms (bound {bound} ms) -> {'OK' if worst <= bound else 'OVER'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
