"""Local HTTP servers for tests: bound to 127.0.0.1, on a free port, in a thread.

Each one stops by itself after ``max_seconds`` even if a test forgets to stop it,
records every request (method, path, query, headers, body) and counts accepted
connections, so a test can prove that a refused call never opened a socket.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit


@dataclass
class Req:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    params: dict[str, str] = field(default_factory=dict)

    @property
    def json(self) -> Any:
        return json.loads(self.body or b"null")

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else default


@dataclass
class Resp:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None


Handler = Callable[[Req], Resp]


class LocalServer:
    def __init__(self, *, max_seconds: float = 60.0) -> None:
        self.routes: list[tuple[str, re.Pattern[str], Handler]] = []
        self.requests: list[Req] = []
        self.connections = 0
        self.stopping = threading.Event()
        self._max_seconds = max_seconds
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    def route(self, method: str, pattern: str, handler: Handler) -> LocalServer:
        self.routes.append((method.upper(), re.compile(f"^{pattern}$"), handler))
        return self

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LocalServer:
        owner = self

        class _Server(ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True

            def get_request(self) -> tuple[socket.socket, Any]:
                conn = super().get_request()
                owner.connections += 1
                # Headers and body are written separately; don't let Nagle delay the body.
                conn[0].setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return conn

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                req = Req(
                    self.command,
                    parts.path,
                    parse_qs(parts.query),
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                owner.requests.append(req)
                resp = Resp(404, {"detail": "Not Found"})
                for method, pattern, handler in owner.routes:
                    match = pattern.match(parts.path)
                    if method == self.command and match:
                        req.params = match.groupdict()
                        try:
                            resp = handler(req)
                        except Exception as exc:  # a broken test handler answers 500
                            resp = Resp(500, {"detail": f"{exc.__class__.__name__}: {exc}"})
                        break
                payload = (
                    resp.raw
                    if resp.raw is not None
                    else (
                        b""
                        if resp.body is None and resp.status in (204, 304)
                        else json.dumps(resp.body).encode()
                    )
                )
                try:
                    self.send_response(resp.status)
                    headers = {"Content-Type": "application/json", **resp.headers}
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        self._timer = threading.Timer(self._max_seconds, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self._timer is not None:
            self._timer.cancel()
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def sleep(self, seconds: float) -> None:
        """Block a handler (a slow engine) until ``seconds`` pass or the server stops."""
        self.stopping.wait(seconds)


# --- conformance: a fake answers only what the provider's own definitions allow ---------


class SchemaViolation(AssertionError):
    """A fake tried to send a body the provider's published model does not describe."""


def _model_fields(model: Any) -> dict[str, Any]:
    """Wire name -> annotation of a pydantic model (aliases are what goes on the wire)."""
    fields = {}
    for name, info in model.model_fields.items():
        fields[info.alias or name] = info
    return fields


def _inner_models(annotation: Any) -> list[Any]:
    """The pydantic models an annotation can hold (Optional[M], list[M], dict[str, M] ...)."""
    from typing import get_args

    import pydantic

    found: list[Any] = []
    stack = [annotation]
    while stack:
        current = stack.pop()
        if isinstance(current, type) and issubclass(current, pydantic.BaseModel):
            found.append(current)
            continue
        stack.extend(get_args(current))
    return found


def conform(model: Any, body: Any, path: str = "$") -> Any:
    """Check ``body`` against a provider's pydantic model (an SDK type or a DTO copied
    from the provider's server source): no key the model lacks, every required key
    present, nested models checked too. Returns ``body`` so a handler can wrap its
    answer. SDK models accept extra keys at run time; this check does not, so a field
    only the fake sends cannot make a test pass."""
    if body is None:
        return body
    if isinstance(body, list):
        for index, entry in enumerate(body):
            conform(model, entry, f"{path}[{index}]")
        return body
    if not isinstance(body, dict):
        raise SchemaViolation(f"{path}: {model.__name__} is an object, got {type(body).__name__}")
    fields = _model_fields(model)
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise SchemaViolation(f"{path}: {model.__name__} has no field(s) {unknown}")
    for wire, info in fields.items():
        if info.is_required() and wire not in body:
            raise SchemaViolation(f"{path}: {model.__name__}.{wire} is required")
        value = body.get(wire)
        nested = _inner_models(info.annotation)
        if nested and value is not None:
            entries = value if isinstance(value, list) else [value]
            for entry in entries:
                if isinstance(entry, dict):
                    _conform_any(nested, entry, f"{path}.{wire}")
    # The provider's own validation too (types, enums), not only the key set.
    model.model_validate(body)
    return body


def _conform_any(models: list[Any], body: dict[str, Any], path: str) -> None:
    """A union (an item that is a message or a tool call ...): one member must fit."""
    import pydantic

    errors = []
    for model in models:
        try:
            conform(model, body, path)
            return
        except (SchemaViolation, pydantic.ValidationError) as exc:
            errors.append(str(exc).splitlines()[0])
    raise SchemaViolation(f"{path}: fits none of {[m.__name__ for m in models]}: {errors[:3]}")


Job = TypeVar("Job")


class FakeService:
    """A provider's fake: one local server, and the service's background workers as
    :meth:`drain`, which a test runs when it wants queued work applied."""

    def __init__(self) -> None:
        self.server = LocalServer()

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def requests(self) -> list[Req]:
        return self.server.requests

    def stop(self) -> None:
        self.server.stop()

    @staticmethod
    def drain(queue: list[Job], run: Callable[[Job], None]) -> int:
        """Run every queued job, oldest first (a job may queue more); how many ran."""
        done = 0
        while queue:
            run(queue.pop(0))
            done += 1
        return done
