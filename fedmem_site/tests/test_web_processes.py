"""The default multi-process web server (uvicorn, two processes on one socket, as
``fedmem_run`` starts it) shares its rate-limit counters and sees governance
changes at once, though each process keeps copies of the identity rows it read."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from core.management.commands.fedmem_run import web_command, web_env
from governance.models import ApiKey
from governance.services.agents import api_key_create, api_key_revoke
from governance.tests import factories as f

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, secret: str) -> int:
    """One request on a connection of its own, so requests spread over the processes."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {secret}"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _counter_connections(since: Any = None) -> int:
    """Web processes that have counted something: each opens one counters connection.
    ``since``: only connections opened from then on (earlier tests' processes, and this
    one's own counters, may still hold theirs)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'fedmem-counters' AND backend_start >= coalesce(%s, '-infinity')",
            [since],
        )
        return int(cursor.fetchone()[0])


def _until_both_serve(base: str, agent: Any, started: Any) -> None:
    """Requests with keys of their own until both processes have counted one: the
    first process to answer /health may be serving alone while the other still loads
    (seen on a loaded machine: every request of a test went to one process)."""
    deadline = time.monotonic() + 240
    secret, used = f.agent_key(agent), 0
    while _counter_connections(started) < 2:
        assert time.monotonic() < deadline, "the second web process never answered"
        if used == 25:  # well inside one key's limit (30 an hour in these tests)
            secret, used = f.agent_key(agent), 0
        assert _get(f"{base}/v1/me", secret) == 200
        used += 1
        time.sleep(0.5)


def _database_now() -> Any:
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


@pytest.fixture
def two_web_processes(tmp_path):
    port = _free_port()
    env = web_env()
    env.update(
        DJANGO_SETTINGS_MODULE="fedmem_site.settings.test",
        FEDMEM_DB_NAME=connection.settings_dict["NAME"],
        FEDMEM_API_RATE_LIMIT="30/hour",
    )
    log = tmp_path / "web.log"
    started = _database_now()
    command = web_command(sys.executable, {"host": "127.0.0.1", "port": port, "web_workers": 2})
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(log.read_text()) from None
                time.sleep(0.5)
        yield base, started
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        # Their connections close on their own time; the flush after the test needs them gone.
        deadline = time.monotonic() + 60
        while _counter_connections(started) and time.monotonic() < deadline:
            time.sleep(0.2)


@pytest.mark.django_db(transaction=True)
def test_two_web_processes_share_the_limit_and_see_a_revocation_at_once(world, two_web_processes):
    base, started = two_web_processes
    _until_both_serve(base, world.agent, started)
    key, secret = api_key_create(tenant=world.tenant, agent=world.agent, name="k")
    other = f.agent_key(world.agent)
    # A new connection each time: both processes serve, and each keeps a copy of the key.
    statuses = [_get(f"{base}/v1/me", secret) for _ in range(24)]
    assert statuses == [200] * 24
    assert _counter_connections(started) == 2, "both processes answered"
    # The limit (30 an hour) holds across both processes: one counter, not one each.
    statuses += [_get(f"{base}/v1/me", secret) for _ in range(16)]
    assert statuses.count(200) == 30 and statuses.count(429) == 10
    # Revoked here, in a third process: both web processes refuse it on their next request.
    assert _get(f"{base}/v1/me", other) == 200
    api_key_revoke(key=ApiKey.objects.get(pk=key.pk), actor=world.owner)
    statuses = [_get(f"{base}/v1/me", secret) for _ in range(10)]
    assert statuses == [401] * 10
    # Another key of the same agent still works.
    assert _get(f"{base}/v1/me", other) == 200


@pytest.mark.django_db(transaction=True)
def test_two_web_processes_apply_a_new_policy_on_the_next_request(world, two_web_processes):
    from governance.services.policies import policy_version_create

    base, started = two_web_processes
    _until_both_serve(base, world.agent, started)
    secret = f.agent_key(world.agent)
    url = f"{base}/v1/memory/agents/{world.agent.pk}/memories?scope=agent"
    assert [_get(url, secret) for _ in range(12)] == [200] * 12
    policy_version_create(agent=world.agent, policy={"read_scopes": ["user"]}, created_by=world.owner)
    assert [_get(url, secret) for _ in range(8)] == [403] * 8
