"""zep: a user's knowledge graph — episodes, entity nodes, relationship edges.

Zep's model is kept as it is: an *episode* is raw data added to a graph (kind
``episode``), an *edge* is a relationship between two entities carrying a fact
and a validity window (kind ``edge``, with ``subject`` / ``predicate`` /
``object`` and ``valid_at`` / ``invalid_at`` in metadata), a *node* is an entity
with a summary (kind ``entity``). Zep answers searches, not keys: the adapter
does not announce ``get`` or ``update`` — no exact-key semantics are inferred
from graph search. Adds are processed by Zep in the background: an add is
``queued`` with Zep's task id until Zep says the episode is processed.

Graph ids: every fedmem user maps to a Zep user ``<tenant>:<user>`` (or
``<tenant>:agent:<agent>`` when there is no user), whose user graph holds its
memory — the tenant prefix makes a shared instance ``logical``. The official
``zep-cloud`` client runs over the guarded egress client.
"""

from __future__ import annotations

from typing import Any, ClassVar

from providers.adapters.base import (
    AdapterError,
    HealthReport,
    Hit,
    MemoryAdapter,
    NewRecord,
    OperationContext,
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
            "get_health",
            "get_capabilities",
        }
    )
    knowledge_capabilities: ClassVar[frozenset[str]] = frozenset({"search_graph"})
    shared_isolation = "logical"
    record_kinds = ("edge", "entity", "episode", "summary")
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
    def graph_id(ctx: OperationContext) -> str:
        if ctx.user_id:
            return f"{ctx.tenant_slug}:{ctx.user_id}"
        if ctx.agent_id:
            return f"{ctx.tenant_slug}:agent:{ctx.agent_id}"
        raise AdapterError("Zep needs a user or agent scope.", retryable=False, reason="scope_required")

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
        graph_id = self.graph_id(ctx)
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
        from zep_cloud.errors import NotFoundError

        client = self.client(ctx)
        graph_id = self.graph_id(ctx)
        kind = "message" if record.kind == "message" else "text"
        try:
            result = client.graph.episode.add(
                graph_id, data=record.text, type=kind, metadata=record.metadata or None
            )
        except NotFoundError:
            # First write for this user: Zep users (and their graphs) are created explicitly.
            client.user.create(user_id=graph_id, metadata={"fedmem_tenant": ctx.tenant_slug})
            result = client.graph.episode.add(
                graph_id, data=record.text, type=kind, metadata=record.metadata or None
            )
        episode, task = result.episode, result.task
        episode_id = f"episode:{episode.uuid_}" if episode and episode.uuid_ else None
        if episode is not None and episode.processed:
            return WriteResult("settled", [episode_id] if episode_id else [])
        return WriteResult(
            "queued",
            [episode_id] if episode_id else [],
            task.uuid_ if task else None,
            {"task_status": task.status if task else None},
        )

    def forget(self, ctx: OperationContext, *, external_id: str) -> WriteResult:
        kind, _, uuid = external_id.partition(":")
        if kind != "episode" or not uuid:
            # Edges and nodes are derived by Zep from episodes; forgetting is done at the source.
            raise AdapterError(
                "Only Zep episodes can be forgotten.", retryable=False, reason="request_refused"
            )
        self.client(ctx).graph.episode.delete(self.graph_id(ctx), uuid)
        return WriteResult("settled", [external_id])
