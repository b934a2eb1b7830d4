"""Run fedmem on one machine: migrations, demo data, web server and Celery worker.

Set-up (migrations, the ONNX export, the demo tenant) runs in a child process
(`fedmem_setup`), so this supervisor never holds a model.

Ctrl-C (or SIGTERM) stops the children and then this process, which holds the
embedded PostgreSQL handle last, so the database shuts down cleanly too.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from core.database import prune_dead_handles
from core.env import env_int, env_str


def default_web_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def web_command(python: str, options: dict[str, Any]) -> list[str]:
    """One ASGI server process per core: request handling is Python under the GIL,
    so a single process serializes every request on one core however many threads
    it has. uvicorn forks ``--web-workers`` processes onto one listening socket."""
    host, port = options["host"], str(options["port"])
    # uvicorn kills a worker that does not answer its supervisor's ping within the
    # timeout (5 s by default). A worker loading its models on a busy machine can
    # miss that and is then killed and restarted over and over, never serving.
    healthcheck = str(env_int("FEDMEM_WEB_HEALTHCHECK_TIMEOUT", 120, minimum=1))
    if options["web_workers"] == 1:
        # daphne, answering oversized request lines and headers (414/431)
        return [python, "-m", "fedmem_site.serve", "-b", host, "-p", port, "fedmem_site.asgi:application"]
    return [
        python, "-m", "uvicorn", "fedmem_site.asgi:application", "--host", host, "--port", port,
        "--workers", str(options["web_workers"]), "--no-access-log", "--lifespan", "off",
        "--http", "fedmem_site.http_protocol:NoDelayH11Protocol",
        # uvicorn kills a worker that misses a 5 s health ping; a worker holding the
        # GIL in a batch's personal-data detection on a busy machine misses it, and
        # the kill drops every request it was serving (seen: a restart loop under
        # load average 20). A hung worker is still replaced, just not a busy one
        # (FEDMEM_WEB_HEALTHCHECK_TIMEOUT).
        "--timeout-worker-healthcheck", healthcheck,
    ]  # fmt: skip


def web_env() -> dict[str, str]:
    env = os.environ.copy()
    # Each web process takes its connections from a small pool (requests beyond it
    # wait instead of opening more); the pool bounds the connection count.
    env.setdefault("FEDMEM_DB_POOL_SIZE", "8")
    return env


# A worker that exits on its own (a crash, the OOM killer) is started again, so one bad
# message or task does not take the web server down with it; one that keeps exiting
# (more than RESTARTS times within RESTART_WINDOW seconds) stops fedmem, as a broken
# set-up should. The web server is not restarted here: uvicorn replaces its own
# processes, and daphne exiting means the port or the settings are wrong.
RESTARTS = 5
RESTART_WINDOW = 60.0


class Supervised:
    """One child process of fedmem_run and the times it exited on its own."""

    def __init__(self, name: str, start: Callable[[], subprocess.Popen[bytes]], *, restart: bool) -> None:
        self.name = name
        self.start = start
        self.restart = restart
        self.exits: list[float] = []
        self.process = start()

    def may_restart(self, now: float) -> bool:
        """Count an exit at ``now``; True while restarts stay within the budget."""
        self.exits = [t for t in self.exits if now - t < RESTART_WINDOW] + [now]
        return self.restart and len(self.exits) <= RESTARTS


class Command(BaseCommand):
    help = "Migrate, seed the demo tenant, and run the web server and a Celery worker together."

    def set_up(self, *, no_demo: bool) -> dict[str, Any] | None:
        """`fedmem_setup` in a child process: the models it loads leave with it, and
        this process, which stays up as long as the server, keeps only Django."""
        with tempfile.TemporaryDirectory(prefix="fedmem-setup-") as tmp:
            out = Path(tmp) / "demo.json"
            command = [sys.executable, "manage.py", "fedmem_setup", "--demo-out", str(out)]
            if no_demo:
                command.append("--no-demo")
            done = subprocess.run(command, cwd=settings.BASE_DIR, check=False)  # noqa: S603 - our own argv
            if done.returncode:
                raise CommandError(f"fedmem_setup failed with exit code {done.returncode}")
            demo: dict[str, Any] | None = json.loads(out.read_text())
            return demo

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=env_str("FEDMEM_HOST", "127.0.0.1"))
        parser.add_argument(
            "--port", type=int, default=env_int("FEDMEM_PORT", 8000, minimum=1, maximum=65535)
        )
        parser.add_argument("--no-demo", action="store_true", help="do not create the demo tenant")
        parser.add_argument(
            "--concurrency", type=int, default=env_int("FEDMEM_WORKER_CONCURRENCY", 2, minimum=1)
        )
        parser.add_argument(
            "--web-workers",
            type=int,
            default=env_int("FEDMEM_WEB_WORKERS", default_web_workers(), minimum=1, maximum=64),
            help="web server processes (default: one per core, up to 4)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        demo = self.set_up(no_demo=options["no_demo"])
        python = sys.executable
        beat_schedule = str(settings.DATA_DIR / "celerybeat-schedule")

        def start_worker() -> subprocess.Popen[bytes]:
            return subprocess.Popen(  # noqa: S603 - fixed argv, our own interpreter
                [
                    python,
                    "-m",
                    "celery",
                    "-A",
                    "fedmem_site",
                    "worker",
                    "--loglevel",
                    "INFO",
                    "--concurrency",
                    str(options["concurrency"]),
                    "--beat",
                    "--schedule",
                    beat_schedule,
                ],
                env=os.environ.copy(),
                # Its own process group, so a worker that outlives the grace period
                # (a long task finishing its warm shutdown) is killed with its pool
                # children instead of leaving them orphaned. Ctrl-C still stops it:
                # this process forwards SIGTERM below.
                start_new_session=True,
            )

        def start_web() -> subprocess.Popen[bytes]:
            return subprocess.Popen(web_command(python, options), env=web_env())  # noqa: S603

        children = {
            "worker": Supervised("worker", start_worker, restart=True),
            "web": Supervised("web", start_web, restart=False),
        }
        url = f"http://{options['host']}:{options['port']}/"
        self.stdout.write(self.style.SUCCESS(f"\nfedmem is starting at {url}  (API docs: {url}v1/docs)"))
        if demo:
            self.stdout.write("Demo logins (username / password / role):")
            for username, info in demo["users"].items():
                self.stdout.write(f"  {username:<14} {info['password']:<16} {info['role']}")
            self.stdout.write("Demo agent keys:")
            for name, info in demo["agents"].items():
                self.stdout.write(f"  {name:<14} {info['key']}")
        self.stdout.write("Press Ctrl-C to stop.\n")

        stopping = False

        def stop(signum: int, frame: Any) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            while not stopping:
                for child in children.values():
                    code = child.process.poll()
                    if code is None:
                        continue
                    if child.may_restart(time.monotonic()):
                        self.stderr.write(f"{child.name} exited with code {code}; starting it again")
                        # A dead worker's pool children (its own process group) go first.
                        with contextlib.suppress(ProcessLookupError):
                            os.killpg(child.process.pid, signal.SIGKILL)
                        child.process = child.start()
                    else:
                        self.stderr.write(f"{child.name} exited with code {code}; stopping fedmem")
                        stopping = True
                time.sleep(0.5)
        finally:
            for child in children.values():
                if child.process.poll() is None:
                    child.process.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 20
            for name, supervised in children.items():
                process = supervised.process
                try:
                    process.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                if name == "worker":
                    # Anything left in the worker's group (a pool child still busy
                    # after its parent was killed) goes too.
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
            if settings.EMBEDDED_DATABASE:
                # Children that died by signal left their handle behind; drop them so
                # this process, exiting last, stops the embedded PostgreSQL.
                prune_dead_handles(settings.DATA_DIR / "pgdata")
            self.stdout.write("fedmem stopped.")
