"""Inputs that used to answer 500 answer their documented 4xx and change nothing.

Deep JSON, bodies over the upload limit, meaningless cursors on every
cursor-paginated route of the URL map, NUL characters in paths and query strings,
recalls whose scopes all lack their key, and (against the real server) a request
line too long for it.
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from conftest import assert_error
from core.pagination import CursorPagination
from governance.services.policies import policy_version_create
from memory.models import MemoryItem

ROOT = Path(__file__).resolve().parents[2]


def _count() -> int:
    return MemoryItem.objects.count()


def test_deeply_nested_json_is_a_parse_error(world, as_agent):
    body = '{"content": ' + "[" * 100_000 + "]" * 100_000 + "}"
    response = as_agent(world.agent).generic(
        "POST", f"/v1/memory/agents/{world.agent.pk}/memories", body, content_type="application/json"
    )
    assert_error(response, 400, "parse_error")
    # Nested well below the parser's own limit, but deeper than any field we accept.
    body = '{"content": "x", "metadata": ' + '{"a": ' * 200 + "1" + "}" * 200 + "}"
    response = as_agent(world.agent).generic(
        "POST", f"/v1/memory/agents/{world.agent.pk}/memories", body, content_type="application/json"
    )
    assert_error(response, 400, "parse_error")
    assert _count() == 0


def test_a_body_over_the_upload_limit_is_413(world, as_agent, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = '{"content": "' + "x" * 20_000 + '"}'
    response = as_agent(world.agent).generic(
        "POST", f"/v1/memory/agents/{world.agent.pk}/memories", body, content_type="application/json"
    )
    assert_error(response, 413, "payload_too_large")
    assert _count() == 0


def _cursor_routes() -> list[str]:
    """Every GET route whose view pages with our cursor pagination, from the URL map."""
    found: list[str] = []

    def walk(patterns, prefix: str) -> None:  # type: ignore[no-untyped-def]
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, prefix + str(entry.pattern))
            elif isinstance(entry, URLPattern):
                view = getattr(entry.callback, "view_class", None)
                pagination = getattr(view, "pagination_class", None)
                if view and hasattr(view, "get") and pagination and issubclass(pagination, CursorPagination):
                    found.append(prefix + str(entry.pattern))

    walk(get_resolver().url_patterns, "/")
    return found


def test_the_route_enumeration_finds_the_paginated_lists():
    routes = _cursor_routes()
    assert "/v1/memory/agents/<str:agent_id>/memories" in routes
    assert "/v1/audit/events" in routes
    assert len(routes) >= 5, routes


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("cursor", [_b64("p=not-a-position&r=1"), _b64("p=x\x00y"), _b64("r=maybe"), "%%%"])
def test_a_meaningless_cursor_is_400_on_every_paginated_route(world, as_user, as_agent, cursor):
    callers = [as_agent(world.agent), as_user(world.admin), as_user(world.auditor), as_user(world.officer)]
    for route in _cursor_routes():
        url = route.replace("<str:agent_id>", str(world.agent.pk)).replace("<str:session_id>", "chat-1")
        assert "<" not in url, url
        # Whoever may read the list: the agent, or the role the list is for.
        client = next((c for c in callers if c.get(url).status_code == 200), None)
        assert client is not None, url
        response = client.get(url, {"cursor": cursor})
        assert_error(response, 400, "invalid_cursor")


def test_a_year_is_no_position_in_a_newest_first_list(world, as_agent):
    # "p=2026": well-formed, but no timestamp; it used to reach the database.
    response = as_agent(world.agent).get(
        f"/v1/memory/agents/{world.agent.pk}/memories", {"cursor": "cD0yMDI2"}
    )
    assert_error(response, 400, "invalid_cursor")


@pytest.mark.parametrize(
    "url",
    [
        "/v1/memory/agents/{agent}/sessions/chat%00one/messages",
        "/v1/memory/agents/{agent}/memories/ab%00cd",
        "/v1/memory/legal-holds?subject=cust%001",
        "/v1/memory/agents/{agent}/memories?user_id=a%00b",
        "/v1/agents/x%00y",
    ],
)
def test_nul_in_a_path_or_query_is_400(world, as_user, url):
    response = as_user(world.admin).get(url.format(agent=world.agent.pk))
    assert_error(response, 400, "bad_request")


def test_nul_in_a_console_url_is_a_400_page(world, client):
    client.force_login(world.admin)
    response = client.get("/memories/?q=a%00b")
    assert response.status_code == 400
    assert b"<html" in response.content


def test_nul_in_policy_teams_is_400_and_nothing_changes(world, as_user):
    url = f"/v1/memory/agents/{world.agent.pk}/policy"
    before = as_user(world.owner).get(url).json()
    response = as_user(world.owner).put(url, {"policy": {"teams": ["red\x00team"]}}, format="json")
    assert_error(response, 400, "validation_error")
    assert as_user(world.owner).get(url).json() == before


READ_ROUTES = ["recall", "memories/search", "discover", "answer"]


@pytest.fixture
def reads_everything(world):
    policy_version_create(
        agent=world.agent,
        policy={"read_scopes": ["session", "user", "agent"], "write_scopes": ["session", "user", "agent"]},
    )


@pytest.mark.parametrize("route", READ_ROUTES)
def test_session_scope_alone_without_session_id_is_400(world, as_agent, reads_everything, route):
    response = as_agent(world.agent).post(
        f"/v1/memory/agents/{world.agent.pk}/{route}", {"query": "plan", "scopes": ["session"]}, format="json"
    )
    error = assert_error(response, 400, "validation_error")
    assert "session_id" in error["details"]["fields"]


@pytest.mark.parametrize("route", READ_ROUTES)
def test_user_scope_alone_without_user_id_from_an_agent_is_400(world, as_agent, reads_everything, route):
    response = as_agent(world.agent).post(
        f"/v1/memory/agents/{world.agent.pk}/{route}", {"query": "plan", "scopes": ["user"]}, format="json"
    )
    error = assert_error(response, 400, "validation_error")
    assert "user_id" in error["details"]["fields"]


@pytest.mark.parametrize("route", READ_ROUTES)
def test_a_keyless_scope_next_to_a_usable_one_still_answers(world, as_agent, reads_everything, route):
    response = as_agent(world.agent).post(
        f"/v1/memory/agents/{world.agent.pk}/{route}",
        {"query": "plan", "scopes": ["session", "agent"]},
        format="json",
    )
    assert response.status_code == 200, response.content


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _raw_request(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_a_60_kb_query_string_is_414_inside_django_too(world, as_agent):
    """uvicorn (the multi-process default) accepts any request line; the middleware
    keeps the bound daphne has, so every server answers the same documented 414."""
    response = as_agent(world.agent).get("/v1/me?q=" + "a" * 60_000)
    assert_error(response, 414, "uri_too_long")


def test_the_server_answers_a_60_kb_query_string_with_414():
    port = _free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "fedmem_site.settings.test"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fedmem_site.serve",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "fedmem_site.asgi:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
                time.sleep(0.3)
        long = b"GET /health?q=" + b"a" * 60_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        answer = _raw_request(port, long)
        assert answer.startswith(b"HTTP/1.1 414 "), answer[:200]
        assert b'"code":"uri_too_long"' in answer.replace(b" ", b"")
        header = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"b" * 20_000 + b"\r\n\r\n"
        assert _raw_request(port, header).startswith(b"HTTP/1.1 431 ")
        # The server still serves afterwards.
        ok = _raw_request(port, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert ok.startswith(b"HTTP/1.1 200 ")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
