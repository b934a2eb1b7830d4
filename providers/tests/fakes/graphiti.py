"""A local Graphiti REST service (getzep/graphiti ``server/graph_service``).

Request and response bodies go through the service's own DTOs, transcribed here
from ``graph_service/dto`` (``Message``, ``AddMessagesRequest``, ``SearchQuery``,
``FactResult``, ``Result``) and ``graphiti_core``'s ``EpisodicNode``: a field the
service never sends (a ``group_id`` on a fact) cannot make a test pass. As the
service does: ``/messages`` answers 202 and queues the messages for its worker
(:meth:`GraphitiFake.process`), which turns each into an episode with the
message's uuid and extracts facts; an unknown edge or episode is 404; deletes take
any uuid (the service does not scope them — the adapter must).
"""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

from providers.tests.servers import FakeService, Req, Resp, conform


class Message(BaseModel):
    content: str
    uuid: str | None = None
    name: str = ""
    role_type: Literal["user", "assistant", "system"]
    role: str | None
    timestamp: datetime | None = None
    source_description: str = ""


class AddMessagesRequest(BaseModel):
    group_id: str
    messages: list[Message]


class SearchQuery(BaseModel):
    group_ids: list[str] | None = None
    query: str
    max_facts: int = 10


class FactResult(BaseModel):
    uuid: str
    name: str
    fact: str
    valid_at: datetime | None
    invalid_at: datetime | None
    created_at: datetime
    expired_at: datetime | None
    # Newer services add the edge's ends and lineage (get_fact_result_from_edge).
    source_node_uuid: str | None = None
    target_node_uuid: str | None = None
    episodes: list[str] | None = None


class SearchResults(BaseModel):
    facts: list[FactResult]


class Result(BaseModel):
    message: str
    success: bool


class EpisodicNode(BaseModel):
    uuid: str
    name: str
    group_id: str
    labels: list[str]
    created_at: datetime
    source: str
    source_description: str
    content: str
    valid_at: datetime
    entity_edges: list[str]


class GraphitiFake(FakeService):
    def __init__(self) -> None:
        super().__init__()
        self.episodes: list[dict[str, Any]] = []
        self.facts: dict[str, dict[str, Any]] = {}  # uuid -> FactResult + its group (never sent)
        self.queue: list[tuple[str, dict[str, Any]]] = []
        self.deleted: list[tuple[str, str]] = []
        self._ids = itertools.count(1)

    def seed_episode(
        self, group_id: str, content: str, facts: list[dict[str, Any]], uuid: str | None = None
    ) -> str:
        """An episode the service already processed, with the facts extracted from it."""
        episode_uuid = uuid or f"ep-{next(self._ids)}"
        for fact in facts:
            self.facts[fact["uuid"]] = {**fact, "_group": group_id, "episodes": [episode_uuid]}
        self.episodes.append(
            {
                "uuid": episode_uuid,
                "name": "chat",
                "group_id": group_id,
                "labels": [],
                "created_at": "2026-02-01T00:00:00Z",
                "source": "message",
                "source_description": "chat",
                "content": content,
                "valid_at": "2026-02-01T00:00:00Z",
                "entity_edges": [f["uuid"] for f in facts],
            }
        )
        return episode_uuid

    def process(self) -> int:
        """The service's AsyncWorker: each queued message becomes an episode (with the
        message's uuid when it sent one) and one extracted fact."""
        return self.drain(self.queue, self._ingest)

    def _ingest(self, job: tuple[str, dict[str, Any]]) -> None:
        group_id, message = job
        fact_uuid = f"fact-{next(self._ids)}"
        fact = {
            "uuid": fact_uuid,
            "name": "MENTIONS",
            "fact": message["content"],
            "valid_at": None,
            "invalid_at": None,
            "created_at": "2026-03-01T10:00:00Z",
            "expired_at": None,
        }
        self.seed_episode(group_id, message["content"], [fact], uuid=message.get("uuid") or None)

    def _fact(self, fact: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in fact.items() if not k.startswith("_")}

    def add(self, req: Req) -> Resp:
        body = AddMessagesRequest.model_validate(conform(AddMessagesRequest, req.json)).model_dump(
            mode="json"
        )
        for message in body["messages"]:
            self.queue.append((body["group_id"], message))
        return Resp(202, conform(Result, {"message": "Messages added to processing queue", "success": True}))

    def search(self, req: Req) -> Resp:
        query = SearchQuery.model_validate(conform(SearchQuery, req.json))
        words = set(query.query.lower().split())
        found = [
            self._fact(f)
            for f in self.facts.values()
            if f["_group"] in (query.group_ids or []) and words & set(f["fact"].lower().split())
        ]
        return Resp(200, conform(SearchResults, {"facts": found[: query.max_facts]}))

    def list_episodes(self, req: Req) -> Resp:
        last_n = int(req.arg("last_n", "10") or 10)
        found = [e for e in self.episodes if e["group_id"] == req.params["group"]][-last_n:]
        return Resp(200, conform(EpisodicNode, found))

    def edge(self, req: Req) -> Resp:
        fact = self.facts.get(req.params["uuid"])
        if fact is None:
            return Resp(404, {"detail": "Entity edge not found"})
        return Resp(200, conform(FactResult, self._fact(fact)))

    def delete_edge(self, req: Req) -> Resp:
        if self.facts.pop(req.params["uuid"], None) is None:
            return Resp(404, {"detail": "Entity edge not found"})
        self.deleted.append(("edge", req.params["uuid"]))
        return Resp(200, conform(Result, {"message": "Entity Edge deleted", "success": True}))

    def delete_episode(self, req: Req) -> Resp:
        before = len(self.episodes)
        self.episodes = [e for e in self.episodes if e["uuid"] != req.params["uuid"]]
        if len(self.episodes) == before:
            return Resp(404, {"detail": "Episode not found"})
        self.deleted.append(("episode", req.params["uuid"]))
        return Resp(200, conform(Result, {"message": "Episode deleted", "success": True}))

    def delete_group(self, req: Req) -> Resp:
        group = req.params["group"]
        self.episodes = [e for e in self.episodes if e["group_id"] != group]
        self.facts = {k: f for k, f in self.facts.items() if f["_group"] != group}
        self.deleted.append(("group", group))
        return Resp(200, conform(Result, {"message": "Group deleted", "success": True}))

    def start(self) -> GraphitiFake:
        route = self.server.route
        route("GET", "/healthcheck", lambda req: Resp(200, {"status": "healthy"}))
        route("POST", "/messages", self.add)
        route("POST", "/search", self.search)
        route("GET", "/episodes/(?P<group>[^/]+)", self.list_episodes)
        route("GET", "/entity-edge/(?P<uuid>[^/]+)", self.edge)
        route("DELETE", "/entity-edge/(?P<uuid>[^/]+)", self.delete_edge)
        route("DELETE", "/episode/(?P<uuid>[^/]+)", self.delete_episode)
        route("DELETE", "/group/(?P<group>[^/]+)", self.delete_group)
        self.server.start()
        return self
