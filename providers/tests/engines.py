"""A local engine speaking the ``custom`` adapter's HTTP protocol, for API and federation tests."""

from __future__ import annotations

import itertools
from typing import Any

from providers.tests.servers import LocalServer, Resp


def custom_engine(
    records: list[dict[str, Any]] | None = None,
    *,
    delay: float = 0.0,
    status: int = 200,
    server: LocalServer | None = None,
) -> LocalServer:
    """Answers recall/search with ``records`` (best first), keeps what it is told to remember."""
    server = server or LocalServer()
    server.start()
    store: list[dict[str, Any]] = [dict(r) for r in (records or [])]
    ids = itertools.count(1000)

    def maybe_slow() -> Resp | None:
        if delay:
            server.sleep(delay)
        if status != 200:
            return Resp(status, {"detail": "engine error"})
        return None

    def health(req):
        return maybe_slow() or Resp(200, {"status": "ok", "version": "test"})

    def query(req):
        failed = maybe_slow()
        if failed:
            return failed
        body = req.json
        return Resp(200, {"results": store[: body["top_k"]]})

    def remember(req):
        body = req.json
        record = {
            "id": str(next(ids)),
            "kind": body["kind"],
            "text": body["text"],
            "metadata": body["metadata"],
        }
        store.append(record)
        return Resp(201, {"id": record["id"], "status": "settled"})

    def listing(req):
        return Resp(200, {"results": store[: int(req.arg("limit", "10"))]})

    def one(req):
        for record in store:
            if record["id"] == req.params["id"]:
                return Resp(200, record)
        return Resp(404, {"detail": "not found"})

    def patch(req):
        for record in store:
            if record["id"] == req.params["id"]:
                record["text"] = req.json["text"]
                return Resp(200, record)
        return Resp(404, {"detail": "not found"})

    def delete(req):
        before = len(store)
        store[:] = [r for r in store if r["id"] != req.params["id"]]
        return Resp(204 if len(store) < before else 404, None if len(store) < before else {"detail": "nf"})

    server.route("GET", "/health", health)
    server.route("POST", "/recall", query)
    server.route("POST", "/search", query)
    server.route("POST", "/memories", remember)
    server.route("GET", "/memories", listing)
    server.route("GET", "/memories/(?P<id>[^/]+)", one)
    server.route("PATCH", "/memories/(?P<id>[^/]+)", patch)
    server.route("DELETE", "/memories/(?P<id>[^/]+)", delete)
    return server


def declare(engine_id: str, url: str, *, tenant=None, provider: str = "custom", **fields: Any):
    """An engine instance row pointing at a local test server."""
    from providers.models import AccessControl, EngineInstance

    fields.setdefault("access_control", AccessControl.NONE)
    fields.setdefault("allow_development_hosts", True)
    return EngineInstance.objects.create(
        id=engine_id, provider=provider, base_url=url, tenant=tenant, **fields
    )
