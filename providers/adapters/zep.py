"""zep: a user's knowledge graph — episodes, entity nodes, relationship edges.

Zep's model is kept as it is: an *episode* is raw data added to a graph (kind
``episode``), an *edge* is a relationship between two entities carrying a fact
and a validity window (kind ``edge``, with ``subject`` / ``predicate`` /
``object`` and ``valid_at`` / ``invalid_at`` in metadata), a *node* is an entity
with a summary (kind ``entity``). Zep answers searches, not keys: the adapter
does not announce ``get`` or ``update`` — no exact-key semantics are inferred
from graph search. Adds are processed by Zep in the background: an add is
``queued`` with Zep's task id until Zep says the episode is processed.

Addressing: Zep v4 addresses a graph by its UUID, not by the developer's id. Every
fedmem user maps to a Zep user whose developer id is
``naming.join(tenant, "u", user)`` (or ``(tenant, "a", agent)`` when there is no
user; collision-free, see :mod:`providers.adapters.naming`); the adapter resolves
it to the user's graph UUID with ``user.lookup`` (creating the user on the first
write) and only ever sends that UUID. A user that does not exist has no memory:
reads answer empty without asking for a graph Zep would answer 404 for.

Isolation: every graph call names the caller's own graph UUID; a forget first
reads the episode and refuses (as not found) one whose ``graph_uuid`` is not the
caller's. Adds and deletes are asynchronous in Zep: both answer a task, reported
``queued`` with the task's UUID until ``task.get`` says succeeded or failed.
"""

from __future__ import annotations

from typing import Any, ClassVar

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
    ranked,
)
from providers.credentials import Secret

SCOPES = ("edges", "nodes", "episodes")


class ZepAdapter(MemoryAdapter):
    provider = "zep"
    sdk_modules = ("zep_cloud.client",)
    label = "Zep"
    memory_capabilities: ClassVar[frozenset[str]] = frozenset(
        {
            "remember",
            "recall",
            "search",
            "forget",
            "purge",
            "get_health",
            "get_capabilities",
        }
    )
    knowledge_capabilities: ClassVar[frozenset[str]] = frozenset({"search_graph"})
    shared_isolation = "logical"
    record_kinds = ("edge", "entity", "episode", "summary")
    injectable = ("http_transport", "client")

    def __init__(self, *args: Any, client: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._client = client
        self._graphs: dict[str, str] = {}
        self._users: dict[str, str] = {}

    option_types: ClassVar[dict[str, type | tuple[type, ...]]] = {
        "recall_scopes": list,  # which of edges / nodes / episodes a recall searches
        "include_context": bool,  # add Zep's assembled context block as one summary
    }

    @classmethod
    def validate_options(cls, options: Any) -> dict[str, Any]:
        clean = super().validate_options(options)
        if not set(clean.get("recall_scopes", [])) <= set(SCOPES):
            raise ValueError(f"recall_scopes are among {', '.join(SCOPES)}.")
        return clean

    def auth_headers(self, secret: Secret | None) -> dict[str, str]:
        return {}  # the Zep client sets "Authorization: Api-Key <key>"

    def client(self, ctx: OperationContext) -> Any:
        if self._client is not None:
            return self._client
        from zep_cloud.client import Zep

        secret = self.credential()
        if secret is None:
            raise AdapterError("Zep needs an API key.", retryable=False, reason="credential_missing")
        return Zep(
            api_key=secret.reveal(),
            base_url=self.engine.base_url,
            max_retries=0,
            follow_redirects=False,
            httpx_client=self.http_client(ctx, with_auth=False),
        )

    @staticmethod
    def user_key(ctx: OperationContext) -> str:
        """The Zep developer user id of the caller's graph."""
        if ctx.user_id:
            return naming.join(ctx.tenant_slug, "u", ctx.user_id)
        if ctx.agent_id:
            return naming.join(ctx.tenant_slug, "a", ctx.agent_id)
        raise AdapterError("Zep needs a user or agent scope.", retryable=False, reason="scope_required")

    def graph_uuid(self, client: Any, ctx: OperationContext, *, create: bool = False) -> str | None:
        """The caller's graph UUID, from Zep's own lookup (None: no such user yet)."""
        from zep_cloud.errors import NotFoundError

        key = self.user_key(ctx)
        if key in self._graphs:
            return self._graphs[key]
        try:
            user = client.user.lookup(user_id=key)
        except NotFoundError:
            if not create:
                return None
            user = client.user.create(user_id=key, metadata={"fedmem_tenant": ctx.tenant_slug})
        graph = user.graph_uuid or user.uuid_
        if not graph:
            raise AdapterError("Zep answered a user without a graph.", retryable=True)
        self._graphs[key] = graph
        if user.uuid_:
            self._users[key] = user.uuid_
        return str(graph)

    # -- records ---------------------------------------------------------------

    def _base(
        self, item: Any, kind: str, text: str, provenance: dict[str, Any], metadata: dict[str, Any]
    ) -> Hit:
        return Hit(
            provider_id=self.provider,
            engine_id=self.engine.engine_id,
            external_id=f"{kind}:{item.uuid_}",
            kind=kind,
            text=text,
            provenance={"provider": "zep", "uuid": item.uuid_, **provenance},
            created_at=getattr(item, "created_at", None),
            metadata=metadata,
            score=getattr(item, "score", None)
            if getattr(item, "score", None) is not None
            else getattr(item, "relevance", None),
        )

    def edge_hit(self, edge: Any) -> Hit:
        return self._base(
            edge,
            "edge",
            edge.fact or "",
            {"episodes": ",".join(edge.episode_uuids or [])},
            {
                "subject": edge.source_node_name,
                "predicate": edge.name,
                "object": edge.target_node_name,
                "valid_at": edge.valid_at,
                "invalid_at": edge.invalid_at,
                "expired_at": edge.expired_at,
                "source_node_uuid": edge.source_node_uuid,
                "target_node_uuid": edge.target_node_uuid,
            },
        )

    def node_hit(self, node: Any) -> Hit:
        text = f"{node.name}: {node.summary}" if node.summary else str(node.name or "")
        return self._base(node, "entity", text, {}, {"name": node.name, "labels": node.labels})

    def episode_hit(self, episode: Any) -> Hit:
        return self._base(
            episode,
            "episode",
            episode.content or "",
            {
                "source": episode.source,
                "thread_uuid": episode.thread_uuid,
            },
            {
                "role": episode.role,
                "processed": episode.processed,
                "source_description": episode.source_description,
                **(episode.metadata or {}),
            },
        )

    def _search(self, ctx: OperationContext, query: str, top_k: int, scopes: list[str]) -> list[list[Hit]]:
        client = self.client(ctx)
        graph_id = self.graph_uuid(client, ctx)
        if graph_id is None:
            return []  # no Zep user for this scope: nothing remembered there
        lists: list[list[Hit]] = []
        for scope in scopes:
            if scope == "edges":
                page = client.graph.search_edges(graph_id, query=query, page_size=top_k)
                lists.append([self.edge_hit(edge) for edge in page.items or []])
            elif scope == "nodes":
                page = client.graph.search_nodes(graph_id, query=query, page_size=top_k)
                lists.append([self.node_hit(node) for node in page.items or []])
            elif scope == "episodes":
                page = client.graph.search_episodes(graph_id, query=query, page_size=top_k)
                lists.append([self.episode_hit(episode) for episode in page.items or []])
        if self.engine.options.get("include_context"):
            context = client.graph.get_context(graph_id, query=query)
            if context.context:
                lists.insert(
                    0,
                    [
                        Hit(
                            provider_id=self.provider,
                            engine_id=self.engine.engine_id,
                            external_id=f"context:{graph_id}",
                            kind="summary",
                            text=context.context,
                            provenance={"provider": "zep", "graph": graph_id},
                            metadata={"truncated": context.truncated},
                        )
                    ],
                )
        return lists

    @staticmethod
    def interleave(lists: list[list[Hit]], limit: int) -> list[Hit]:
        """One order for one source: each scope keeps Zep's own order and the scopes take
        turns (scores of different scopes are not comparable, not even inside Zep)."""
        out: list[Hit] = []
        for position in range(max((len(hits) for hits in lists), default=0)):
            out.extend(hits[position] for hits in lists if position < len(hits))
        return ranked(out, limit)

    # -- operations -----------------------------------------------------------

    def get_health(self, ctx: OperationContext) -> HealthReport:
        watch = self.timed()
        page = self.client(ctx).graph.list(page_size=1)
        return HealthReport("ok", watch.ms, {"graphs_visible": len(page.items or [])})

    def recall(self, ctx: OperationContext, *, query: str, top_k: int) -> list[Hit]:
        scopes = list(self.engine.options.get("recall_scopes") or ["edges", "episodes"])
        return self.interleave(self._search(ctx, query, top_k, scopes), top_k)

    def search(self, ctx: OperationContext, *, query: str, top_k: int) -> list[Hit]:
        return self.interleave(self._search(ctx, query, top_k, list(SCOPES)), top_k)

    def search_graph(
        self,
        ctx: OperationContext,
        *,
        query: str,
        top_k: int,
        dataset: str | None = None,
        search_type: str | None = None,
    ) -> list[Hit]:
        scope = search_type or "edges"
        if scope not in SCOPES:
            raise AdapterError(
                f"Zep searches {', '.join(SCOPES)}.", retryable=False, reason="request_refused"
            )
        return self.interleave(self._search(ctx, query, top_k, [scope]), top_k)

    def remember(self, ctx: OperationContext, *, record: NewRecord) -> WriteResult:
        client = self.client(ctx)
        graph = self.graph_uuid(client, ctx, create=True)
        kind = "message" if record.kind == "message" else "text"
        result = client.graph.episode.add(
            graph, data=record.text, type=kind, metadata=record.metadata or None
        )
        episode, task = result.episode, result.task
        episode_id = f"episode:{episode.uuid_}" if episode and episode.uuid_ else None
        ids = [episode_id] if episode_id else []
        if task is None or not task.uuid_:
            if episode is not None and episode.processed:
                return WriteResult("settled", ids)
            return WriteResult("queued", ids, None, {"task_status": None})
        return WriteResult(
            "queued", ids, task.uuid_, {"task_status": task.status}, handle={"task_uuid": task.uuid_}
        )

    def forget(self, ctx: OperationContext, *, external_id: str) -> WriteResult:
        from zep_cloud.errors import BadRequestError, NotFoundError

        kind, _, uuid = external_id.partition(":")
        if kind != "episode" or not uuid:
            # Edges and nodes are derived by Zep from episodes; forgetting is done at the source.
            raise AdapterError(
                "Only Zep episodes can be forgotten.", retryable=False, reason="request_refused"
            )
        client = self.client(ctx)
        graph = self.graph_uuid(client, ctx)
        not_found = AdapterError("No such Zep episode.", retryable=False, reason="not_found", status=404)
        if graph is None:
            raise not_found
        try:
            episode = client.graph.episode.get(graph, uuid)
        except (NotFoundError, BadRequestError):
            raise not_found from None
        # Zep says which graph the episode is in: another tenant's is "not found".
        if episode.graph_uuid and episode.graph_uuid != graph:
            raise not_found
        result = client.graph.episode.delete(graph, uuid)
        task = getattr(result, "task", None)
        if task is None or not task.uuid_:
            return WriteResult("settled", [external_id])
        return WriteResult(
            "queued",
            [external_id],
            task.uuid_,
            {"task_status": task.status},
            handle={"task_uuid": task.uuid_},
        )

    def purge(self, ctx: OperationContext) -> WriteResult:
        """Delete the caller's Zep user and with it its graph (how a subject is erased
        in Zep); Zep does it in the background, so it is queued with its task."""
        client = self.client(ctx)
        key = self.user_key(ctx)
        if self.graph_uuid(client, ctx) is None or key not in self._users:
            return WriteResult("settled", [], None, {"deleted": 0})
        result = client.user.delete(self._users.pop(key))
        self._graphs.pop(key, None)
        task = getattr(result, "task", None)
        if task is None or not task.uuid_:
            return WriteResult("settled", [], None, {"deleted": 1})
        return WriteResult(
            "queued", [], task.uuid_, {"task_status": task.status}, handle={"task_uuid": task.uuid_}
        )

    def settle(self, ctx: OperationContext, *, handle: dict[str, Any]) -> Settlement:
        from zep_cloud.errors import NotFoundError

        task_uuid = str(handle.get("task_uuid") or "")
        if not task_uuid:
            return Settlement("failed", reason="No Zep task to follow.")
        try:
            task = self.client(ctx).task.get(task_uuid)
        except NotFoundError:
            return Settlement("failed", reason="Zep has no such task.", detail={"task_uuid": task_uuid})
        status = str(task.status or "")
        detail = {"task_uuid": task_uuid, "task_status": status, "completed_at": task.completed_at}
        if status in ("succeeded", "partial"):
            if status == "partial" and task.error is not None:
                detail["partial_error"] = task.error.message
            return Settlement("settled", detail=detail)
        if status == "failed":
            message = (task.error.message or task.error.code) if task.error else None
            return Settlement(
                "failed", reason=str(message or "Zep reports the task failed.")[:500], detail=detail
            )
        return Settlement("queued", detail=detail)
