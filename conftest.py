"""Shared fixtures: named actors (owner / teammate / outsider) and API clients.

One embedded PostgreSQL serves the whole run (started when the test settings load);
pytest-django creates the test database in it once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from governance.models import Agent, Role, Tenant, User
from governance.tests import factories as f


def pytest_sessionstart(session) -> None:
    """Drop test databases left by runs that died (their pid is gone)."""
    import re

    import psutil
    import psycopg
    from django.conf import settings
    from psycopg import sql

    db = settings.DATABASES["default"]
    # test_<name>_<pid>, and test_<name>_<pid>_gw<N> for each pytest-xdist worker.
    pattern = re.compile(rf"^test_{re.escape(db['NAME'])}_(\d+)(?:_gw\d+)?$")
    params = {"host": db["HOST"] or None, "port": db["PORT"] or None, "user": db["USER"] or None}
    params["password"] = db["PASSWORD"] or None
    try:
        with psycopg.connect(dbname="postgres", autocommit=True, **params) as conn:
            names = [row[0] for row in conn.execute("SELECT datname FROM pg_database")]
            for name in names:
                match = pattern.match(name)
                if match and not psutil.pid_exists(int(match.group(1))):
                    conn.execute(
                        sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                    )
    except psycopg.Error:
        pass  # not allowed to list or drop: leave it to the operator


@pytest.fixture(scope="session", autouse=True)
def _counter_connections(django_db_setup):
    """Every connection to the test database is gone before it is dropped: DROP
    DATABASE refuses ("is being accessed by other users") while any session is
    left. The counter table's own connection closes, then Django's pool; and since a
    closed client's server process exits on its own time (seconds on a loaded
    machine, longer than DROP's five-second wait), teardown waits until PostgreSQL
    lists no other session on the database; one that stays (a connection some thread
    of this run still holds) is named, then ended, so the database can be dropped."""
    yield
    from django.conf import settings
    from django.core.cache import caches
    from django.db import connections

    from core import beside

    if settings.CACHES["counters"]["BACKEND"].endswith("DatabaseCounterCache"):
        caches["counters"].close_all()
    # The side threads keep a connection for a moment after a read (core.beside).
    beside.release_connections()
    connections.close_all()
    for conn in connections.all():
        if conn.vendor == "postgresql":
            conn.close_pool()
    _wait_until_alone(connections["default"].settings_dict)


def _wait_until_alone(db: dict, timeout: float = 15.0) -> None:
    import contextlib
    import time
    import warnings

    import psycopg

    params = {"host": db["HOST"] or None, "port": db["PORT"] or None, "user": db["USER"] or None}
    params["password"] = db["PASSWORD"] or None
    left: list = []
    with psycopg.connect(dbname="postgres", autocommit=True, **params) as conn:
        deadline = time.monotonic() + timeout
        while True:
            left = conn.execute(
                "SELECT pid, application_name, state, left(query, 80) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                [db["NAME"]],
            ).fetchall()
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if left:
            warnings.warn(f"sessions still on {db['NAME']} at teardown, ended: {left}", stacklevel=1)
            for pid, *_rest in left:
                # Another role's session stays: DROP then names it.
                with contextlib.suppress(psycopg.Error):
                    conn.execute("SELECT pg_terminate_backend(%s)", [pid])


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Counters (rate limits, failed-login lockouts) start at zero in every test: all
    test requests come from one address. The counter table is written on a
    connection of its own, so the test's rollback does not clear it."""
    yield
    from django.conf import settings
    from django.core.cache import caches

    if settings.CACHES["default"]["BACKEND"].endswith("LocMemCache"):
        caches["default"].clear()
    if settings.CACHES["counters"]["BACKEND"].endswith("DatabaseCounterCache"):
        counters = caches["counters"]
        if counters.connected:  # used by this test
            counters.clear()


@dataclass
class World:
    tenant: Tenant
    other_tenant: Tenant
    owner: User  # developer who created `agent`
    teammate: User  # developer in the same tenant, no grant on `agent`
    outsider: User  # developer of another tenant
    admin: User  # tenant_admin of `tenant`
    officer: User
    auditor: User
    agent: Agent
    sibling: Agent  # same tenant, created by the admin
    foreign_agent: Agent  # other tenant


@contextmanager
def rolled_back() -> Iterator[None]:
    """A transaction around one request, rolled back after it so the next request
    starts from the same data. Marked like a test case's own transaction (Django's
    ``_from_testcase``): code that checks it does not run inside a transaction of
    its caller (the write pipeline's prepare step) sees what production sees."""
    block = transaction.atomic()
    block._from_testcase = True
    with block:
        yield
        transaction.set_rollback(True)


@pytest.fixture
def world(db) -> World:
    tenant = f.TenantFactory(slug="acme", name="Acme")
    other = f.TenantFactory(slug="globex", name="Globex")
    owner = f.member(tenant, Role.DEVELOPER, username="owner")
    teammate = f.member(tenant, Role.DEVELOPER, username="teammate")
    outsider = f.member(other, Role.DEVELOPER, username="outsider")
    admin = f.member(tenant, Role.TENANT_ADMIN, username="tadmin")
    officer = f.member(tenant, Role.SECURITY_OFFICER, username="officer")
    auditor = f.member(tenant, Role.AUDITOR, username="auditor")
    agent = f.agent(tenant, owner, name="support-bot")
    sibling = f.agent(tenant, admin, name="ops-agent")
    foreign = f.agent(other, outsider, name="globex-bot")
    return World(tenant, other, owner, teammate, outsider, admin, officer, auditor, agent, sibling, foreign)


def bearer(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


@pytest.fixture
def as_user():
    """APIClient authenticated with a personal key of ``user`` in ``tenant``."""

    def make(user: User, tenant: Tenant | None = None) -> APIClient:
        tenant = tenant or user.memberships.first().tenant
        return bearer(f.user_key(user, tenant))

    return make


@pytest.fixture
def as_agent():
    def make(agent: Agent) -> APIClient:
        return bearer(f.agent_key(agent))

    return make


def assert_error(response, status: int, code: str | None = None) -> dict:
    """Every error answers with the one documented body."""
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code
    return body["error"]


@pytest.fixture
def worker_factory(django_db_setup, django_db_blocker, tmp_path_factory):
    """Start real Celery worker processes against the test database.

    Each worker is its own OS process (prefork pool), consuming from the broker
    named in its environment; nothing runs eagerly in the test process. Workers
    stop when the test that started them ends: one left running would consume
    later tests' messages with the wrong settings and write into the database
    while the next test flushes it.
    """
    import os
    import subprocess
    import sys
    import time

    from django.db import connection

    started: list[subprocess.Popen] = []

    def stop_all() -> None:
        for proc in started:
            proc.terminate()
        for proc in started:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        started.clear()

    def start(*, alone: bool = False, **extra_env: str) -> subprocess.Popen:
        # alone: stop this test's earlier workers first, so this one gets every message.
        if alone:
            stop_all()
        env = os.environ.copy()
        env.update(
            DJANGO_SETTINGS_MODULE="fedmem_site.settings.test",
            FEDMEM_DB_NAME=connection.settings_dict["NAME"],
            **extra_env,
        )
        log = tmp_path_factory.mktemp("worker") / "worker.log"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "fedmem_site",
                "worker",
                "--pool",
                "prefork",
                "--concurrency",
                "1",
                "--loglevel",
                "INFO",
                "--without-mingle",
                "--without-gossip",
            ],
            env=env,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
        )
        proc.log_path = log  # type: ignore[attr-defined]
        # Tracked before it is ready: a worker that is slow to start (a loaded machine)
        # and left running would take later tests' messages with this test's settings.
        started.append(proc)
        deadline = time.monotonic() + 300
        while "ready." not in log.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_all()
                raise RuntimeError(f"worker did not start:\n{log.read_text()}")
            time.sleep(0.2)
        return proc

    yield start
    stop_all()


def redis_url() -> str | None:
    """The machine's Redis for production-path tests (.ci/run starts it when absent)."""
    import os
    import socket

    url = os.environ.get("FEDMEM_TEST_REDIS_URL", "redis://127.0.0.1:6379/14")
    host, port = "127.0.0.1", 6379
    try:
        with socket.create_connection((host, port), timeout=1):
            return url
    except OSError:
        return None


@pytest.fixture
def redis() -> Iterator[str]:
    """The machine's Redis URL, for one test at a time. The tests flush its database
    (cache clear, channel-layer flush) and parallel test processes (pytest-xdist
    workers, another run on the same URL) share it, so a file lock serializes them."""
    import fcntl
    import hashlib
    import tempfile
    from pathlib import Path

    url = redis_url()
    if url is None:
        pytest.skip("no Redis on 127.0.0.1:6379 (.ci/run starts one)")
    name = f"fedmem-test-redis-{hashlib.sha256(url.encode()).hexdigest()[:12]}.lock"
    with (Path(tempfile.gettempdir()) / name).open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield url
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium, headless, driven by Playwright (no browser download).

    Module-scoped: Playwright's sync API keeps an event loop in this thread while
    it is open, which later tests using async_to_sync must not find.
    """
    import os
    import shutil

    path = os.environ.get("FEDMEM_CHROMIUM", CHROMIUM)
    if not shutil.which(path):
        pytest.skip(f"no Chromium at {path} (make test installs Debian's chromium when it can)")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls the
    # tests make between page actions are still plain synchronous calls.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            instance = playwright.chromium.launch(
                executable_path=path,
                args=[
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--no-first-run",
                    "--disable-quic",
                ],
            )
            yield instance
            instance.close()
    finally:
        # Subprocesses started by later tests must not inherit it (check --deploy refuses it).
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=live_server.url)
    tab = context.new_page()
    tab.set_default_timeout(15000)
    yield tab
    context.close()


def screenshot(page, name: str) -> None:
    """Every browser flow leaves a picture; FEDMEM_UPDATE_SCREENSHOTS=1 refreshes docs/screenshots."""
    import os
    from pathlib import Path

    root = Path(__file__).resolve().parent
    folder = root / ("docs/screenshots" if os.environ.get("FEDMEM_UPDATE_SCREENSHOTS") else "var/screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
