"""Streamable HTTP at /mcp, mounted in the ASGI app beside Django.

Same credential as the REST API: ``Authorization: Bearer <key>``, resolved by
governance.authentication. An absent or invalid key answers 401 with the API's
error body before any MCP message is read; every tool call then goes through the
same gate as REST (a foreign agent is the same 404 ``agent_not_found``).

Stateless JSON mode: each POST is one self-contained exchange, so any web process
can answer any request and nothing is kept between them (web processes scale out
as they do for REST). The SDK's session manager needs a running task group; daphne
sends no ASGI lifespan events, so it is started on the first request, once per
event loop, and lives as long as the loop.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from rest_framework import exceptions

from core.errors import error_body
from fedmem_mcp.server import build_server, release_connections
from governance.authentication import BearerKeyAuthentication, authenticate_bearer, key_principal

PATH = "/mcp"
SCOPE_KEY = "fedmem.caller"


def is_mcp_path(path: str) -> bool:
    return path == PATH or path == PATH + "/"


def authenticate_key(raw: str, address: str = "unknown") -> tuple[Any, Any]:
    release_connections()
    try:
        key = authenticate_bearer(raw, address=address)
        return key_principal(key), key
    finally:
        release_connections()


async def _caller_of(ctx: Any) -> tuple[Any, Any]:
    """The caller the HTTP layer authenticated for this very request."""
    request = getattr(ctx, "request", None)
    caller = request.scope.get(SCOPE_KEY) if request is not None else None
    if caller is None:  # pragma: no cover - the ASGI layer never lets one through
        raise exceptions.NotAuthenticated()
    return caller


server = build_server(_caller_of)


async def _send_json(
    send: Any, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]
) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _allowed_hosts() -> list[str]:
    hosts = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not hosts:
        hosts = [".localhost", "127.0.0.1", "[::1]"]
    return hosts


def _host_ok(value: str | None) -> bool:
    if not value:
        return False
    domain, _port = split_domain_port(value)
    return bool(domain) and validate_host(domain, _allowed_hosts())


def _origin_ok(origin: str | None) -> bool:
    # Browsers send Origin; a page on another site must not drive a local server
    # (DNS rebinding). Clients that are not browsers send none.
    if origin is None:
        return True
    _scheme, _, rest = origin.partition("://")
    return _host_ok(rest.split("/", 1)[0])


class McpApp:
    """The ASGI application serving /mcp."""

    def __init__(self) -> None:
        self._managers: dict[
            asyncio.AbstractEventLoop, tuple[StreamableHTTPSessionManager, asyncio.Event]
        ] = {}
        self._keep: set[asyncio.Task[None]] = set()

    async def _manager(self) -> StreamableHTTPSessionManager:
        loop = asyncio.get_running_loop()
        entry = self._managers.get(loop)
        if entry is None:
            manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True)
            ready = asyncio.Event()
            entry = self._managers[loop] = (manager, ready)

            async def keep_running() -> None:
                async with manager.run():
                    ready.set()
                    await asyncio.Event().wait()

            task = loop.create_task(keep_running())
            self._keep.add(task)
            task.add_done_callback(self._keep.discard)
        await entry[1].wait()
        return entry[0]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if not _host_ok(_header(scope, b"host")):
            await _send_json(send, 400, error_body("bad_request", "Bad request."), [])
            return
        if not _origin_ok(_header(scope, b"origin")):
            await _send_json(send, 403, error_body("permission_denied", "Origin not allowed."), [])
            return
        challenge = [(b"www-authenticate", BearerKeyAuthentication().authenticate_header(None).encode())]
        header = _header(scope, b"authorization") or ""
        scheme, _, raw = header.partition(" ")
        raw = raw.strip()
        if scheme.lower() != "bearer" or not raw:
            body = error_body("not_authenticated", "Authentication credentials were not provided.")
            await _send_json(send, 401, body, challenge)
            return
        try:
            client = scope.get("client") or ("unknown", 0)
            caller = await sync_to_async(authenticate_key, thread_sensitive=True)(raw, str(client[0]))
        except exceptions.Throttled as exc:
            wait = [(b"retry-after", str(int(exc.wait or 1)).encode())]
            await _send_json(send, 429, error_body("rate_limited", str(exc.detail)), wait)
            return
        except exceptions.AuthenticationFailed as exc:
            await _send_json(send, 401, error_body("authentication_failed", str(exc.detail)), challenge)
            return
        scope = {**scope, SCOPE_KEY: caller}
        manager = await self._manager()
        await manager.handle_request(scope, receive, send)


mcp_app = McpApp()
