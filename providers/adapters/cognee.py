"""cognee: knowledge — datasets, cognify (graph building), typed search, relations.

Cognee's model: documents are *added* to a named *dataset*, *cognify* builds a
knowledge graph from it (in the background), and *search* runs one of Cognee's
search types (``CHUNKS``, ``SUMMARIES``, ``GRAPH_COMPLETION`` ...)
over chosen datasets. Chunks come over as ``document``, summaries as
``summary``, graph answers as ``summary``, graph nodes as ``entity`` and their
relations as ``edge``. A recall is a ``CHUNKS`` search (no LLM on Cognee's side)
over the tenant's datasets.

Datasets are named ``naming.join(tenant, dataset)`` (escaped, so ``acme`` can
never read ``acme__evil``'s datasets and no dataset name the slug rules allow is
refused); a dataset is the caller's only if its name decodes to exactly the
caller's tenant, so a shared Cognee is ``logical``.

A cognify run is followed to its end: ``build_graph`` is ``queued`` with the
dataset and pipeline run ids, and ``GET /api/v1/datasets/status`` says when the
``cognify_pipeline`` completed or errored.

Credentials: ``auth`` is ``api_key`` (Cognee Cloud, ``X-Api-Key``), ``bearer`` (a
token used as given; an expired JWT is reported as such, never sent) or ``login``
(the credential is ``<email>:<password>``; the adapter signs in at
``/api/v1/auth/login`` and renews the token before it expires or when Cognee
answers 401). There is no official lightweight HTTP client for Cognee's REST API
(the ``cognee`` package is the whole engine), so the adapter speaks it directly
over the guarded egress client.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from typing import Any, ClassVar
from urllib.parse import quote

import httpx

from providers.adapters import naming
from providers.adapters.base import (
    AdapterError,
    HealthReport,
    Hit,
    MemoryAdapter,
    OperationContext,
    Settlement,
    WriteResult,
    check_status,
    json_body,
    ranked,
)
from providers.credentials import Secret

# Cognee's SearchType values that retrieve (raw CYPHER / NATURAL_LANGUAGE queries,
# FEEDBACK and CODING_RULES are not memory retrieval and are not claimed).
SEARCH_TYPES = {
    "CHUNKS": "document",
    "CHUNKS_LEXICAL": "document",
    "SUMMARIES": "summary",
    "RAG_COMPLETION": "summary",
    "TRIPLET_COMPLETION": "summary",
    "GRAPH_COMPLETION": "summary",
    "GRAPH_SUMMARY_COMPLETION": "summary",
    "GRAPH_COMPLETION_COT": "summary",
    "GRAPH_COMPLETION_CONTEXT_EXTENSION": "summary",
    "TEMPORAL": "summary",
}
AUTH_MODES = ("bearer", "api_key", "login")
# Renew a signed-in token this long before it expires.
TOKEN_MARGIN_SECONDS = 60
RUNNING = {"DATASET_PROCESSING_INITIATED", "DATASET_PROCESSING_STARTED"}

_TOKENS: dict[tuple[str, str], tuple[str, float]] = {}
_TOKENS_LOCK = threading.Lock()


def jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT (read, not verified: only to know when to renew)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    exp = payload.get("exp") if isinstance(payload, dict) else None
    return float(exp) if isinstance(exp, int | float) else None


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
        "auth": str,  # "bearer", "api_key" (Cognee Cloud, X-Api-Key) or "login" (email:password)
        "recall_search_type": str,
    }

    @classmethod
    def validate_options(cls, options: Any) -> dict[str, Any]:
        clean = super().validate_options(options)
        if clean.get("auth", "bearer") not in AUTH_MODES:
            raise ValueError(f"auth is one of {', '.join(AUTH_MODES)}.")
        if clean.get("recall_search_type", "CHUNKS") not in SEARCH_TYPES:
            raise ValueError(f"recall_search_type is one of {', '.join(SEARCH_TYPES)}.")
        return clean

    def auth_headers(self, secret: Secret | None) -> dict[str, str]:
        if secret is None:
            return {}
        mode = self.engine.options.get("auth") or "bearer"
        if mode == "api_key":
            return {"X-Api-Key": secret.reveal()}
        if mode == "login":
            return {}  # the signed-in token is added per request (see _call)
        token = secret.reveal()
        expiry = jwt_expiry(token)
        if expiry is not None and expiry <= time.time():
            raise AdapterError(
                "The Cognee bearer token has expired; use auth 'login' to have it renewed.",
                retryable=False,
                reason="credential_expired",
            )
        return {"Authorization": f"Bearer {token}"}

    # -- transport and sign-in ----------------------------------------------------

    def _client(self, ctx: OperationContext) -> httpx.Client:
        return self.http_client(ctx)

    def _base(self) -> str:
        return self.base_path()

    def _url(self, path: str) -> str:
        return f"{self._base()}/api/v1{path}"

    def _token_key(self) -> tuple[str, str]:
        secret = self.credential()
        if secret is None:
            raise AdapterError(
                "Cognee sign-in needs a credential.", retryable=False, reason="credential_missing"
            )
        return self.engine.base_url, hashlib.sha256(secret.reveal().encode()).hexdigest()

    def _sign_in(self, client: httpx.Client) -> str:
        secret = self.credential()
        assert secret is not None
        email, sep, password = secret.reveal().partition(":")
        if not sep:
            raise AdapterError(
                "A Cognee login credential is '<email>:<password>'.",
                retryable=False,
                reason="credential_invalid",
            )
        response = client.post(self._url("/auth/login"), data={"username": email, "password": password})
        body = json_body(check_status(response, self.provider), self.provider)
        token = str(body.get("access_token") or "") if isinstance(body, dict) else ""
        if not token:
            raise AdapterError("Cognee answered a sign-in without a token.", retryable=True)
        # Without an exp claim, keep the token for the hour Cognee issues by default.
        expiry = jwt_expiry(token) or time.time() + 3600
        with _TOKENS_LOCK:
            _TOKENS[self._token_key()] = (token, expiry)
        return token

    def _token(self, client: httpx.Client, *, renew: bool = False) -> str:
        key = self._token_key()
        with _TOKENS_LOCK:
            known = _TOKENS.get(key)
        if known and not renew and known[1] - TOKEN_MARGIN_SECONDS > time.time():
            return known[0]
        return self._sign_in(client)

    def _call(self, ctx: OperationContext, method: str, path: str, **kwargs: Any) -> Any:
        """One Cognee call (JSON answer), signed in when ``auth`` is ``login``."""
        with self._client(ctx) as client:
            url = self._url(path) if path.startswith("/") else path
            if (self.engine.options.get("auth") or "bearer") != "login":
                return json_body(
                    check_status(client.request(method, url, **kwargs), self.provider), self.provider
                )
            headers = {"Authorization": f"Bearer {self._token(client)}"}
            response = client.request(method, url, headers=headers, **kwargs)
            if response.status_code == 401:  # revoked or expired early: sign in once more
                headers = {"Authorization": f"Bearer {self._token(client, renew=True)}"}
                response = client.request(method, url, headers=headers, **kwargs)
            return json_body(check_status(response, self.provider), self.provider)

    # -- datasets -------------------------------------------------------------------

    @staticmethod
    def dataset_name(ctx: OperationContext, dataset: str) -> str:
        if not dataset:
            raise AdapterError("A dataset name is required.", retryable=False, reason="request_refused")
        return naming.join(ctx.tenant_slug, dataset)

    @staticmethod
    def local_name(ctx: OperationContext, name: str) -> str | None:
        """The fedmem dataset a Cognee name stands for, if it is the caller's tenant's."""
        parts = naming.split(name)
        if parts is None or len(parts) != 2 or parts[0] != ctx.tenant_slug:
            return None
        return parts[1]

    def _datasets(self, ctx: OperationContext) -> list[dict[str, Any]]:
        body = self._call(ctx, "GET", "/datasets")
        return [
            d
            for d in body or []
            if isinstance(d, dict) and self.local_name(ctx, str(d.get("name", ""))) is not None
        ]

    def _dataset(self, ctx: OperationContext, dataset: str) -> dict[str, Any]:
        name = self.dataset_name(ctx, dataset)
        for candidate in self._datasets(ctx):
            if candidate["name"] == name:
                return candidate
        raise AdapterError(f"No dataset {dataset!r}.", retryable=False, reason="not_found", status=404)

    def _hits(self, ctx: OperationContext, body: Any, search_type: str, limit: int) -> list[Hit]:
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
            dataset = self.local_name(ctx, str(origin.get("dataset_name") or ""))
            if origin.get("dataset_name") and dataset is None:
                continue  # never another tenant's, whatever the server answered
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
                        "dataset": dataset,
                        "dataset_id": origin.get("dataset_id"),
                    },
                    metadata=metadata,
                )
            )
        return ranked(hits, limit)

    def _search(
        self, ctx: OperationContext, query: str, top_k: int, search_type: str, dataset: str | None
    ) -> list[Hit]:
        ids = [self._dataset(ctx, dataset)["id"]] if dataset else [d["id"] for d in self._datasets(ctx)]
        if not ids:
            return []  # never search unscoped: that would reach other tenants' datasets
        payload = {"searchType": search_type, "query": query, "datasetIds": ids, "topK": top_k}
        return self._hits(ctx, self._call(ctx, "POST", "/search", json=payload), search_type, top_k)

    # -- operations -----------------------------------------------------------

    def get_health(self, ctx: OperationContext) -> HealthReport:
        watch = self.timed()
        with self._client(ctx) as client:
            body = json_body(check_status(client.get(f"{self._base()}/health"), self.provider), self.provider)
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
        # /add runs Cognee's add pipeline before it answers: stored, not yet a graph.
        body = self._call(ctx, "POST", "/add", data={"datasetName": name}, files=files)
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
        dataset_id = str(self._dataset(ctx, dataset)["id"])
        body = self._call(ctx, "POST", "/cognify", json={"datasetIds": [dataset_id], "runInBackground": True})
        run = body.get(dataset_id, body) if isinstance(body, dict) else {}
        run_id = run.get("pipeline_run_id") if isinstance(run, dict) else None
        return WriteResult(
            "queued",
            [dataset_id],
            str(run_id) if run_id else None,
            {"status": run.get("status") if isinstance(run, dict) else None},
            handle={"dataset_id": dataset_id, "dataset": dataset, "pipeline_run_id": str(run_id or "")},
        )

    def settle(self, ctx: OperationContext, *, handle: dict[str, Any]) -> Settlement:
        dataset = str(handle.get("dataset") or "")
        dataset_id = str(self._dataset(ctx, dataset)["id"])  # the caller's, or not found
        body = self._call(
            ctx, "GET", "/datasets/status", params={"dataset": dataset_id, "pipeline": "cognify_pipeline"}
        )
        status = str(body.get(dataset_id) or "") if isinstance(body, dict) else ""
        detail = {"dataset_id": dataset_id, "pipeline_status": status or None}
        if status == "DATASET_PROCESSING_COMPLETED":
            return Settlement("settled", external_ids=[dataset_id], detail=detail)
        if status == "DATASET_PROCESSING_ERRORED":
            return Settlement("failed", reason="Cognee's cognify_pipeline errored.", detail=detail)
        return Settlement("queued", detail=detail)

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
        dataset_id = self._dataset(ctx, dataset)["id"]
        graph = self._call(ctx, "GET", f"/datasets/{quote(str(dataset_id))}/graph")
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
        dataset_id = self._dataset(ctx, dataset)["id"]
        with self._client(ctx) as client:
            headers = {}
            if (self.engine.options.get("auth") or "bearer") == "login":
                headers = {"Authorization": f"Bearer {self._token(client)}"}
            check_status(
                client.delete(self._url(f"/datasets/{quote(str(dataset_id))}"), headers=headers),
                self.provider,
            )
        return WriteResult("settled", [str(dataset_id)], None, {"dataset": dataset})
