"""Local Mem0 servers.

* :class:`Mem0Platform` — the platform API as the official ``MemoryClient`` calls it
  (Token auth, ``/v1/ping/``, v3 add / search / list, v1 get / update / delete,
  ``/v1/event/{id}/``). It behaves as the platform does: an add answers ``PENDING``
  with an event id and memories exist only once the event is processed
  (:meth:`Mem0Platform.process`, standing in for Mem0's workers); several entity ids
  match strictly (AND); a message is attributed to one id by its role (user
  messages to ``user_id``, assistant messages to ``agent_id``). Every body conforms
  to the models below, transcribed from the platform's API reference
  (docs.mem0.ai/api-reference: memory object, add response, event object).
* :func:`server_routes` — the self-hosted REST server (mem0's ``server/main.py``:
  the same routes and request models), in front of a real OSS ``Memory``.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from pydantic import BaseModel

from providers.tests.servers import FakeService, LocalServer, Req, Resp, conform

API_KEY = "m0-test-key"
SCOPE_KEYS = ("user_id", "agent_id", "run_id", "app_id")


class MemoryObject(BaseModel):
    id: str
    memory: str
    user_id: str | None = None
    agent_id: str | None = None
    app_id: str | None = None
    run_id: str | None = None
    hash: str | None = None
    metadata: dict[str, Any] | None = None
    categories: list[str] | None = None
    immutable: bool | None = None
    expiration_date: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    score: float | None = None


class AddQueued(BaseModel):
    message: str
    status: str
    event_id: str


class AddResponse(BaseModel):
    results: list[AddQueued]


class EventResult(BaseModel):
    id: str
    event: str
    user_id: str | None = None
    agent_id: str | None = None
    data: dict[str, Any] | None = None


class EventObject(BaseModel):
    id: str
    event_type: str
    status: str  # PENDING | RUNNING | SUCCEEDED | FAILED
    payload: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    results: list[EventResult] | None = None
    created_at: str | None = None
    updated_at: str | None = None
    latency: float | None = None


class SearchResponse(BaseModel):
    results: list[MemoryObject]


class ListResponse(BaseModel):
    count: int
    next: str | None = None
    previous: str | None = None
    results: list[MemoryObject]


class Ping(BaseModel):
    status: str
    org_id: str | None = None
    project_id: str | None = None
    user_email: str | None = None


class Message(BaseModel):
    message: str


class Mem0Platform(FakeService):
    def __init__(self) -> None:
        super().__init__()
        self.memories: dict[str, dict[str, Any]] = {}
        self.events: dict[str, dict[str, Any]] = {}
        self.pending: list[str] = []
        self.fail_next: str | None = None
        self._events = itertools.count(1)

    def process(self) -> int:
        """Mem0's workers: every pending add becomes memories (or fails with a reason)."""
        return self.drain(self.pending, self._add)

    def _add(self, event_id: str) -> None:
        event = self.events[event_id]
        if self.fail_next:
            event.update(status="FAILED", metadata={"error": self.fail_next}, results=[])
            self.fail_next = None
            return
        body = event["payload"]
        ids = {k: v for k, v in (body.get("filters") or {}).items() if k in SCOPE_KEYS}
        results = []
        for message in body["messages"]:
            scope = dict(ids)
            if "user_id" in scope and "agent_id" in scope:
                # Attribution by role: a user message is about the user, an
                # assistant message about the agent; never both.
                scope.pop("agent_id" if message["role"] == "user" else "user_id")
            memory_id = str(uuid.uuid4())
            self.memories[memory_id] = {
                "id": memory_id,
                "memory": message["content"],
                "metadata": body.get("metadata") or {},
                "categories": ["preferences"],
                "created_at": "2026-03-01T10:00:00Z",
                "updated_at": "2026-03-01T10:00:00Z",
                **scope,
            }
            results.append(
                {
                    "id": memory_id,
                    "event": "ADD",
                    "data": {"memory": message["content"]},
                    **{k: v for k, v in scope.items() if k in ("user_id", "agent_id")},
                }
            )
        event.update(status="SUCCEEDED", results=results, latency=1.5)

    def seed(self, **memory: Any) -> str:
        """A processed memory (what the platform holds after its workers ran)."""
        memory_id = memory.pop("id", None) or str(uuid.uuid4())
        self.memories[memory_id] = {"id": memory_id, "metadata": {}, **memory}
        return memory_id

    # -- routes -----------------------------------------------------------------------

    def _scoped(self, filters: dict[str, Any]) -> list[dict[str, Any]]:
        # Strict: every id in the filter must be on the memory.
        return [m for m in self.memories.values() if all(m.get(k) == v for k, v in filters.items())]

    def ping(self, req: Req) -> Resp:
        return Resp(
            200,
            conform(
                Ping,
                {"status": "ok", "org_id": "org_1", "project_id": "proj_1", "user_email": "ops@acme.test"},
            ),
        )

    def add(self, req: Req) -> Resp:
        body = req.json
        if not set(body.get("filters") or {}) & set(SCOPE_KEYS):
            return Resp(400, {"detail": "At least one of user_id, agent_id, run_id or app_id is required."})
        event_id = f"00000000-0000-4000-8000-{next(self._events):012d}"
        self.events[event_id] = {
            "id": event_id,
            "event_type": "ADD",
            "status": "PENDING",
            "payload": body,
            "created_at": "2026-03-01T10:00:00Z",
        }
        self.pending.append(event_id)
        queued = {
            "message": "Memory processing has been queued for background execution",
            "status": "PENDING",
            "event_id": event_id,
        }
        return Resp(200, conform(AddResponse, {"results": [queued]}))

    def event(self, req: Req) -> Resp:
        event = self.events.get(req.params["id"])
        if event is None:
            return Resp(404, {"detail": "Event not found"})
        return Resp(200, conform(EventObject, event))

    def search(self, req: Req) -> Resp:
        body = req.json
        words = set(body["query"].lower().split())
        hits = []
        for memory in self._scoped(body.get("filters") or {}):
            overlap = len(words & set(memory["memory"].lower().split()))
            if overlap:
                hits.append({**memory, "score": round(overlap / len(words), 4)})
        hits.sort(key=lambda m: -m["score"])
        return Resp(200, conform(SearchResponse, {"results": hits[: body.get("top_k", 10)]}))

    def list_all(self, req: Req) -> Resp:
        size = int(req.arg("page_size", "100") or 100)
        found = self._scoped(req.json.get("filters") or {})
        return Resp(
            200,
            conform(
                ListResponse, {"count": len(found), "next": None, "previous": None, "results": found[:size]}
            ),
        )

    def one(self, req: Req) -> Resp:
        memory = self.memories.get(req.params["id"])
        return (
            Resp(200, conform(MemoryObject, memory)) if memory else Resp(404, {"detail": "Memory not found"})
        )

    def update(self, req: Req) -> Resp:
        memory = self.memories.get(req.params["id"])
        if not memory:
            return Resp(404, {"detail": "Memory not found"})
        memory["memory"] = req.json["text"]
        return Resp(200, conform(MemoryObject, memory))

    def delete(self, req: Req) -> Resp:
        if self.memories.pop(req.params["id"], None) is None:
            return Resp(404, {"detail": "Memory not found"})
        return Resp(200, conform(Message, {"message": "Memory deleted successfully!"}))

    def delete_all(self, req: Req) -> Resp:
        filters = {k: req.arg(k) for k in SCOPE_KEYS if req.arg(k)}
        if not filters:
            return Resp(400, {"detail": "At least one filter is required."})
        for memory in self._scoped(filters):
            self.memories.pop(memory["id"])
        return Resp(200, conform(Message, {"message": "Memories deleted successfully!"}))

    def start(self) -> Mem0Platform:
        def authed(handler: Any) -> Any:
            def wrapped(req: Req) -> Resp:
                if req.headers.get("authorization") != f"Token {API_KEY}":
                    return Resp(401, {"detail": "Invalid API key"})
                return handler(req)

            return wrapped

        route = self.server.route
        route("GET", "/v1/ping/", authed(self.ping))
        route("POST", "/v3/memories/add/", authed(self.add))
        route("GET", "/v1/event/(?P<id>[^/]+)/", authed(self.event))
        route("POST", "/v3/memories/search/", authed(self.search))
        route("POST", "/v3/memories/", authed(self.list_all))
        route("GET", "/v1/memories/(?P<id>[^/]+)/", authed(self.one))
        route("PUT", "/v1/memories/(?P<id>[^/]+)/", authed(self.update))
        route("DELETE", "/v1/memories/(?P<id>[^/]+)/", authed(self.delete))
        route("DELETE", "/v1/memories/", authed(self.delete_all))
        self.server.start()
        return self


# --- the self-hosted REST server (mem0 server/main.py) in front of a real Memory ---------


class ServerMessage(BaseModel):
    role: str
    content: str


class MemoryCreate(BaseModel):
    messages: list[ServerMessage]
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] | None = None


class SearchRequest(BaseModel):
    query: str
    user_id: str | None = None
    run_id: str | None = None
    agent_id: str | None = None
    filters: dict[str, Any] | None = None


def server_routes(server: LocalServer, memory: Any, *, infer: bool = False) -> LocalServer:
    """The routes of mem0's ``server/main.py`` over ``memory`` (an OSS ``Memory``).
    Request bodies are parsed with the server's own request models (so a field the
    server does not take is refused with 422, as FastAPI does)."""

    def ids(values: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in values.items() if k in ("user_id", "agent_id", "run_id") and v}

    def parsed(model: Any, req: Req) -> Any:
        data = req.json
        unknown = set(data) - set(model.model_fields)
        if unknown:
            return None
        return model.model_validate(data)

    def add(req: Req) -> Resp:
        body = parsed(MemoryCreate, req)
        if body is None:
            return Resp(422, {"detail": "unprocessable"})
        scope = ids(body.model_dump())
        if not scope:
            return Resp(400, {"detail": "At least one identifier (user_id, agent_id, run_id) is required."})
        result = memory.add(
            [m.model_dump() for m in body.messages], metadata=body.metadata, infer=infer, **scope
        )
        return Resp(200, result)

    def get_all(req: Req) -> Resp:
        scope = ids({k: req.arg(k) for k in ("user_id", "agent_id", "run_id")})
        if not scope:
            return Resp(400, {"detail": "At least one identifier is required."})
        return Resp(200, memory.get_all(filters=scope))

    def get_one(req: Req) -> Resp:
        return Resp(200, memory.get(req.params["id"]))

    def search(req: Req) -> Resp:
        body = parsed(SearchRequest, req)
        if body is None:
            return Resp(422, {"detail": "unprocessable"})
        filters = {**(body.filters or {}), **ids(body.model_dump())}
        return Resp(200, memory.search(body.query, filters=filters, threshold=0.0))

    def update(req: Req) -> Resp:
        # As shipped: the JSON object itself is handed to Memory.update as the text.
        return Resp(200, memory.update(memory_id=req.params["id"], data=req.json))

    def delete(req: Req) -> Resp:
        memory.delete(req.params["id"])
        return Resp(200, {"message": "Memory deleted successfully"})

    def delete_all(req: Req) -> Resp:
        scope = ids({k: req.arg(k) for k in ("user_id", "agent_id", "run_id")})
        if not scope:
            return Resp(400, {"detail": "At least one identifier is required."})
        memory.delete_all(**scope)
        return Resp(200, {"message": "All relevant memories deleted"})

    def openapi(req: Req) -> Resp:
        return Resp(200, {"openapi": "3.1.0", "info": {"title": "Mem0 REST APIs", "version": "1.0.0"}})

    server.route("POST", "/memories", add)
    server.route("GET", "/memories", get_all)
    server.route("DELETE", "/memories", delete_all)
    server.route("GET", "/memories/(?P<id>[^/]+)", get_one)
    server.route("PUT", "/memories/(?P<id>[^/]+)", update)
    server.route("DELETE", "/memories/(?P<id>[^/]+)", delete)
    server.route("POST", "/search", search)
    server.route("GET", "/openapi.json", openapi)
    return server
