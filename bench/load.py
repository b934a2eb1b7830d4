"""Load: remember and recall over HTTP against the production server setup on loopback.

    .venv/bin/python bench/load.py                          # levels 1,4,16 for 20 s each
    .venv/bin/python bench/load.py --levels 1,8,32 --seconds 30
    .venv/bin/python bench/load.py --recall-mode graph       # recalls through the graph-aware rank

Starts what ``make run`` starts (``manage.py fedmem_run`` with its defaults: the
web server and a Celery worker) against a database of its own (FEDMEM_DB_NAME,
default ``fedmem_load``), creates a tenant, an agent and its key, then at each
concurrency level runs closed-loop clients for a bounded time, each alternating a
remember (POST /memories) and a recall (POST /recall). Prints per level and
operation: requests/s, p50/p95/p99 latency and error rate, and per level the
clients' connections each web process holds at its end and the CPU
time the server's processes (web, worker, PostgreSQL) spent per request: on a
machine shared with other work the rate is bounded by the share of the cores the
server gets, the CPU per request is not. ``bench/run_all.py``
runs the same levels against its server at 100k facts. Not a test: it asserts
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from machine import describe

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")
os.environ.setdefault("FEDMEM_DB_NAME", "fedmem_load")
os.environ.setdefault("FEDMEM_LOG_LEVEL", "WARNING")

TOPICS = ["billing", "search", "checkout", "auth", "reports", "payments", "inventory", "alerts"]


# Consecutive 200s from GET /ready before a run starts: the web processes share one
# socket, so a streak this long has, in practice, heard from each of them.
READY_STREAK = 12


def wait_ready(base: str, alive: Callable[[], bool], timeout: float = 300) -> bool:
    """Wait until the server at ``base`` is ready, its web processes' warm-up included
    (``/ready`` answers 503 "models": "loading" until then; measured before it, /health
    took tens of ms while the models loaded beside it). False when it died or timed out."""
    import httpx

    deadline = time.monotonic() + timeout
    streak = 0
    while time.monotonic() < deadline and alive():
        try:
            streak = streak + 1 if httpx.get(base + "/ready", timeout=5).status_code == 200 else 0
        except httpx.HTTPError:
            streak = 0
        if streak >= READY_STREAK:
            return True
        time.sleep(0.05 if streak else 0.5)
    return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _setup() -> tuple[str, str]:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from governance.models import Role, User
    from governance.services.agents import agent_create, api_key_create
    from governance.services.tenancy import membership_grant, tenant_get_or_create

    tenant = tenant_get_or_create(slug="load", name="Load")
    user, _ = User.objects.get_or_create(username="load-admin")
    membership_grant(user=user, tenant=tenant, role=Role.TENANT_ADMIN)
    agent = agent_create(tenant=tenant, name=f"load-{int(time.time())}", created_by=user)
    _, secret = api_key_create(tenant=tenant, agent=agent, name="load")
    return str(agent.pk), secret


async def _client(
    http, base: str, agent_id: str, until: float, out: dict[str, list], errors: dict[str, int], mode: str
):
    rng = random.Random()
    n = 0
    while time.monotonic() < until:
        n += 1
        topic = rng.choice(TOPICS)
        if n % 2:
            op, path = "remember", f"/v1/memory/agents/{agent_id}/memories"
            body = {
                "content": f"The {topic} service had incident {rng.randrange(10**6)} today.",
                "user_id": "u1",
            }
        else:
            op, path = "recall", f"/v1/memory/agents/{agent_id}/recall"
            body = {"query": f"what happened to {topic}?", "user_id": "u1", "top_k": 5, "mode": mode}
        began = time.perf_counter()
        try:
            response = await http.post(base + path, json=body)
            ok = response.status_code < 400
        except Exception:
            ok = False
        out[op].append((time.perf_counter() - began) * 1000)
        if not ok:
            errors[op] += 1


def web_connections(server_pid: int | None, port: int) -> list[int]:
    """The clients' connections each web process holds now, most first. uvicorn's
    workers share one listening socket, and the first to wake accepts everything
    waiting: kept-alive connections opened together can all land in one process."""
    import psutil

    counts = []
    for process in server_processes(server_pid):
        with contextlib.suppress(psutil.NoSuchProcess):
            command = " ".join(process.cmdline())
            if _part(command) != "web":
                continue
            held = [
                c
                for c in process.net_connections(kind="tcp")
                if c.status == psutil.CONN_ESTABLISHED and c.laddr and c.laddr.port == port
            ]
            if held or "spawn_main" in command:  # a web worker (uvicorn spawns them) holding none counts too
                counts.append(len(held))
    return sorted(counts, reverse=True)


async def _level(
    base: str, secret: str, agent_id: str, clients: int, seconds: float, mode: str, server_pid: int | None
) -> dict:
    import httpx

    out: dict[str, list] = {"remember": [], "recall": []}
    errors = {"remember": 0, "recall": 0}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {secret}"}
    async with httpx.AsyncClient(headers=headers, timeout=60, limits=limits) as http:
        until = time.monotonic() + seconds
        began = time.monotonic()
        tasks = [_client(http, base, agent_id, until, out, errors, mode) for _ in range(clients)]
        await asyncio.gather(*tasks)
        elapsed = time.monotonic() - began
        # Read while the pool still holds its connections.
        spread = web_connections(server_pid, httpx.URL(base).port or 80)
    return {"elapsed": elapsed, "out": out, "errors": errors, "spread": spread}


def warm(base: str, secret: str, agent_id: str, timeout: float = 300) -> None:
    """One remember and one recall answered, so every model is loaded in the
    server processes before a level is timed (a first request can take seconds)."""
    import httpx

    headers = {"Authorization": f"Bearer {secret}"}
    deadline = time.monotonic() + timeout
    prefix = f"{base}/v1/memory/agents/{agent_id}"
    # A new connection each time (no keep-alive), so the requests spread over
    # every web process of the server.
    for _ in range(8):
        httpx.post(
            prefix + "/memories",
            json={"content": "Warm-up: the billing service is fine.", "user_id": "u1"},
            headers=headers,
            timeout=timeout,
        )
        httpx.post(
            prefix + "/recall", json={"query": "warm up", "user_id": "u1"}, headers=headers, timeout=timeout
        )
        if time.monotonic() > deadline:
            break


def settle(agent_id: str, timeout: float = 600) -> None:
    """After the last level: how many remembers still wait for their extraction, and
    how fast the worker clears them with no requests coming in (each remember is an
    extraction task of its own, so this is the worker's task rate)."""
    from memory.models import MemoryItem

    def pending() -> int:
        return MemoryItem.objects.filter(agent_id=agent_id, extraction_status="pending").count()

    backlog = pending()
    began = time.monotonic()
    left = backlog
    while left and time.monotonic() - began < timeout:
        time.sleep(0.5)
        left = pending()
    seconds = time.monotonic() - began
    rate = f", {(backlog - left) / seconds:.1f}/s" if backlog and seconds else ""
    print(f"extraction backlog after the last level: {backlog}, {left} left after {seconds:.1f} s{rate}")


def server_processes(server_pid: int | None) -> list:
    """The server's processes: fedmem_run and its children (web processes, worker)
    and the embedded PostgreSQL of this data folder with its backends."""
    import psutil

    found = []
    if server_pid is not None:
        with contextlib.suppress(psutil.NoSuchProcess):
            root = psutil.Process(server_pid)
            found = [root, *root.children(recursive=True)]
    from django.conf import settings

    pgdata = str((settings.DATA_DIR / "pgdata").resolve())
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if "-D" in cmdline and pgdata in cmdline:
            with contextlib.suppress(psutil.NoSuchProcess):
                found += [process, *process.children(recursive=True)]
    return found


def _part(command: str) -> str:
    """Which part of the server a process of :func:`server_processes` is, by its command line."""
    return "database" if "postgres" in command else "worker" if "celery" in command else "web"


def cpu_seconds(processes: list) -> dict[int, tuple[str, float]]:
    """CPU seconds so far per process, with its part: web, worker or database. A
    process's own time and that of its children that have exited (reaped): the
    PostgreSQL backends of closed connections and the autovacuum workers are gone by
    the second reading, and their time is the postmaster's from then on."""
    import psutil

    out = {}
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = process.cpu_times()
            part = _part(" ".join(process.cmdline()))
            out[process.pid] = (part, times.user + times.system + times.children_user + times.children_system)
    return out


def cpu_since(before: dict[int, tuple[str, float]], server_pid: int | None) -> dict[str, float]:
    """CPU seconds the server's parts (web, worker, database) spent since ``before``
    (a :func:`cpu_seconds` reading). Processes started meanwhile count from zero. A
    process gone since counts through the parent that reaped it, with its whole
    life's time: what it had spent at ``before`` is taken off again."""
    after = cpu_seconds(server_processes(server_pid))
    parts: dict[str, float] = {"web": 0.0, "worker": 0.0, "database": 0.0}
    for pid, (part, value) in after.items():
        parts[part] += value - before.get(pid, (part, 0.0))[1]
    for pid, (part, value) in before.items():
        if pid not in after:
            parts[part] -= value
    return parts


def run_level(
    base: str,
    secret: str,
    agent_id: str,
    clients: int,
    seconds: float,
    quiet: bool = False,
    server_pid: int | None = None,
    mode: str = "hybrid",
) -> dict:
    """One level: print its rows and return the total rate, p95 over every request,
    the error count and the server's CPU time per request (what carries over from a
    busy machine: the cores' time it takes, whoever else wants them)."""
    before = cpu_seconds(server_processes(server_pid))
    result = asyncio.run(_level(base, secret, agent_id, clients, seconds, mode, server_pid))
    parts = cpu_since(before, server_pid)
    cpu = sum(parts.values())
    everything: list[float] = []
    for op, values in result["out"].items():
        everything.extend(values)
        rate = len(values) / result["elapsed"]
        err = result["errors"][op] / max(1, len(values))
        if not quiet:
            print(
                f"{clients:>7} {op:>8} {rate:>8.1f} {_percentile(values, 0.5):>8.1f} "
                f"{_percentile(values, 0.95):>8.1f} {_percentile(values, 0.99):>8.1f} {err:>6.1%}"
            )
    total = len(everything) / result["elapsed"]
    cpu_ms = cpu * 1000 / max(1, len(everything))
    if not quiet:
        count = max(1, len(everything))
        split = ", ".join(f"{part} {value * 1000 / count:.1f}" for part, value in parts.items())
        print(
            f"{clients:>7} {'total':>8} {total:>8.1f} {'':>8} {_percentile(everything, 0.95):>8.1f} "
            f"{'':>8} {'':>6}  server CPU {cpu_ms:.1f} ms/request ({split}; "
            f"{(os.cpu_count() or 1) * 1000 / cpu_ms if cpu_ms else float('nan'):.0f} req/s on idle cores)"
        )
        if result["spread"]:
            held = " / ".join(str(n) for n in result["spread"])
            print(f"{'':>7} {'':>8} the clients' connections per web process: {held}")
    return {
        "rate": total,
        "p95": _percentile(everything, 0.95),
        "errors": sum(result["errors"].values()),
        "cpu_ms": cpu_ms,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--levels", default="1,4,16", help="concurrent clients per level (default 1,4,16)")
    parser.add_argument("--seconds", type=float, default=20.0, help="duration of each level (default 20)")
    parser.add_argument("--port", type=int, default=0, help="server port (default: a free one)")
    parser.add_argument(
        "--recall-mode",
        choices=("hybrid", "graph"),
        default="hybrid",
        help="the recalls' mode: hybrid (default) or graph (the graph-aware rank and its side reads)",
    )
    args = parser.parse_args()

    # Rate limiting protects production; the load run measures the server, not the limiter.
    os.environ["FEDMEM_API_RATE_LIMIT"] = "1000000/minute"
    agent_id, secret = _setup()
    port = args.port or free_port()
    log_dir = ROOT / "var" / "load"
    log_dir.mkdir(parents=True, exist_ok=True)
    # Exactly what `make run` starts, with its defaults: whatever makes it fast
    # has to be the default, not a setting of this script.
    server = subprocess.Popen(  # noqa: S603  (our own interpreter and command)
        [sys.executable, "manage.py", "fedmem_run", "--no-demo", "--port", str(port)],
        cwd=ROOT,
        env=dict(os.environ),
        stdout=(log_dir / "server.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        if not wait_ready(base, lambda: server.poll() is None):
            raise SystemExit(f"server did not start; see {log_dir / 'server.log'}")
        warm(base, secret, agent_id)
        print(f"machine: {describe()}")
        print(
            f"server: manage.py fedmem_run (the make run defaults); {args.seconds:.0f} s per level; "
            f"recall mode {args.recall_mode}"
        )
        print(
            f"{'clients':>7} {'op':>8} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'errors':>7}"
        )
        for clients in [int(x) for x in args.levels.split(",")]:
            run_level(
                base, secret, agent_id, clients, args.seconds, server_pid=server.pid, mode=args.recall_mode
            )
        settle(agent_id)
        print(f"machine at end: {describe()}")
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
