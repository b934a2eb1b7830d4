"""cognee: knowledge — datasets, cognify (graph building), typed search, relations.

Cognee's model: documents are *added* to a named *dataset*, *cognify* builds a
knowledge graph from it (in the background), and *search* runs one of Cognee's
search types (``CHUNKS``, ``SUMMARIES``, ``GRAPH_COMPLETION``, ``INSIGHTS`` ...)
over chosen datasets. Chunks come over as ``document``, summaries as
``summary``, graph answers as ``summary``, graph nodes as ``entity`` and their
relations as ``edge``. A recall is a ``CHUNKS`` search (no LLM on Cognee's side)
over the tenant's datasets.

Datasets are named ``<tenant>__<name>`` so a shared Cognee is ``logical``: a
tenant only ever names, searches or deletes its own. There is no official
lightweight HTTP client for Cognee's REST API (the ``cognee`` package is the whole
engine), so the adapter speaks it directly over the guarded egress client.
"""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import quote

from providers.adapters.base import (
    AdapterError,
    HealthReport,
    Hit,
    MemoryAdapter,
    OperationContext,
    WriteResult,
    check_status,
    json_body,
    ranked,
)
from providers.credentials import Secret

SEARCH_TYPES = {
    "CHUNKS": "document",
    "CHUNKS_LEXICAL": "document",
    "SUMMARIES": "summary",
    "RAG_COMPLETION": "summary",
    "GRAPH_COMPLETION": "summary",
    "GRAPH_SUMMARY_COMPLETION": "summary",
    "INSIGHTS": "edge",
    "TEMPORAL": "summary",
}
SEPARATOR = "__"


class CogneeAdapter(MemoryAdapter):
    provider = "cognee"
    label = "Cognee"
    memory_capabilities: ClassVar[frozenset[str]] = frozenset({"recall", "get_health", "get_capabilities"})
    knowledge_capabilities: ClassVar[frozenset[str]] = frozenset(
        {
            "ingest_knowledge",
            "build_graph",
            "search_graph",
            "get_relations",
            "delete_dataset",
        }
    )
    shared_isolation = "logical"
    record_kinds = ("document", "summary", "entity", "edge")
    option_types: ClassVar[dict[str, type | tuple[type, ...]]] = {
        "auth": str,  # "bearer" (self-hosted, Authorization) or "api_key" (Cognee Cloud, X-Api-Key)
        "recall_search_type": str,
    }

    @classmethod
    def validate_options(cls, options: Any) -> dict[str, Any]:
        clean = super().validate_options(options)
        if clean.get("auth", "bearer") not in ("bearer", "api_key"):
            raise ValueError("auth is 'bearer' or 'api_key'.")
        if clean.get("recall_search_type", "CHUNKS") not in SEARCH_TYPES:
            raise ValueError(f"recall_search_type is one of {', '.join(SEARCH_TYPES)}.")
        return clean

    def auth_headers(self, secret: Secret | None) -> dict[str, str]:
        if secret is None:
            return {}
        if self.engine.options.get("auth") == "api_key":
            return {"X-Api-Key": secret.reveal()}
        return {"Authorization": f"Bearer {secret.reveal()}"}

    def _url(self, path: str) -> str:
        return f"{self.base_path()}/api/v1{path}"

    @staticmethod
    def dataset_name(ctx: OperationContext, dataset: str) -> str:
        if not dataset or SEPARATOR in dataset:
            raise AdapterError(
                "A dataset name is required and may not contain '__'.",
                retryable=False,
                reason="request_refused",
            )
        return f"{ctx.tenant_slug}{SEPARATOR}{dataset}"

    def _datasets(self, client: Any, ctx: OperationContext) -> list[dict[str, Any]]:
        body = json_body(check_status(client.get(self._url("/datasets")), self.provider), self.provider)
        prefix = f"{ctx.tenant_slug}{SEPARATOR}"
        return [d for d in body or [] if isinstance(d, dict) and str(d.get("name", "")).startswith(prefix)]

    def _dataset(self, client: Any, ctx: OperationContext, dataset: str) -> dict[str, Any]:
        name = self.dataset_name(ctx, dataset)
        for candidate in self._datasets(client, ctx):
            if candidate["name"] == name:
                return candidate
        raise AdapterError(f"No dataset {dataset!r}.", retryable=False, reason="not_found", status=404)

    def _hits(self, body: Any, search_type: str, limit: int) -> list[Hit]:
        kind = SEARCH_TYPES.get(search_type, "document")
        rows: list[tuple[Any, dict[str, Any]]] = []
        for entry in body or []:
            # Newer servers wrap results per dataset; older ones answer a flat list.
            if isinstance(entry, dict) and "search_result" in entry:
                results = entry["search_result"]
                origin = {
                    "dataset_id": entry.get("dataset_id"),
                    "dataset_name": entry.get("dataset_name"),
                }
                for result in results if isinstance(results, list) else [results]:
                    rows.append((result, origin))
            else:
                rows.append((entry, {}))
        hits = []
        for position, (result, origin) in enumerate(rows):
            if isinstance(result, dict):
                text = result.get("text") or result.get("summary") or result.get("name") or ""
                external = result.get("id") or f"{search_type}:{position}"
                metadata = {k: v for k, v in result.items() if k not in {"text", "id", "embedding"}}
            else:
                text, external, metadata = str(result), f"{search_type}:{position}", {}
            dataset = str(origin.get("dataset_name") or "")
            hits.append(
                Hit(
                    provider_id=self.provider,
                    engine_id=self.engine.engine_id,
                    external_id=str(external),
                    kind=kind,
                    text=str(text),
                    provenance={
                        "provider": "cognee",
                        "search_type": search_type,
                        "dataset": dataset.split(SEPARATOR, 1)[-1] or None,
                        "dataset_id": origin.get("dataset_id"),
                    },
                    metadata=metadata,
                )
            )
        return ranked(hits, limit)

    def _search(
        self, ctx: OperationContext, query: str, top_k: int, search_type: str, dataset: str | None
    ) -> list[Hit]:
        with self.http_client(ctx) as client:
            if dataset:
                ids = [self._dataset(client, ctx, dataset)["id"]]
            else:
                ids = [d["id"] for d in self._datasets(client, ctx)]
            if not ids:
                return []  # never search unscoped: that would reach other tenants' datasets
            payload = {"searchType": search_type, "query": query, "datasetIds": ids, "topK": top_k}
            body = json_body(
                check_status(client.post(self._url("/search"), json=payload), self.provider),
                self.provider,
            )
        return self._hits(body, search_type, top_k)

    # -- operations -----------------------------------------------------------

    def get_health(self, ctx: OperationContext) -> HealthReport:
        watch = self.timed()
        with self.http_client(ctx) as client:
            body = json_body(
                check_status(client.get(f"{self.base_path()}/health"), self.provider), self.provider
            )
        status = body.get("status") if isinstance(body, dict) else None
        return HealthReport(
            "ok" if status in ("ready", "healthy", "ok") else "degraded",
            watch.ms,
            {"engine_status": status},
        )

    def recall(self, ctx: OperationContext, *, query: str, top_k: int) -> list[Hit]:
        search_type = str(self.engine.options.get("recall_search_type") or "CHUNKS")
        return self._search(ctx, query, top_k, search_type, None)

    def search_graph(
        self,
        ctx: OperationContext,
        *,
        query: str,
        top_k: int,
        dataset: str | None = None,
        search_type: str | None = None,
    ) -> list[Hit]:
        search_type = search_type or "GRAPH_COMPLETION"
        if search_type not in SEARCH_TYPES:
            raise AdapterError(
                f"Cognee search types: {', '.join(SEARCH_TYPES)}.",
                retryable=False,
                reason="request_refused",
            )
        return self._search(ctx, query, top_k, search_type, dataset)

    def ingest_knowledge(self, ctx: OperationContext, *, dataset: str, documents: list[str]) -> WriteResult:
        name = self.dataset_name(ctx, dataset)
        files = [
            ("data", (f"document-{index}.txt", text.encode("utf-8"), "text/plain"))
            for index, text in enumerate(documents)
        ]
        with self.http_client(ctx) as client:
            body = json_body(
                check_status(
                    client.post(self._url("/add"), data={"datasetName": name}, files=files),
                    self.provider,
                ),
                self.provider,
            )
        # Added is not yet knowledge: build_graph (cognify) turns it into a graph.
        return WriteResult(
            "settled",
            [],
            None,
            {
                "dataset": dataset,
                "documents": len(documents),
                "status": body.get("status") if isinstance(body, dict) else None,
            },
        )

    def build_graph(self, ctx: OperationContext, *, dataset: str) -> WriteResult:
        with self.http_client(ctx) as client:
            dataset_id = self._dataset(client, ctx, dataset)["id"]
            body = json_body(
                check_status(
                    client.post(
                        self._url("/cognify"),
                        json={"datasetIds": [dataset_id], "runInBackground": True},
                    ),
                    self.provider,
                ),
                self.provider,
            )
        run = body.get(str(dataset_id), body) if isinstance(body, dict) else {}
        run_id = run.get("pipeline_run_id") if isinstance(run, dict) else None
        return WriteResult(
            "queued",
            [str(dataset_id)],
            str(run_id) if run_id else None,
            {"status": run.get("status") if isinstance(run, dict) else None},
        )

    def get_relations(self, ctx: OperationContext, *, external_id: str) -> list[Hit]:
        kind, _, rest = external_id.partition(":")
        dataset, _, node_id = rest.partition(":")
        if kind == "dataset":
            # Every relation of the dataset's graph (node_id empty: no node filter).
            dataset, node_id = rest, ""
        elif kind != "node" or not node_id:
            raise AdapterError(
                "Relations are read for node:<dataset>:<node id> or dataset:<dataset>.",
                retryable=False,
                reason="request_refused",
            )
        with self.http_client(ctx) as client:
            dataset_id = self._dataset(client, ctx, dataset)["id"]
            graph = json_body(
                check_status(
                    client.get(self._url(f"/datasets/{quote(str(dataset_id))}/graph")),
                    self.provider,
                ),
                self.provider,
            )
        labels = {node["id"]: node.get("label") or node["id"] for node in graph.get("nodes", [])}
        hits = []
        for edge in graph.get("edges", []):
            if node_id and node_id not in (edge.get("source"), edge.get("target")):
                continue
            subject, obj = (
                labels.get(edge["source"], edge["source"]),
                labels.get(edge["target"], edge["target"]),
            )
            hits.append(
                Hit(
                    provider_id=self.provider,
                    engine_id=self.engine.engine_id,
                    external_id=f"edge:{edge['source']}:{edge.get('label')}:{edge['target']}",
                    kind="edge",
                    text=f"{subject} {edge.get('label')} {obj}",
                    provenance={"provider": "cognee", "dataset": dataset},
                    metadata={"subject": subject, "predicate": edge.get("label"), "object": obj},
                )
            )
        return ranked(hits, len(hits))

    def delete_dataset(self, ctx: OperationContext, *, dataset: str) -> WriteResult:
        with self.http_client(ctx) as client:
            dataset_id = self._dataset(client, ctx, dataset)["id"]
            check_status(client.delete(self._url(f"/datasets/{quote(str(dataset_id))}")), self.provider)
        return WriteResult("settled", [str(dataset_id)], None, {"dataset": dataset})
