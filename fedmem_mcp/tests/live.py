"""A live fedmem over real HTTP on loopback: daphne serving fedmem_site.asgi (the
production entry point, /mcp included) in its own process, against the test
database. Tests using it need committed data: ``django_db(transaction=True)``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class LiveAsgi:
    url: str
    process: subprocess.Popen
    log: Path


def subprocess_env() -> dict[str, str]:
    """The environment a child fedmem process needs to use this run's test database."""
    from django.db import connection

    env = os.environ.copy()
    env.update(
        DJANGO_SETTINGS_MODULE="fedmem_site.settings.test",
        FEDMEM_DB_NAME=connection.settings_dict["NAME"],
        PYTHONPATH=str(ROOT),
    )
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def asgi_server(django_db_setup, django_db_blocker, tmp_path_factory):
    port = _free_port()
    log = tmp_path_factory.mktemp("asgi") / "daphne.log"
    with django_db_blocker.unblock():
        env = subprocess_env()
    process = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "fedmem_site.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"daphne did not start:\n{log.read_text()}")
        time.sleep(0.3)
    yield LiveAsgi(url, process, log)
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
