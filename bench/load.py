"""Load: remember and recall over HTTP against the production server setup on loopback.

    .venv/bin/python bench/load.py                          # levels 1,4,16 for 20 s each
    .venv/bin/python bench/load.py --levels 1,8,32 --seconds 30

Starts what production runs (daphne serving fedmem_site.asgi, a Celery worker,
Redis as broker and Channels layer) against a database of its own
(FEDMEM_DB_NAME, default ``fedmem_load``), creates a tenant, an agent and its key,
then at each concurrency level runs closed-loop clients for a bounded time, each
alternating a remember (POST /memories) and a recall (POST /recall). Prints per
level and operation: requests/s, p50/p95/p99 latency and error rate. Redis must
listen on 127.0.0.1:6379 (or pass --redis). Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

from machine import describe

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")
os.environ.setdefault("FEDMEM_DB_NAME", "fedmem_load")
os.environ.setdefault("FEDMEM_LOG_LEVEL", "WARNING")

TOPICS = ["billing", "search", "checkout", "auth", "reports", "payments", "inventory", "alerts"]


def _free_port() -> int:
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


async def _client(http, base: str, agent_id: str, until: float, out: dict[str, list], errors: dict[str, int]):
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
            body = {"query": f"what happened to {topic}?", "user_id": "u1", "top_k": 5}
        began = time.perf_counter()
        try:
            response = await http.post(base + path, json=body)
            ok = response.status_code < 400
        except Exception:
            ok = False
        out[op].append((time.perf_counter() - began) * 1000)
        if not ok:
            errors[op] += 1


async def _level(base: str, secret: str, agent_id: str, clients: int, seconds: float) -> dict:
    import httpx

    out: dict[str, list] = {"remember": [], "recall": []}
    errors = {"remember": 0, "recall": 0}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {secret}"}
    async with httpx.AsyncClient(headers=headers, timeout=60, limits=limits) as http:
        until = time.monotonic() + seconds
        began = time.monotonic()
        await asyncio.gather(*(_client(http, base, agent_id, until, out, errors) for _ in range(clients)))
        elapsed = time.monotonic() - began
    return {"elapsed": elapsed, "out": out, "errors": errors}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--levels", default="1,4,16", help="concurrent clients per level (default 1,4,16)")
    parser.add_argument("--seconds", type=float, default=20.0, help="duration of each level (default 20)")
    parser.add_argument("--redis", default=os.environ.get("FEDMEM_LOAD_REDIS", "redis://127.0.0.1:6379/13"))
    args = parser.parse_args()

    env = dict(os.environ)
    env.update(
        CELERY_BROKER_URL=args.redis,
        REDIS_URL=args.redis,
        # Rate limiting protects production; the load run measures the server, not the limiter.
        FEDMEM_API_RATE_LIMIT="1000000/minute",
    )
    # The server's connections come from a bounded pool unless the caller says otherwise.
    env.setdefault("FEDMEM_DB_POOL_SIZE", "16")
    os.environ.update(env)
    agent_id, secret = _setup()
    port = _free_port()
    log_dir = ROOT / "var" / "load"
    log_dir.mkdir(parents=True, exist_ok=True)
    serve = [
        sys.executable,
        "-m",
        "daphne",
        "-b",
        "127.0.0.1",
        "-p",
        str(port),
        "fedmem_site.asgi:application",
    ]
    work = [sys.executable, "-m", "celery", "-A", "fedmem_site", "worker", "--loglevel", "WARNING"]
    server = subprocess.Popen(  # noqa: S603  (our own interpreter and modules)
        serve, cwd=ROOT, env=env, stdout=(log_dir / "server.log").open("w"), stderr=subprocess.STDOUT
    )
    worker = subprocess.Popen(  # noqa: S603
        [*work, "--concurrency", "1"],
        cwd=ROOT,
        env=env,
        stdout=(log_dir / "worker.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        import httpx

        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit(f"server did not start; see {log_dir / 'server.log'}")
            time.sleep(0.5)
        # Warm the model in the server process before measuring.
        asyncio.run(_level(base, secret, agent_id, 1, 3))
        print(f"machine: {describe()}")
        print(
            f"server: daphne fedmem_site.asgi + celery worker + {args.redis}; {args.seconds:.0f} s per level"
        )
        print(
            f"{'clients':>7} {'op':>8} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'errors':>7}"
        )
        for clients in [int(x) for x in args.levels.split(",")]:
            result = asyncio.run(_level(base, secret, agent_id, clients, args.seconds))
            for op, values in result["out"].items():
                rate = len(values) / result["elapsed"]
                err = result["errors"][op] / max(1, len(values))
                print(
                    f"{clients:>7} {op:>8} {rate:>8.1f} {_percentile(values, 0.5):>8.1f} "
                    f"{_percentile(values, 0.95):>8.1f} {_percentile(values, 0.99):>8.1f} {err:>6.1%}"
                )
            total = sum(map(len, result["out"].values()))
            print(f"{clients:>7} {'total':>8} {total / result['elapsed']:>8.1f}")
    finally:
        for proc in (server, worker):
            proc.terminate()
        for proc in (server, worker):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
