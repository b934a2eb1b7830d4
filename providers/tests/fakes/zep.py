"""A local Zep v4 graph API, answering only what the ``zep-cloud`` SDK's own models
describe (every body goes through :func:`conform` with the SDK type).

As the real service does: graphs are addressed by UUID (a user's developer id is
resolved with ``POST /users/lookup``), an unknown graph or episode is 404, adds and
deletes answer a task that stays ``pending`` until the service's worker runs
(:meth:`ZepFake.process`, standing in for Zep's background processing), and
``GET /tasks/{uuid}`` reports it.
"""

from __future__ import annotations

import itertools
from typing import Any
from urllib.parse import unquote

from providers.tests.servers import FakeService, Req, Resp, conform

API_KEY = "z-test-key"
BASE = "/api/v4"


class ZepFake(FakeService):
    def __init__(self) -> None:
        from zep_cloud.types import AddEpisodeResult, AsyncResult, Episode, Task, User, UserDeleteResult

        self.models = {
            "user": User,
            "add": AddEpisodeResult,
            "episode": Episode,
            "async": AsyncResult,
            "task": Task,
            "delete_user": UserDeleteResult,
        }
        super().__init__()
        self.users: dict[str, dict[str, Any]] = {}  # developer id -> User
        self.graphs: dict[str, dict[str, list[dict[str, Any]]]] = {}  # uuid -> kind -> items
        self.tasks: dict[str, dict[str, Any]] = {}
        self.pending: list[tuple[str, Any]] = []
        self.fail_next: str | None = None  # the error message the next processed task fails with
        # A task completes by itself after this many status reads (None: only process()
        # runs it), as Zep's workers do while a client polls.
        self.settle_after_polls: int | None = None
        self._ids = itertools.count(1)

    def uuid(self) -> str:
        return f"00000000-0000-4000-8000-{next(self._ids):012d}"

    # -- state helpers for tests --------------------------------------------------

    def graph_of(self, developer_id: str) -> dict[str, list[dict[str, Any]]]:
        return self.graphs[self.users[developer_id]["graph_uuid"]]

    def add_user(self, developer_id: str) -> dict[str, Any]:
        user_uuid = self.uuid()
        user = {
            "uuid": user_uuid,
            "user_id": developer_id,
            "graph_uuid": self.uuid(),
            "created_at": "2026-03-01T10:00:00Z",
        }
        self.users[developer_id] = user
        self.graphs[user["graph_uuid"]] = {"edges": [], "nodes": [], "episodes": []}
        return user

    def process(self) -> int:
        """Zep's worker: run every pending task (episode processed, deletion done)."""
        return self.drain(self.pending, self._run_task)

    def _run_task(self, job: tuple[str, Any]) -> None:
        task_uuid, work = job
        task = self.tasks[task_uuid]
        if self.fail_next:
            task.update(status="failed", error={"code": "ingest_failed", "message": self.fail_next})
            self.fail_next = None
        else:
            work()
            task["status"] = "succeeded"
        task["completed_at"] = "2026-03-01T10:00:05Z"

    # -- routes -----------------------------------------------------------------------

    def _task(self, kind: str, work: Any) -> dict[str, Any]:
        task = {"uuid": self.uuid(), "status": "pending", "type": kind, "created_at": "2026-03-01T10:00:00Z"}
        self.tasks[task["uuid"]] = task
        self.pending.append((task["uuid"], work))
        return dict(task)

    def _reply(self, model: str, status: int, body: Any) -> Resp:
        return Resp(status, conform(self.models[model], body))

    def create_user(self, req: Req) -> Resp:
        body = req.json
        if body["user_id"] in self.users:
            return Resp(400, {"message": "user already exists"})
        user = self.add_user(body["user_id"])
        if body.get("metadata"):
            user["metadata"] = body["metadata"]
        return self._reply("user", 201, user)

    def lookup(self, req: Req) -> Resp:
        user = self.users.get(req.json.get("user_id"))
        return self._reply("user", 200, user) if user else Resp(404, {"message": "user not found"})

    def add_episode(self, req: Req) -> Resp:
        graph = self.graphs.get(req.params["graph"])
        if graph is None:
            return Resp(404, {"message": "graph not found"})
        body = req.json
        episode = {
            "uuid": self.uuid(),
            "content": body["data"],
            "created_at": "2026-03-01T10:00:00Z",
            "processed": False,
            "source": body.get("type", "text"),
            "graph_uuid": req.params["graph"],
            "metadata": body.get("metadata"),
        }
        graph["episodes"].append(episode)

        def work() -> None:
            episode["processed"] = True

        return self._reply("add", 202, {"episode": dict(episode), "task": self._task("add_episode", work)})

    def _find_episode(self, episode_uuid: str) -> dict[str, Any] | None:
        for graph in self.graphs.values():
            for episode in graph["episodes"]:
                if episode["uuid"] == episode_uuid:
                    return episode
        return None

    def get_episode(self, req: Req) -> Resp:
        if req.params["graph"] not in self.graphs:
            return Resp(404, {"message": "graph not found"})
        # Episode UUIDs are global: the answer names the graph it is in.
        episode = self._find_episode(req.params["episode"])
        return self._reply("episode", 200, episode) if episode else Resp(404, {"message": "not found"})

    def delete_episode(self, req: Req) -> Resp:
        graph = self.graphs.get(req.params["graph"])
        episode = next(
            (e for e in (graph or {}).get("episodes", []) if e["uuid"] == req.params["episode"]), None
        )
        if graph is None or episode is None:
            return Resp(404, {"message": "episode not found"})

        def work() -> None:
            graph["episodes"].remove(episode)

        return self._reply("async", 202, {"task": self._task("delete_episode", work)})

    def delete_user(self, req: Req) -> Resp:
        user = next((u for u in self.users.values() if u["uuid"] == req.params["user"]), None)
        if user is None:
            return Resp(404, {"message": "user not found"})

        def work() -> None:
            self.users.pop(user["user_id"], None)
            self.graphs.pop(user["graph_uuid"], None)

        return Resp(202, conform(self.models["delete_user"], {"task": self._task("delete_user", work)}))

    def get_task(self, req: Req) -> Resp:
        task = self.tasks.get(req.params["task"])
        if task is not None and self.settle_after_polls is not None:
            task["_polls"] = task.get("_polls", 0) + 1
            if task["_polls"] >= self.settle_after_polls:
                self.process()
            task = {k: v for k, v in task.items() if k != "_polls"}
        return self._reply("task", 200, task) if task else Resp(404, {"message": "task not found"})

    def search(self, kind: str) -> Any:
        from zep_cloud.types import EdgePage, EpisodePage, NodePage

        page_model = {"edges": EdgePage, "nodes": NodePage, "episodes": EpisodePage}[kind]

        def handler(req: Req) -> Resp:
            graph = self.graphs.get(req.params["graph"])
            if graph is None:
                return Resp(404, {"message": "graph not found"})
            words = set(req.json["query"].lower().split())
            field = {"edges": "fact", "nodes": "summary", "episodes": "content"}[kind]
            scored = []
            for item in graph[kind]:
                overlap = len(words & set((item.get(field) or "").lower().split()))
                if overlap:
                    scored.append({**item, "score": overlap / len(words)})
            scored.sort(key=lambda i: -i["score"])
            body = {"items": scored[: int(req.arg("page_size", "10") or 10)], "next_cursor": None}
            return Resp(200, conform(page_model, body))

        return handler

    def context(self, req: Req) -> Resp:
        from zep_cloud.types import GraphContextResponse

        graph = self.graphs.get(req.params["graph"])
        if graph is None:
            return Resp(404, {"message": "graph not found"})
        facts = [e["fact"] for e in graph["edges"]]
        return Resp(
            200, conform(GraphContextResponse, {"context": "FACTS:\n" + "\n".join(facts), "truncated": False})
        )

    def graphs_list(self, req: Req) -> Resp:
        from zep_cloud.types import GraphPage

        return Resp(200, conform(GraphPage, {"items": [], "next_cursor": None}))

    def start(self) -> ZepFake:
        def authed(handler: Any) -> Any:
            def wrapped(req: Req) -> Resp:
                if req.headers.get("authorization") != f"Api-Key {API_KEY}":
                    return Resp(401, {"message": "unauthorized"})
                req.params = {k: unquote(v) for k, v in req.params.items()}
                return handler(req)

            return wrapped

        route = self.server.route
        route("POST", f"{BASE}/users", authed(self.create_user))
        route("POST", f"{BASE}/users/lookup", authed(self.lookup))
        route("DELETE", f"{BASE}/users/(?P<user>[^/]+)", authed(self.delete_user))
        route("POST", f"{BASE}/graphs/list", authed(self.graphs_list))
        route("POST", f"{BASE}/graphs/(?P<graph>[^/]+)/episodes", authed(self.add_episode))
        route("GET", f"{BASE}/graphs/(?P<graph>[^/]+)/episodes/(?P<episode>[^/]+)", authed(self.get_episode))
        route(
            "DELETE",
            f"{BASE}/graphs/(?P<graph>[^/]+)/episodes/(?P<episode>[^/]+)",
            authed(self.delete_episode),
        )
        route("GET", f"{BASE}/tasks/(?P<task>[^/]+)", authed(self.get_task))
        for kind in ("edges", "nodes", "episodes"):
            route("POST", f"{BASE}/graphs/(?P<graph>[^/]+)/search/{kind}", authed(self.search(kind)))
        route("POST", f"{BASE}/graphs/(?P<graph>[^/]+)/context", authed(self.context))
        self.server.start()
        return self

    @property
    def url(self) -> str:
        return f"{self.server.url}{BASE}"
