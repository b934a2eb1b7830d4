"""graphiti: temporal facts with validity windows, episodes, and their lineage.

Graphiti's model: an *episode* is ingested content (kind ``episode``); Graphiti
extracts entity nodes and *facts* — edges between entities with a relation name,
a fact sentence and a validity window (``valid_at`` / ``invalid_at``, plus
``expired_at`` once superseded). Facts come over as kind ``fact`` with the
window in metadata and, when Graphiti supplies it, the episodes they came from
(lineage) in provenance. Ingestion is processed by Graphiti in the background, so
a write is ``queued``.

The transport is the caller's: the adapter talks to a :class:`GraphitiTransport`.
The default, :class:`HttpGraphitiTransport`, speaks the Graphiti REST service
(``/messages``, ``/search``, ``/episodes/{group_id}``, ``/entity-edge/{uuid}``,
``/episode/{uuid}``, ``/group/{group_id}``, ``/healthcheck``) over the guarded
egress client; a caller embedding ``graphiti_core`` passes its own transport.

Group ids: ``naming.join(tenant, "u", user)`` (or ``(tenant, "a", agent)``):
escaped, so no two tenants or scopes share a group (``acme_corp`` / ``acme-corp``
and ``a.b@x.io`` / ``a-b-x-io`` stay apart), in the ``[A-Za-z0-9_-]`` Graphiti
accepts. A shared Graphiti service is ``logical``.

Isolation by id: Graphiti's ``FactResult`` carries no group id, and its delete
routes take any uuid. So an id is the caller's only if Graphiti's own answer for
the caller's group names it: an episode must be among the group's episodes, a
fact among those episodes' ``entity_edges`` (or list one of them in its
``episodes`` lineage). The check reads at most ``OWNERSHIP_WINDOW`` recent
episodes; an older record answers not found rather than risk another group's.

Writes send a message ``uuid`` (the episode's uuid once Graphiti processed it),
so a write returns its id and settles when that episode appears in the group.
"""

from __future__ import annotations

import uuid as uuid_lib
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol
from urllib.parse import quote

import httpx

from providers.adapters import naming
from providers.adapters.base import (
    AdapterError,
    HealthReport,
    Hit,
    MemoryAdapter,
    NewRecord,
    OperationContext,
    Settlement,
    WriteResult,
    check_status,
    json_body,
    ranked,
)

OWNERSHIP_WINDOW = 1000


class GraphitiTransport(Protocol):
    def health(self) -> dict[str, Any]: ...
    def add_messages(self, group_id: str, messages: list[dict[str, Any]]) -> dict[str, Any]: ...
    def search(self, group_id: str, query: str, max_facts: int) -> list[dict[str, Any]]: ...
    def episodes(self, group_id: str, last_n: int) -> list[dict[str, Any]]: ...
    def edge(self, uuid: str) -> dict[str, Any]: ...
    def delete_edge(self, uuid: str) -> None: ...
    def delete_episode(self, uuid: str) -> None: ...
    def delete_group(self, group_id: str) -> None: ...


class HttpGraphitiTransport:
    """The Graphiti REST service, through an httpx client the adapter owns."""

    provider = "graphiti"

    def __init__(self, client: httpx.Client, base_path: str = "") -> None:
        self.client = client
        self.base = base_path

    def _json(self, response: httpx.Response) -> Any:
        return json_body(check_status(response, self.provider), self.provider)

    def health(self) -> dict[str, Any]:
        return dict(self._json(self.client.get(f"{self.base}/healthcheck")))

    def add_messages(self, group_id: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
        return dict(
            self._json(
                self.client.post(f"{self.base}/messages", json={"group_id": group_id, "messages": messages})
            )
        )

    def search(self, group_id: str, query: str, max_facts: int) -> list[dict[str, Any]]:
        body = self._json(
            self.client.post(
                f"{self.base}/search",
                json={"group_ids": [group_id], "query": query, "max_facts": max_facts},
            )
        )
        return list(body.get("facts", []))

    def episodes(self, group_id: str, last_n: int) -> list[dict[str, Any]]:
        return list(
            self._json(
                self.client.get(f"{self.base}/episodes/{quote(group_id, safe='')}", params={"last_n": last_n})
            )
        )

    def edge(self, uuid: str) -> dict[str, Any]:
        return dict(self._json(self.client.get(f"{self.base}/entity-edge/{quote(uuid, safe='')}")))

    def delete_edge(self, uuid: str) -> None:
        check_status(self.client.delete(f"{self.base}/entity-edge/{quote(uuid, safe='')}"), self.provider)

    def delete_episode(self, uuid: str) -> None:
        check_status(self.client.delete(f"{self.base}/episode/{quote(uuid, safe='')}"), self.provider)

    def delete_group(self, group_id: str) -> None:
        check_status(self.client.delete(f"{self.base}/group/{quote(group_id, safe='')}"), self.provider)


class GraphitiAdapter(MemoryAdapter):
    provider = "graphiti"
    label = "Graphiti"
    memory_capabilities: ClassVar[frozenset[str]] = frozenset(
        {
            "remember",
            "recall",
            "search",
            "list",
            "get",
            "forget",
            "purge",
            "get_health",
            "get_capabilities",
        }
    )
    knowledge_capabilities: ClassVar[frozenset[str]] = frozenset({"search_graph"})
    shared_isolation = "logical"
    record_kinds = ("fact", "episode")
    injectable = ("http_transport", "transport")

    def __init__(self, *args: Any, transport: GraphitiTransport | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._transport = transport

    def transport(self, ctx: OperationContext) -> GraphitiTransport:
        if self._transport is not None:
            return self._transport
        return HttpGraphitiTransport(self.http_client(ctx), self.base_path())

    @staticmethod
    def group_id(ctx: OperationContext) -> str:
        if ctx.user_id:
            return naming.join(ctx.tenant_slug, "u", ctx.user_id)
        if ctx.agent_id:
            return naming.join(ctx.tenant_slug, "a", ctx.agent_id)
        raise AdapterError("Graphiti needs a user or agent scope.", retryable=False, reason="scope_required")

    def _owned_episodes(self, transport: GraphitiTransport, ctx: OperationContext) -> list[dict[str, Any]]:
        group = self.group_id(ctx)
        return [e for e in transport.episodes(group, OWNERSHIP_WINDOW) if e.get("group_id") in (None, group)]

    @staticmethod
    def _not_found() -> AdapterError:
        return AdapterError("No such Graphiti record.", retryable=False, reason="not_found", status=404)

    def _owned_fact(self, transport: GraphitiTransport, ctx: OperationContext, uuid: str) -> dict[str, Any]:
        episodes = self._owned_episodes(transport, ctx)
        edges = {str(edge) for episode in episodes for edge in episode.get("entity_edges") or []}
        try:
            fact = transport.edge(uuid)
        except AdapterError as exc:
            if exc.status in (404, 422):
                raise self._not_found() from None
            raise
        lineage = {str(e) for e in fact.get("episodes") or []}
        if uuid not in edges and not lineage & {str(e["uuid"]) for e in episodes}:
            raise self._not_found()
        return fact

    # -- records ---------------------------------------------------------------

    def fact_hit(self, fact: dict[str, Any]) -> Hit:
        episodes = fact.get("episodes") or []
        return Hit(
            provider_id=self.provider,
            engine_id=self.engine.engine_id,
            external_id=f"fact:{fact['uuid']}",
            kind="fact",
            text=str(fact.get("fact") or ""),
            provenance={
                "provider": "graphiti",
                "uuid": fact["uuid"],
                "episodes": ",".join(map(str, episodes)),
            },
            created_at=fact.get("created_at"),
            metadata={
                "relation": fact.get("name"),
                # Structured when Graphiti names the source node: federation compares
                # facts about one subject and relation, never their wording.
                "subject": fact.get("source_node_uuid"),
                "predicate": fact.get("name") if fact.get("source_node_uuid") else None,
                "object": fact.get("target_node_uuid"),
                "valid_at": fact.get("valid_at"),
                "invalid_at": fact.get("invalid_at"),
                "expired_at": fact.get("expired_at"),
            },
            score=fact.get("score"),
        )

    def episode_hit(self, episode: dict[str, Any]) -> Hit:
        return Hit(
            provider_id=self.provider,
            engine_id=self.engine.engine_id,
            external_id=f"episode:{episode['uuid']}",
            kind="episode",
            text=str(episode.get("content") or ""),
            provenance={
                "provider": "graphiti",
                "uuid": episode["uuid"],
                "group_id": episode.get("group_id"),
                "entity_edges": ",".join(map(str, episode.get("entity_edges") or [])),
            },
            created_at=episode.get("created_at"),
            metadata={
                "name": episode.get("name"),
                "source": episode.get("source"),
                "source_description": episode.get("source_description"),
                "valid_at": episode.get("valid_at"),
            },
        )

    # -- operations -----------------------------------------------------------

    def get_health(self, ctx: OperationContext) -> HealthReport:
        watch = self.timed()
        body = self.transport(ctx).health()
        return HealthReport(
            "ok" if body.get("status") == "healthy" else "degraded",
            watch.ms,
            {"engine_status": body.get("status")},
        )

    def remember(self, ctx: OperationContext, *, record: NewRecord) -> WriteResult:
        role_type = record.role if record.role in {"user", "assistant", "system"} else "user"
        episode_uuid = str(uuid_lib.uuid4())
        message = {
            "content": record.text,
            "uuid": episode_uuid,
            "role_type": role_type,
            "role": record.metadata.get("name", role_type),
            "name": "fedmem",
            "timestamp": datetime.now(UTC).isoformat(),
            "source_description": f"fedmem:{ctx.tenant_slug}",
        }
        group = self.group_id(ctx)
        body = self.transport(ctx).add_messages(group, [message])
        # Graphiti answers 202: the episode is queued for extraction, not yet in the graph.
        return WriteResult(
            "queued",
            [f"episode:{episode_uuid}"],
            episode_uuid,
            {"message": body.get("message")},
            handle={"group_id": group, "episode_uuid": episode_uuid},
        )

    def settle(self, ctx: OperationContext, *, handle: dict[str, Any]) -> Settlement:
        """Graphiti has no task API: the write is settled once the episode with the
        message's uuid is in the group (it never reports a failure; the reconcile
        task gives up after its own bound)."""
        group, episode_uuid = str(handle.get("group_id") or ""), str(handle.get("episode_uuid") or "")
        if group != self.group_id(ctx):
            return Settlement("failed", reason="The write belongs to another scope.")
        for episode in self.transport(ctx).episodes(group, OWNERSHIP_WINDOW):
            if str(episode.get("uuid")) == episode_uuid:
                return Settlement(
                    "settled",
                    external_ids=[f"episode:{episode_uuid}"],
                    detail={"entity_edges": len(episode.get("entity_edges") or [])},
                )
        return Settlement("queued", detail={"episode_uuid": episode_uuid})

    def recall(self, ctx: OperationContext, *, query: str, top_k: int) -> list[Hit]:
        return self.search(ctx, query=query, top_k=top_k)

    def search(self, ctx: OperationContext, *, query: str, top_k: int) -> list[Hit]:
        facts = self.transport(ctx).search(self.group_id(ctx), query, top_k)
        return ranked([self.fact_hit(fact) for fact in facts], top_k)

    def search_graph(
        self,
        ctx: OperationContext,
        *,
        query: str,
        top_k: int,
        dataset: str | None = None,
        search_type: str | None = None,
    ) -> list[Hit]:
        return self.search(ctx, query=query, top_k=top_k)

    def list(self, ctx: OperationContext, *, limit: int) -> list[Hit]:
        episodes = self.transport(ctx).episodes(self.group_id(ctx), limit)
        return ranked([self.episode_hit(episode) for episode in episodes], limit)

    def get(self, ctx: OperationContext, *, external_id: str) -> Hit:
        kind, _, uuid = external_id.partition(":")
        if kind != "fact" or not uuid:
            raise self._not_found()
        hit = self.fact_hit(self._owned_fact(self.transport(ctx), ctx, uuid))
        hit.rank = 1
        return hit

    def forget(self, ctx: OperationContext, *, external_id: str) -> WriteResult:
        kind, _, uuid = external_id.partition(":")
        transport = self.transport(ctx)
        if kind == "episode" and uuid:
            if uuid not in {str(e["uuid"]) for e in self._owned_episodes(transport, ctx)}:
                raise self._not_found()
            transport.delete_episode(uuid)
        elif kind == "fact" and uuid:
            self._owned_fact(transport, ctx, uuid)
            transport.delete_edge(uuid)
        else:
            raise self._not_found()
        return WriteResult("settled", [external_id])

    def purge(self, ctx: OperationContext) -> WriteResult:
        self.transport(ctx).delete_group(self.group_id(ctx))
        return WriteResult("settled", [], None, {"group_id": self.group_id(ctx)})
