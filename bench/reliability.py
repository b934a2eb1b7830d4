"""Reliability of the default server: connections stay flat, interrupted extraction settles.

    .venv/bin/python bench/reliability.py                    # 10,000 requests + restart drill
    .venv/bin/python bench/reliability.py --requests 1000 --no-drill

Starts fedmem exactly as `make run` does (`manage.py fedmem_run`, no settings, its
embedded PostgreSQL and Celery worker) in a data folder of its own on loopback,
then:

1. drives it with one sequential client for ``--requests`` requests, a mix of
   batch writes, recalls, answers, list pages and console pages, and prints the
   errors and the server's database connections (``pg_stat_activity``) before and
   after;
2. (the drill) stops the worker's intake with extraction still queued and some of it
   waiting for a retry, restarts fedmem, and waits until no item is ``pending``.

Not a test: it prints figures and exits non-zero when a promise is broken
(errors, connection growth, items left pending). ``core/tests/test_reliability.py``
runs a shorter version in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    """``manage.py fedmem_run`` in its own data folder (what `make run` starts)."""

    data_dir: Path
    port: int
    extra_env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 240) -> str:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("FEDMEM_", "DATABASE_URL", "CELERY_"))
        }
        env.update(
            DJANGO_SETTINGS_MODULE="fedmem_site.settings.base",
            FEDMEM_DATA_DIR=str(self.data_dir),
            FEDMEM_LOG_LEVEL="WARNING",
            **self.extra_env,
        )
        env.pop("REDIS_URL", None)
        self.log = self.data_dir / "run.log"
        self.proc = subprocess.Popen(  # noqa: S603 - our own interpreter and command
            [sys.executable, "manage.py", "fedmem_run", "--port", str(self.port), "--concurrency", "1"],
            cwd=ROOT,
            env=env,
            stdout=self.log.open("a"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{self.base}/ready", timeout=2) as response:  # noqa: S310
                    if json.load(response)["status"] == "ready":
                        break
            except (OSError, ValueError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"fedmem did not start:\n{self.log.read_text()[-4000:]}")
            time.sleep(0.5)
        while " ready." not in self.log.read_text():  # the Celery worker
            if time.monotonic() > deadline:
                raise RuntimeError(f"the worker did not start:\n{self.log.read_text()[-4000:]}")
            time.sleep(0.5)
        return self.log.read_text()

    def stop(self) -> None:
        if self.proc is None:
            return
        os.killpg(self.proc.pid, signal.SIGINT)  # Ctrl-C
        try:
            self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None


def demo_key(log: str, agent: str = "support-bot") -> str:
    match = re.search(rf"^\s+{re.escape(agent)}\s+(\S+)\s*$", log, re.MULTILINE)
    if match is None:
        raise RuntimeError("no demo key in fedmem_run's output")
    return match.group(1)


def psql(data_dir: Path, query: str, params: list | None = None) -> list[tuple]:
    """Ask the embedded PostgreSQL of ``data_dir`` directly, as its superuser."""
    import psycopg

    lines = (data_dir / "pgdata" / "postmaster.pid").read_text().splitlines()
    with psycopg.connect(
        host=lines[4], port=lines[3], user="postgres", dbname="fedmem", autocommit=True
    ) as conn:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if cursor.description else []


def connection_slack() -> int:
    """Connections the default server may open after its first request: a handful (the
    worker child's extraction connection, the pool filling to serve the probe) and, in
    each web process, up to ``FEDMEM_DB_SIDE_READS`` (default 3) that its pool keeps for
    the reads run beside a request (core.beside). Growth beyond that is a leak."""
    sys.path.insert(0, str(ROOT))
    from core.management.commands.fedmem_run import default_web_workers

    return 4 + default_web_workers() * int(os.environ.get("FEDMEM_DB_SIDE_READS", "3"))


def server_connections(data_dir: Path) -> int:
    """Client connections of fedmem's processes (this probe's own excluded)."""
    rows = psql(
        data_dir,
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
    )
    return int(rows[0][0])


def process_memory(server: Server) -> dict[str, int]:
    """Resident memory (MiB) of the server's processes by role: the supervisor
    (`fedmem_run`), the web processes, the Celery worker with its pool, and the
    embedded PostgreSQL (shared buffers count once per backend there, so the web and
    worker figures are the ones that show a leak)."""
    import psutil

    assert server.proc is not None
    roles = {"supervisor": 0, "web": 0, "worker": 0, "postgres": 0}
    root = psutil.Process(server.proc.pid)
    family = [root, *root.children(recursive=True)]
    postmaster = server.data_dir / "pgdata" / "postmaster.pid"
    with contextlib.suppress(OSError, psutil.NoSuchProcess):
        database = psutil.Process(int(postmaster.read_text().split()[0]))
        family += [database, *database.children(recursive=True)]
    for process in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            command = " ".join(process.cmdline())
            if "postgres" in command:
                role = "postgres"
            elif "celery" in command:
                role = "worker"
            elif "fedmem_run" in command:
                role = "supervisor"
            else:
                role = "web"  # uvicorn and the processes it spawned
            roles[role] += process.memory_info().rss
    return {role: rss // 2**20 for role, rss in roles.items()}


class Client:
    def __init__(self, base: str, key: str) -> None:
        self.base = base
        self.key = key
        self.errors: dict[str, int] = {}
        self.count = 0

    def call(self, method: str, path: str, body: object = None, *, auth: bool = True) -> object:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if auth:
            headers["Authorization"] = f"Bearer {self.key}"
        request = urllib.request.Request(  # noqa: S310 - loopback only
            self.base + path, data=data, method=method, headers=headers
        )
        self.count += 1
        try:
            with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - loopback
                raw = response.read()
                if response.status >= 400:
                    raise urllib.error.HTTPError(
                        request.full_url, response.status, "", response.headers, None
                    )
                return (
                    json.loads(raw)
                    if raw and response.headers.get_content_type() == "application/json"
                    else raw
                )
        except urllib.error.HTTPError as exc:
            key = f"{method} {re.sub(r'[0-9a-f-]{36}', '<id>', path)} -> {exc.code}"
            self.errors[key] = self.errors.get(key, 0) + 1
        except OSError as exc:
            key = f"{method} {path} -> {exc.__class__.__name__}"
            self.errors[key] = self.errors.get(key, 0) + 1
        return None


def sequential(server: Server, key: str, total: int) -> dict[str, object]:
    client = Client(server.base, key)
    me = client.call("GET", "/v1/me")
    agent = me["principal"]["id"]  # type: ignore[index]
    prefix = f"/v1/memory/agents/{agent}"
    topics = ["billing", "search", "checkout", "auth", "reports", "payments", "inventory", "alerts"]
    before = server_connections(server.data_dir)
    peak = before
    began = time.monotonic()
    n = 0
    # Memory after the first tenth (models loaded, caches warm) against the end: growth
    # past the warm-up is what a long-running server would keep accumulating.
    warm: dict[str, int] | None = None
    while client.count < total:
        topic = topics[n % len(topics)]
        step = n % 6
        if step == 0:
            items = [
                {"content": f"The {topic} service failed because disk {n}-{i} filled up.", "scope": "agent"}
                for i in range(5)
            ]
            client.call("POST", f"{prefix}/memories/batch", {"items": items})
        elif step == 1:
            client.call("POST", f"{prefix}/recall", {"query": f"why did {topic} fail", "top_k": 5})
        elif step == 2:
            client.call("POST", f"{prefix}/answer", {"query": f"Why did {topic} fail?"})
        elif step == 3:
            client.call("GET", f"{prefix}/memories?limit=20")
        elif step == 4:
            client.call("POST", f"{prefix}/memories/search", {"query": topic})
        else:
            client.call("GET", "/health", auth=False)
        n += 1
        if n % 100 == 0:
            peak = max(peak, server_connections(server.data_dir))
        if warm is None and client.count >= max(total // 10, 1):
            warm = process_memory(server)
    elapsed = time.monotonic() - began
    time.sleep(2)  # let the worker finish the last extraction it took
    after = server_connections(server.data_dir)
    return {
        "requests": client.count,
        "errors": sum(client.errors.values()),
        "error_kinds": client.errors,
        "connections_before": before,
        "connections_peak": max(peak, after),
        "connections_after": after,
        "memory_mib_after_warmup": warm,
        "memory_mib_after": process_memory(server),
        "seconds": round(elapsed, 1),
    }


def pending_count(data_dir: Path) -> int:
    return int(psql(data_dir, "SELECT count(*) FROM memory_item WHERE extraction_status = 'pending'")[0][0])


def restart_drill(server: Server, key: str, *, items: int = 40, timeout: float = 300) -> dict[str, object]:
    """Queued and retrying extraction survive a restart: nothing stays pending."""
    client = Client(server.base, key)
    agent = client.call("GET", "/v1/me")["principal"]["id"]  # type: ignore[index]
    prefix = f"/v1/memory/agents/{agent}"
    batch = [
        {"content": f"Release {i} slipped because the build farm was down.", "scope": "agent"}
        for i in range(items)
    ]
    client.call("POST", f"{prefix}/memories/batch", {"items": batch})
    # Half of the items carry a first failure, as items waiting for their retry do.
    # Stopping the worker loses such retries (a countdown is held in the worker's
    # memory; the filesystem broker keeps no unacknowledged message), and wiping the
    # broker folder loses what was still queued: the worst a restart can leave.
    psql(
        server.data_dir,
        "UPDATE memory_item SET extraction_error = 'OperationalError: too many clients already' "
        "WHERE id IN (SELECT id FROM memory_item WHERE extraction_status = 'pending' "
        "ORDER BY created_at LIMIT %s)",
        [items // 2],
    )
    queued_before = pending_count(server.data_dir)
    server.stop()  # mid-flight: queued messages and held retries
    # What a crash or a broker loss leaves: the messages are gone, the items pending.
    for sub in ("queue", "processed"):
        for path in (server.data_dir / "broker" / sub).glob("*"):
            path.unlink()
    began = time.monotonic()
    server.start()
    while (left := pending_count(server.data_dir)) and time.monotonic() - began < timeout:
        time.sleep(2)
    return {
        "pending_before_restart": queued_before,
        "pending_after_restart": left,
        "settled_in_seconds": round(time.monotonic() - began, 1),
        "errors": sum(client.errors.values()),
    }


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from machine import describe

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--no-drill", action="store_true", help="skip the restart drill")
    parser.add_argument("--data-dir", help="data folder (default: a fresh temporary one)")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if not 1 <= args.requests <= 50_000:
        parser.error("--requests must be between 1 and 50,000")
    print(describe())
    with tempfile.TemporaryDirectory(prefix="fedmem-reliability-") as tmp:
        data_dir = Path(args.data_dir or tmp).resolve()
        data_dir.mkdir(parents=True, exist_ok=True)
        # A short sweep bound, so the drill settles in minutes rather than the default's.
        server = Server(
            data_dir,
            args.port or free_port(),
            {"FEDMEM_EXTRACTION_SWEEP_SECONDS": "15", "FEDMEM_EXTRACTION_STALE_SECONDS": "10"},
        )
        key = demo_key(server.start())
        broken = False
        try:
            figures = sequential(server, key, args.requests)
            print(json.dumps({"sequential": figures}, indent=2))
            allowed = int(figures["connections_before"]) + connection_slack()
            grew = max(int(figures["connections_after"]), int(figures["connections_peak"])) > allowed
            broken |= bool(figures["errors"]) or grew
        finally:
            server.stop()
        if not args.no_drill:
            # A server of its own: the load's extraction backlog would only measure
            # the worker's throughput.
            drill_dir = data_dir / "drill"
            drill_dir.mkdir(parents=True, exist_ok=True)
            server = Server(drill_dir, free_port(), server.extra_env)
            try:
                drill = restart_drill(server, demo_key(server.start()))
            finally:
                server.stop()
            print(json.dumps({"restart_drill": drill}, indent=2))
            broken |= bool(drill["pending_after_restart"])
    print("FAILED" if broken else "OK")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
