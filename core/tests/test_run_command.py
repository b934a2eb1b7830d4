"""`manage.py fedmem_run` (what `make run` starts): everything up, then a clean Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from core.tests.datadir import with_onnx_export

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.worker
def test_run_serves_console_and_worker_then_stops_cleanly_on_ctrl_c(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FEDMEM_", "DATABASE_URL", "CELERY_"))}
    # Its own data folder: its own embedded PostgreSQL, broker and demo data.
    env.update(
        DJANGO_SETTINGS_MODULE="fedmem_site.settings.base", FEDMEM_DATA_DIR=str(with_onnx_export(tmp_path))
    )
    log = (tmp_path / "run.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "fedmem_run", "--port", str(port), "--concurrency", "1"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2) as response:
                    assert json.load(response)["status"] == "ready"
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((tmp_path / "run.log").read_text()) from None
                time.sleep(0.5)
        output = (tmp_path / "run.log").read_text()
        assert f"http://127.0.0.1:{port}/" in output
        assert "admin" in output and "security_officer" in output and "support-bot" in output
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=5) as response:
            assert b'name="username"' in response.read()
        while (
            "celery@" not in (tmp_path / "run.log").read_text()
            or " ready." not in (tmp_path / "run.log").read_text()
        ):
            assert time.monotonic() < deadline, (tmp_path / "run.log").read_text()
            time.sleep(0.5)
        family = [proc.pid] + [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
        # Set-up ran in a child: the supervisor, up as long as the server, holds no model.
        libraries = {Path(m.path).name for m in psutil.Process(proc.pid).memory_maps()}
        assert not {name for name in libraries if "torch" in name or "onnxruntime" in name}
    finally:
        # Ctrl-C in a terminal signals the whole foreground process group.
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
    assert proc.returncode == 0, (tmp_path / "run.log").read_text()
    time.sleep(1)
    survivors = [pid for pid in family if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    assert survivors == []
    # The embedded PostgreSQL of that data folder stopped too.
    assert not (tmp_path / "pgdata" / "postmaster.pid").exists()
    assert "fedmem stopped." in (tmp_path / "run.log").read_text()


def test_the_web_server_runs_one_process_per_core_by_default():
    from core.management.commands.fedmem_run import default_web_workers, web_command, web_env

    options = {"host": "127.0.0.1", "port": 8000, "web_workers": 2}
    command = web_command("python", options)
    assert command[:3] == ["python", "-m", "uvicorn"]
    assert command[command.index("--workers") + 1] == "2"
    # A worker busy loading its models on a loaded machine is not killed as hung.
    assert int(command[command.index("--timeout-worker-healthcheck") + 1]) >= 60
    # One process: daphne (fedmem_site.serve, which answers over-long request lines), as before.
    assert web_command("python", {**options, "web_workers": 1})[:3] == ["python", "-m", "fedmem_site.serve"]
    assert 1 <= default_web_workers() <= 4
    assert web_env()["FEDMEM_DB_POOL_SIZE"]  # each web process serves from a bounded pool


def test_a_worker_that_exits_is_started_again_until_it_keeps_exiting():
    from core.management.commands.fedmem_run import RESTART_WINDOW, RESTARTS, Supervised

    started = []

    def start():
        # A real child that exits at once with an error, like a crashed worker.
        process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
        started.append(process)
        return process

    worker = Supervised("worker", start, restart=True)
    assert worker.process.wait(timeout=30) == 3
    now = time.monotonic()
    assert [worker.may_restart(now + n) for n in range(RESTARTS + 1)] == [True] * RESTARTS + [False]
    # Exits spread wider than the window never use up the budget.
    spread = Supervised("worker", start, restart=True)
    assert all(spread.may_restart(now + n * RESTART_WINDOW) for n in range(RESTARTS * 3))
    # The web server is never restarted by fedmem_run.
    web = Supervised("web", start, restart=False)
    assert not web.may_restart(now)
    for process in started:
        process.wait(timeout=30)
