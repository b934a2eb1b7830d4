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

import hashlib
import os
from typing import Any, ClassVar, Protocol
from urllib.parse import quote

import httpx
from django.conf import settings

from providers.adapters.base import (
    MEMORY_CAPABILITIES,
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
    status_of,
)
from providers.credentials import Secret


def _quiet_mem0() -> None:
    # mem0 reports usage to a third-party analytics host on import and keeps a config
    # folder in $HOME: neither may happen from a server whose egress is guarded.
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    os.environ.setdefault("MEM0_DIR", str(settings.DATA_DIR / "mem0"))


SCOPE_KEYS = ("user_id", "agent_id", "run_id")


class Mem0Namespace:
    """fedmem namespace -> Mem0 entity ids. Every id carries the tenant slug (slugs
    never contain ``:``), so two tenants on one shared Mem0 project never share a
    user, agent or run.

    A write and a search carry exactly one entity id: the user when there is one,
    else the agent, else the session's run. Mem0 matches several ids strictly (AND)
    and attributes a message to one of them by its role, so a user message written
    under both a user and an agent is found by neither a user+agent search nor, in
    general, by the agent; one id per write is how Mem0 is meant to be addressed.
    The agent that wrote a memory goes into its metadata (``fedmem_agent``)."""

    separator = ":"

    def scoped(self, ctx: OperationContext) -> dict[str, str]:
        """Every scope id the caller has, in Mem0's names."""
        ids: dict[str, str] = {}
        for ours, theirs in (("user_id", "user_id"), ("agent_id", "agent_id"), ("session_id", "run_id")):
            value = getattr(ctx, ours)
            if value:
                ids[theirs] = f"{ctx.tenant_slug}{self.separator}{value}"
        return ids

    def filters(self, ctx: OperationContext) -> dict[str, str]:
        ids = self.scoped(ctx)
        for key in SCOPE_KEYS:
            if key in ids:
                return {key: ids[key]}
        raise AdapterError(
            "Mem0 needs a user, agent or session scope.",
            retryable=False,
            reason="scope_required",
        )

    def owns(self, item: dict[str, Any], ctx: OperationContext) -> bool:
        """Whether a memory Mem0 returned by id belongs to the caller. Ids are global in
        a Mem0 project, so this reads the entity ids the service itself returns: the
        memory must carry at least one, every one it carries must be the caller's (a
        run, user or agent the caller does not have is someone else's scope)."""
        mine = self.scoped(ctx)
        present = {key: str(item[key]) for key in SCOPE_KEYS if item.get(key)}
        if not present:
            return False
        return all(mine.get(key) == value for key, value in present.items())

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


# API key checks the platform answered, per (host, key digest): MemoryClient pings
# /v1/ping/ while it is built, and a client is built per call (each call carries its
# own deadline and trace in the guarded transport), so without this every call
# would cost a second round trip.
_VALIDATED: dict[tuple[str, str], dict[str, Any]] = {}
_VALIDATED_MAX = 1024


def _platform_client(api_key: str, host: str, client: Any) -> Any:
    from mem0 import MemoryClient

    cache_key = (host, hashlib.sha256(api_key.encode()).hexdigest())

    class _Client(MemoryClient):  # type: ignore[misc]
        def _validate_api_key(self) -> Any:
            known = _VALIDATED.get(cache_key)
            if known is None:
                email = super()._validate_api_key()
                known = {"org_id": self.org_id, "project_id": self.project_id, "user_email": email}
                if len(_VALIDATED) >= _VALIDATED_MAX:
                    _VALIDATED.clear()
                _VALIDATED[cache_key] = known
            self.org_id, self.project_id = known["org_id"], known["project_id"]
            return known["user_email"]

    return _Client(api_key=api_key, host=host, client=client)


def forget_validated_keys() -> None:
    """Drop the cached key checks (a rotated or revoked key is checked again)."""
    _VALIDATED.clear()


class PlatformBackend:
    """The Mem0 platform REST API through the official client and our guarded transport."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def ping(self) -> dict[str, Any]:
        # The key check ran (or was cached) when the client was built; ask again now.
        response = self.client.client.get("/v1/ping/")
        body = json_body(check_status(response, "mem0"), "mem0")
        return {"org_id": body.get("org_id"), "project_id": body.get("project_id")}

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

    def event(self, event_id: str) -> dict[str, Any]:
        """Mem0's own record of a queued add (``GET /v1/event/{id}/``); the SDK has no
        method for it, so it is read over the client's own (guarded) connection."""
        response = self.client.client.get(f"/v1/event/{quote(event_id, safe='')}/")
        return dict(json_body(check_status(response, "mem0"), "mem0"))


class ServerBackend:
    """Self-hosted Mem0: the REST server shipped in mem0's repository (``server/main.py``:
    ``/memories``, ``/search``, ``/memories/{id}``). It runs the OSS ``Memory`` behind
    FastAPI, so adds are processed before the answer (settled), entity ids are plain
    query/body fields and search takes no ``top_k`` (bounded here)."""

    provider = "mem0"

    def __init__(self, client: httpx.Client, base_path: str = "") -> None:
        self.client = client
        self.base = base_path

    def _json(self, response: httpx.Response) -> Any:
        return json_body(check_status(response, self.provider), self.provider)

    def ping(self) -> dict[str, Any]:
        body = self._json(self.client.get(f"{self.base}/openapi.json"))
        return {"server": "mem0", "version": (body.get("info") or {}).get("version")}

    def add(self, text: str, role: str, filters: dict[str, str], metadata: dict[str, Any]) -> Any:
        payload = {"messages": [{"role": role, "content": text}], **filters, "metadata": metadata or None}
        return self._json(self.client.post(f"{self.base}/memories", json=payload))

    def search(self, query: str, filters: dict[str, str], top_k: int) -> Any:
        body = self._json(self.client.post(f"{self.base}/search", json={"query": query, **filters}))
        return {"results": _results(body)[:top_k]}

    def get_all(self, filters: dict[str, str], top_k: int) -> Any:
        body = self._json(self.client.get(f"{self.base}/memories", params=filters))
        return {"results": _results(body)[:top_k]}

    def get(self, memory_id: str) -> Any:
        return self._json(self.client.get(f"{self.base}/memories/{quote(memory_id, safe='')}"))

    def update(self, memory_id: str, text: str) -> Any:
        raise AdapterError(
            "The self-hosted Mem0 server cannot update a memory's text.",
            retryable=False,
            reason="capability_unsupported",
        )

    def delete(self, memory_id: str) -> Any:
        return self._json(self.client.delete(f"{self.base}/memories/{quote(memory_id, safe='')}"))

    def delete_all(self, filters: dict[str, str]) -> Any:
        return self._json(self.client.delete(f"{self.base}/memories", params=filters))


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
    injectable = ("http_transport", "client", "backend")

    def __init__(
        self,
        *args: Any,
        backend: Mem0Backend | None = None,
        client: Any = None,
        namespace: Mem0Namespace | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if backend is None and client is not None:
            # An injected client: a platform MemoryClient, or an OSS Memory in process.
            backend = PlatformBackend(client) if hasattr(client, "api_key") else LibraryBackend(client)
        self._backend = backend
        self.namespace = namespace or Mem0Namespace()

    def auth_headers(self, secret: Secret | None) -> dict[str, str]:
        # MemoryClient sets "Authorization: Token <key>" itself from api_key.
        return {}

    def backend(self, ctx: OperationContext) -> Mem0Backend:
        if self._backend is not None:
            return self._backend
        _quiet_mem0()
        secret = self.credential()
        if secret is None:
            raise AdapterError(
                "The Mem0 platform needs an API key.", retryable=False, reason="credential_missing"
            )
        return PlatformBackend(
            _platform_client(secret.reveal(), self.engine.base_url, self.http_client(ctx, with_auth=False))
        )

    def _hit(self, item: dict[str, Any], ctx: OperationContext) -> Hit:
        metadata = dict(item.get("metadata") or {})
        if item.get("categories"):
            metadata["categories"] = item["categories"]
        for key in SCOPE_KEYS:
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
        # A search is already scoped by Mem0; the ownership check is the second lock.
        items = [item for item in _results(body) if item.get("id") and self.namespace.owns(item, ctx)]
        return ranked([self._hit(item, ctx) for item in items], top_k)

    def _owned(self, backend: Mem0Backend, external_id: str, ctx: OperationContext) -> dict[str, Any]:
        try:
            item = backend.get(external_id)
        except AdapterError as exc:
            if exc.status in (400, 404, 422):  # a malformed id is as unknown as a missing one
                raise self._not_found() from None
            raise
        except Exception as exc:
            if status_of(exc) in (400, 404, 422):
                raise self._not_found() from None
            raise
        if not isinstance(item, dict) or not item.get("id") or not self.namespace.owns(item, ctx):
            raise self._not_found()
        return item

    @staticmethod
    def _not_found() -> AdapterError:
        return AdapterError("Mem0 has no such memory.", retryable=False, reason="not_found", status=404)

    # -- operations -----------------------------------------------------------

    def get_health(self, ctx: OperationContext) -> HealthReport:
        watch = self.timed()
        detail = self.backend(ctx).ping()
        return HealthReport("ok", watch.ms, detail)

    def remember(self, ctx: OperationContext, *, record: NewRecord) -> WriteResult:
        metadata = dict(record.metadata)
        if ctx.agent_id:
            metadata.setdefault("fedmem_agent", ctx.agent_id)
        body = self.backend(ctx).add(record.text, record.role, self.namespace.filters(ctx), metadata)
        items = _results(body)
        queued = [
            item
            for item in items
            if item.get("event_id") or str(item.get("status", "")).upper() in {"PENDING", "RUNNING", "QUEUED"}
        ]
        if queued:
            event_id = str(queued[0].get("event_id"))
            return WriteResult(
                "queued",
                [],
                event_id,
                {"status": queued[0].get("status"), "message": queued[0].get("message")},
                handle={"event_id": event_id},
            )
        ids = [str(item["id"]) for item in items if item.get("id")]
        return WriteResult("settled", ids, None, {"events": ",".join(str(i.get("event")) for i in items)})

    def settle(self, ctx: OperationContext, *, handle: dict[str, Any]) -> Settlement:
        backend = self.backend(ctx)
        event_id = str(handle.get("event_id") or "")
        if not isinstance(backend, PlatformBackend) or not event_id:
            return Settlement("settled", detail={"note": "this backend answers adds synchronously"})
        try:
            event = backend.event(event_id)
        except AdapterError as exc:
            if exc.status == 404:
                return Settlement("failed", reason="Mem0 has no such event.", detail={"event_id": event_id})
            raise
        status = str(event.get("status") or "").upper()
        if status in {"SUCCEEDED", "COMPLETED", "SUCCESS"}:
            results = [r for r in event.get("results") or [] if isinstance(r, dict)]
            return Settlement(
                "settled",
                external_ids=[str(r["id"]) for r in results if r.get("id")],
                detail={"event_id": event_id, "status": status, "memories": len(results)},
            )
        if status in {"FAILED", "ERROR"}:
            reason = event.get("error") or event.get("message") or (event.get("metadata") or {}).get("error")
            return Settlement(
                "failed",
                reason=str(reason or "Mem0 reports the event failed.")[:500],
                detail={"status": status},
            )
        return Settlement("queued", detail={"event_id": event_id, "status": status or None})

    def recall(self, ctx: OperationContext, *, query: str, top_k: int) -> list[Hit]:
        return self.search(ctx, query=query, top_k=top_k)

    def search(self, ctx: OperationContext, *, query: str, top_k: int) -> list[Hit]:
        return self._hits(self.backend(ctx).search(query, self.namespace.filters(ctx), top_k), ctx, top_k)

    def list(self, ctx: OperationContext, *, limit: int) -> list[Hit]:
        return self._hits(self.backend(ctx).get_all(self.namespace.filters(ctx), limit), ctx, limit)

    def get(self, ctx: OperationContext, *, external_id: str) -> Hit:
        item = self._owned(self.backend(ctx), external_id, ctx)
        hit = self._hit(item, ctx)
        hit.rank = 1
        return hit

    def update(self, ctx: OperationContext, *, external_id: str, text: str) -> WriteResult:
        backend = self.backend(ctx)
        self._owned(backend, external_id, ctx)
        backend.update(external_id, text)
        return WriteResult("settled", [external_id])

    def forget(self, ctx: OperationContext, *, external_id: str) -> WriteResult:
        backend = self.backend(ctx)
        self._owned(backend, external_id, ctx)
        backend.delete(external_id)
        return WriteResult("settled", [external_id])

    def purge(self, ctx: OperationContext) -> WriteResult:
        backend = self.backend(ctx)
        # Every scope id the caller has: one id per write means memories live under
        # the user, the agent or the run alone.
        for key, value in self.namespace.scoped(ctx).items():
            backend.delete_all({key: value})
        return WriteResult("settled", [], None, {"scope": "namespace"})


class Mem0ServerAdapter(Mem0Adapter):
    """Self-hosted Mem0 (its REST server) as an engine kind of its own."""

    provider = "mem0_server"
    label = "Mem0 (self-hosted server)"
    # The server's PUT /memories/{id} hands its JSON object to Memory.update as the
    # text, which the library cannot embed: update is not claimed on this kind.
    memory_capabilities: ClassVar[frozenset[str]] = frozenset(MEMORY_CAPABILITIES) - {"update"}

    def auth_headers(self, secret: Secret | None) -> dict[str, str]:
        # The server ships without auth; a reverse proxy in front of it takes a bearer key.
        return {"Authorization": f"Bearer {secret.reveal()}"} if secret else {}

    def backend(self, ctx: OperationContext) -> Mem0Backend:
        if self._backend is not None:
            return self._backend
        return ServerBackend(self.http_client(ctx), self.base_path())
