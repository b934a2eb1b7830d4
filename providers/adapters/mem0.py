"""mem0: memories with user / agent / run scope, from the platform REST API or the OSS library.

The adapter keeps Mem0's model: a memory is an id, its text (``memory``),
metadata and categories, scoped by ``user_id`` / ``agent_id`` / ``run_id``.
:class:`Mem0Namespace` maps fedmem's namespace onto those ids explicitly (each id
is prefixed with the tenant slug, which is what makes a shared instance
``logical``). Platform adds are asynchronous: the API answers with an event id
and status ``PENDING``, reported here as ``queued`` with that event id — never as
settled.

Two backends, one adapter:

* :class:`PlatformBackend` — the official ``mem0ai`` ``MemoryClient`` over the
  guarded egress client (what an engine instance with a ``base_url`` uses);
* :class:`LibraryBackend` — an in-process ``mem0.Memory`` (OSS), handed to the
  adapter by the caller (``Mem0Adapter(..., backend=LibraryBackend(memory))``).
"""

from __future__ import annotations

import os
from typing import Any, ClassVar, Protocol

from django.conf import settings

from providers.adapters.base import (
    MEMORY_CAPABILITIES,
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


def _quiet_mem0() -> None:
    # mem0 reports usage to a third-party analytics host on import and keeps a config
    # folder in $HOME: neither may happen from a server whose egress is guarded.
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    os.environ.setdefault("MEM0_DIR", str(settings.DATA_DIR / "mem0"))


class Mem0Namespace:
    """fedmem namespace -> Mem0 entity ids. Every id carries the tenant slug, so two
    tenants on one shared Mem0 project never share a user, agent or run."""

    separator = ":"

    def filters(self, ctx: OperationContext) -> dict[str, str]:
        ids: dict[str, str] = {}
        for ours, theirs in (
            ("user_id", "user_id"),
            ("agent_id", "agent_id"),
            ("session_id", "run_id"),
        ):
            value = getattr(ctx, ours)
            if value:
                ids[theirs] = f"{ctx.tenant_slug}{self.separator}{value}"
        if not ids:
            raise AdapterError(
                "Mem0 needs a user, agent or session scope.",
                retryable=False,
                reason="scope_required",
            )
        return ids

    def local(self, entity_id: Any, tenant_slug: str) -> str | None:
        if not entity_id:
            return None
        prefix = f"{tenant_slug}{self.separator}"
        text = str(entity_id)
        return text[len(prefix) :] if text.startswith(prefix) else text


class Mem0Backend(Protocol):
    def ping(self) -> dict[str, Any]: ...
    def add(self, text: str, role: str, filters: dict[str, str], metadata: dict[str, Any]) -> Any: ...
    def search(self, query: str, filters: dict[str, str], top_k: int) -> Any: ...
    def get_all(self, filters: dict[str, str], top_k: int) -> Any: ...
    def get(self, memory_id: str) -> Any: ...
    def update(self, memory_id: str, text: str) -> Any: ...
    def delete(self, memory_id: str) -> Any: ...
    def delete_all(self, filters: dict[str, str]) -> Any: ...


class PlatformBackend:
    """The Mem0 platform REST API through the official client and our guarded transport."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def ping(self) -> dict[str, Any]:
        # MemoryClient pings /v1/ping/ while it is built; reaching here means it answered.
        return {"org_id": self.client.org_id, "project_id": self.client.project_id}

    def add(self, text: str, role: str, filters: dict[str, str], metadata: dict[str, Any]) -> Any:
        return self.client.add([{"role": role, "content": text}], filters=filters, metadata=metadata or None)

    def search(self, query: str, filters: dict[str, str], top_k: int) -> Any:
        return self.client.search(query, filters=filters, top_k=top_k)

    def get_all(self, filters: dict[str, str], top_k: int) -> Any:
        return self.client.get_all(filters=filters, page=1, page_size=top_k)

    def get(self, memory_id: str) -> Any:
        return self.client.get(memory_id)

    def update(self, memory_id: str, text: str) -> Any:
        return self.client.update(memory_id, text=text)

    def delete(self, memory_id: str) -> Any:
        return self.client.delete(memory_id)

    def delete_all(self, filters: dict[str, str]) -> Any:
        return self.client.delete_all(**filters)


class LibraryBackend:
    """An in-process OSS ``mem0.Memory``. Adds use ``infer`` as configured (default
    False: store the text as given, no LLM call)."""

    def __init__(self, memory: Any, *, infer: bool = False) -> None:
        self.memory = memory
        self.infer = infer

    def ping(self) -> dict[str, Any]:
        return {"library": "mem0"}

    def add(self, text: str, role: str, filters: dict[str, str], metadata: dict[str, Any]) -> Any:
        return self.memory.add(
            [{"role": role, "content": text}],
            metadata=metadata or None,
            infer=self.infer,
            **filters,
        )

    def search(self, query: str, filters: dict[str, str], top_k: int) -> Any:
        return self.memory.search(query, filters=filters, top_k=top_k, threshold=0.0)

    def get_all(self, filters: dict[str, str], top_k: int) -> Any:
        return self.memory.get_all(filters=filters, top_k=top_k)

    def get(self, memory_id: str) -> Any:
        return self.memory.get(memory_id)

    def update(self, memory_id: str, text: str) -> Any:
        return self.memory.update(memory_id, text=text)

    def delete(self, memory_id: str) -> Any:
        return self.memory.delete(memory_id)

    def delete_all(self, filters: dict[str, str]) -> Any:
        return self.memory.delete_all(**filters)


def _results(body: Any) -> list[dict[str, Any]]:
    """Mem0 answers a bare list (older API versions) or ``{"results": [...]}``."""
    items = body.get("results", []) if isinstance(body, dict) else body
    return [item for item in (items or []) if isinstance(item, dict)]


class Mem0Adapter(MemoryAdapter):
    provider = "mem0"
    sdk_modules = ("mem0",)

    @classmethod
    def warm(cls) -> None:
        _quiet_mem0()
        super().warm()

    label = "Mem0"
    memory_capabilities: ClassVar[frozenset[str]] = frozenset(MEMORY_CAPABILITIES)  # the whole set
    shared_isolation = "logical"
    record_kinds = ("fact",)
    option_types: ClassVar[dict[str, type | tuple[type, ...]]] = {}

    def __init__(
        self,
        *args: Any,
        backend: Mem0Backend | None = None,
        namespace: Mem0Namespace | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._backend = backend
        self.namespace = namespace or Mem0Namespace()

    def auth_headers(self, secret: Secret | None) -> dict[str, str]:
        # MemoryClient sets "Authorization: Token <key>" itself from api_key.
        return {}

    def backend(self, ctx: OperationContext) -> Mem0Backend:
        if self._backend is not None:
            return self._backend
        _quiet_mem0()
        from mem0 import MemoryClient

        secret = self.credential()
        if secret is None:
            raise AdapterError(
                "The Mem0 platform needs an API key.", retryable=False, reason="credential_missing"
            )
        return PlatformBackend(
            MemoryClient(
                api_key=secret.reveal(),
                host=self.engine.base_url,
                client=self.http_client(ctx, with_auth=False),
            )
        )

    def _hit(self, item: dict[str, Any], ctx: OperationContext) -> Hit:
        metadata = dict(item.get("metadata") or {})
        if item.get("categories"):
            metadata["categories"] = item["categories"]
        for key in ("user_id", "agent_id", "run_id"):
            local = self.namespace.local(item.get(key), ctx.tenant_slug)
            if local:
                metadata[key] = local
        return Hit(
            provider_id=self.provider,
            engine_id=self.engine.engine_id,
            external_id=str(item.get("id")),
            kind="fact",
            text=str(item.get("memory") or item.get("text") or ""),
            provenance={"provider": "mem0", "memory_id": item.get("id"), "hash": item.get("hash")},
            created_at=item.get("created_at"),
            updated_at=item.get("updated_at"),
            metadata=metadata,
            score=item.get("score"),
        )

    def _hits(self, body: Any, ctx: OperationContext, top_k: int) -> list[Hit]:
        return ranked([self._hit(item, ctx) for item in _results(body) if item.get("id")], top_k)

    # -- operations -----------------------------------------------------------

    def get_health(self, ctx: OperationContext) -> HealthReport:
        watch = self.timed()
        detail = self.backend(ctx).ping()
        return HealthReport("ok", watch.ms, detail)

    def remember(self, ctx: OperationContext, *, record: NewRecord) -> WriteResult:
        body = self.backend(ctx).add(record.text, record.role, self.namespace.filters(ctx), record.metadata)
        items = _results(body)
        queued = [
            item
            for item in items
            if item.get("event_id") or str(item.get("status", "")).upper() in {"PENDING", "RUNNING", "QUEUED"}
        ]
        if queued:
            return WriteResult(
                "queued",
                [],
                str(queued[0].get("event_id")),
                {"status": queued[0].get("status"), "message": queued[0].get("message")},
            )
        ids = [str(item["id"]) for item in items if item.get("id")]
        return WriteResult("settled", ids, None, {"events": ",".join(str(i.get("event")) for i in items)})

    def recall(self, ctx: OperationContext, *, query: str, top_k: int) -> list[Hit]:
        return self.search(ctx, query=query, top_k=top_k)

    def search(self, ctx: OperationContext, *, query: str, top_k: int) -> list[Hit]:
        return self._hits(self.backend(ctx).search(query, self.namespace.filters(ctx), top_k), ctx, top_k)

    def list(self, ctx: OperationContext, *, limit: int) -> list[Hit]:
        return self._hits(self.backend(ctx).get_all(self.namespace.filters(ctx), limit), ctx, limit)

    def get(self, ctx: OperationContext, *, external_id: str) -> Hit:
        item = self.backend(ctx).get(external_id)
        if not isinstance(item, dict) or not item.get("id"):
            raise AdapterError("Mem0 has no such memory.", retryable=False, reason="not_found", status=404)
        self._check_scope(item, ctx)
        hit = self._hit(item, ctx)
        hit.rank = 1
        return hit

    def _check_scope(self, item: dict[str, Any], ctx: OperationContext) -> None:
        # Ids are global in a Mem0 project: never hand over (or change) another scope's memory.
        wanted = self.namespace.filters(ctx)
        for key, value in wanted.items():
            if item.get(key) not in (None, value):
                raise AdapterError(
                    "Mem0 has no such memory.", retryable=False, reason="not_found", status=404
                )

    def update(self, ctx: OperationContext, *, external_id: str, text: str) -> WriteResult:
        backend = self.backend(ctx)
        self._check_scope(backend.get(external_id) or {}, ctx)
        backend.update(external_id, text)
        return WriteResult("settled", [external_id])

    def forget(self, ctx: OperationContext, *, external_id: str) -> WriteResult:
        backend = self.backend(ctx)
        self._check_scope(backend.get(external_id) or {}, ctx)
        backend.delete(external_id)
        return WriteResult("settled", [external_id])

    def purge(self, ctx: OperationContext) -> WriteResult:
        self.backend(ctx).delete_all(self.namespace.filters(ctx))
        return WriteResult("settled", [], None, {"scope": "namespace"})
