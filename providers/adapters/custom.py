"""``custom``: any engine that speaks fedmem's small HTTP protocol, held to the same envelope.

To wrap an in-process engine instead, subclass :class:`providers.adapters.base.MemoryAdapter`
(see docs/providers.md). The HTTP protocol, relative to the instance's base_url:

``GET  /health``                       → 200 ``{"status": "ok", ...}``
``POST /recall``  ``{query, top_k, namespace}`` → ``{"results": [record, ...]}`` (best first)
``POST /search``  same as recall
``POST /memories`` ``{text, kind, metadata, namespace}``
    → ``{"id", "status": "settled"|"queued", "event_id"?}``
``GET  /memories?limit=&tenant=&agent_id=&user_id=&session_id=`` → ``{"results": [...]}``
``GET  /memories/{id}`` → record; ``PATCH /memories/{id}`` ``{text}``; ``DELETE /memories/{id}``

A record: ``{"id", "kind", "text", "score"?, "created_at"?, "updated_at"?, "metadata"?,
"provenance"?}``
with ``kind`` from fedmem's record vocabulary. The namespace always carries the
tenant, so a shared custom engine can keep tenants apart (``shared_isolation``).
"""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import quote

from providers.adapters.base import (
    AdapterError,
    HealthReport,
    Hit,
    MemoryAdapter,
    NewRecord,
    OperationContext,
    RecordRefused,
    WriteResult,
    check_status,
    json_body,
    ranked,
)
from providers.credentials import Secret

_IMPLEMENTED = frozenset(
    {
        "remember",
        "recall",
        "search",
        "update",
        "forget",
        "list",
        "get",
        "get_health",
        "get_capabilities",
    }
)


class HttpCustomAdapter(MemoryAdapter):
    provider = "custom"
    label = "Custom HTTP engine"
    memory_capabilities: ClassVar[frozenset[str]] = _IMPLEMENTED
    shared_isolation = "none"
    record_kinds = (
        "message",
        "fact",
        "summary",
        "episode",
        "pinned_context",
        "document",
        "entity",
        "edge",
    )
    option_types: ClassVar[dict[str, type | tuple[type, ...]]] = {
        "capabilities": list,  # announce fewer operations than implemented
        "shared_isolation": str,  # "none" | "logical": what the engine guarantees when shared
        "auth_header": str,  # header carrying the credential; default Authorization: Bearer
    }

    @classmethod
    def validate_options(cls, options: Any) -> dict[str, Any]:
        clean = super().validate_options(options)
        unknown = set(clean.get("capabilities", [])) - _IMPLEMENTED
        if unknown:
            raise ValueError(
                f"The custom adapter does not implement: {', '.join(sorted(map(str, unknown)))}."
            )
        if clean.get("shared_isolation", "none") not in ("none", "logical"):
            raise ValueError("shared_isolation is 'none' or 'logical' (dedicated comes from the tenant).")
        return clean

    def supports(self, operation: str) -> bool:
        announced = self.engine.options.get("capabilities")
        allowed = set(announced) | {"get_capabilities"} if announced else _IMPLEMENTED
        return operation in allowed and operation in _IMPLEMENTED

    @property
    def isolation(self) -> str:
        if self.engine.dedicated:
            return "dedicated"
        return str(self.engine.options.get("shared_isolation", self.shared_isolation))

    def announcement(self) -> dict[str, Any]:
        data = super().announcement()
        data["capabilities"]["memory"] = [c for c in data["capabilities"]["memory"] if self.supports(c)]
        return data

    def auth_headers(self, secret: Secret | None) -> dict[str, str]:
        if secret is None:
            return {}
        header = str(self.engine.options.get("auth_header") or "Authorization")
        value = f"Bearer {secret.reveal()}" if header.lower() == "authorization" else secret.reveal()
        return {header: value}

    # -- wire ------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return f"{self.base_path()}{path}"

    @staticmethod
    def _namespace(ctx: OperationContext) -> dict[str, str]:
        data = {"tenant": ctx.tenant_slug}
        for key in ("agent_id", "user_id", "session_id"):
            value = getattr(ctx, key)
            if value:
                data[key] = value
        return data

    def _hit(self, record: Any) -> Hit:
        if not isinstance(record, dict) or "id" not in record or not isinstance(record.get("text"), str):
            raise AdapterError("The custom engine returned a malformed record.", retryable=False)
        kind = record.get("kind", "fact")
        if kind not in self.record_kinds:
            raise RecordRefused(f"The custom engine returned an unknown kind {kind!r}.", retryable=False)
        return Hit(
            provider_id=self.provider,
            engine_id=self.engine.engine_id,
            external_id=str(record["id"]),
            kind=kind,
            text=record["text"],
            provenance=record.get("provenance") or {},
            created_at=record.get("created_at"),
            updated_at=record.get("updated_at"),
            metadata=record.get("metadata") or {},
            score=record.get("score"),
        )

    def _results(self, body: Any) -> list[Any]:
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list):
            raise AdapterError("The custom engine answered without a results list.", retryable=False)
        return results

    # -- operations -----------------------------------------------------------

    def get_health(self, ctx: OperationContext) -> HealthReport:
        watch = self.timed()
        with self.http_client(ctx) as client:
            body = json_body(check_status(client.get(self._url("/health")), self.provider), self.provider)
        status = body.get("status") if isinstance(body, dict) else None
        return HealthReport("ok" if status == "ok" else "degraded", watch.ms, {"engine_status": status})

    def recall(self, ctx: OperationContext, *, query: str, top_k: int) -> list[Hit]:
        return self._query("/recall", ctx, query, top_k)

    def search(self, ctx: OperationContext, *, query: str, top_k: int) -> list[Hit]:
        return self._query("/search", ctx, query, top_k)

    def _query(self, path: str, ctx: OperationContext, query: str, top_k: int) -> list[Hit]:
        payload = {"query": query, "top_k": top_k, "namespace": self._namespace(ctx)}
        with self.http_client(ctx) as client:
            body = json_body(
                check_status(client.post(self._url(path), json=payload), self.provider),
                self.provider,
            )
        return ranked([self._hit(record) for record in self._results(body)[:top_k]], top_k)

    def remember(self, ctx: OperationContext, *, record: NewRecord) -> WriteResult:
        payload = {
            "text": record.text,
            "kind": record.kind,
            "metadata": record.metadata,
            "namespace": self._namespace(ctx),
        }
        with self.http_client(ctx) as client:
            body = json_body(
                check_status(client.post(self._url("/memories"), json=payload), self.provider),
                self.provider,
            )
        status = body.get("status", "settled")
        # Anything but an explicit "settled" is queued: never claim more than the engine said.
        return WriteResult(
            "settled" if status == "settled" else "queued",
            [str(body["id"])] if body.get("id") else [],
            body.get("event_id"),
        )

    def list(self, ctx: OperationContext, *, limit: int) -> list[Hit]:
        params: dict[str, str | int] = {"limit": limit, **self._namespace(ctx)}
        with self.http_client(ctx) as client:
            body = json_body(
                check_status(client.get(self._url("/memories"), params=params), self.provider),
                self.provider,
            )
        return ranked([self._hit(record) for record in self._results(body)[:limit]], limit)

    def get(self, ctx: OperationContext, *, external_id: str) -> Hit:
        with self.http_client(ctx) as client:
            response = client.get(
                self._url(f"/memories/{quote(external_id, safe='')}"), params=self._namespace(ctx)
            )
            body = json_body(check_status(response, self.provider), self.provider)
        hit = self._hit(body)
        hit.rank = 1
        return hit

    def update(self, ctx: OperationContext, *, external_id: str, text: str) -> WriteResult:
        with self.http_client(ctx) as client:
            response = client.patch(
                self._url(f"/memories/{quote(external_id, safe='')}"),
                json={"text": text, "namespace": self._namespace(ctx)},
            )
            check_status(response, self.provider)
        return WriteResult("settled", [external_id])

    def forget(self, ctx: OperationContext, *, external_id: str) -> WriteResult:
        with self.http_client(ctx) as client:
            response = client.delete(
                self._url(f"/memories/{quote(external_id, safe='')}"), params=self._namespace(ctx)
            )
            check_status(response, self.provider)
        return WriteResult("settled", [external_id])
