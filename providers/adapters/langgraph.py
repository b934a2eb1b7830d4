"""langgraph: long-term store items and namespaces. Checkpoints are refused.

LangGraph's long-term memory is a store of items (``namespace`` tuple, ``key``,
``value`` dict, timestamps, an optional search score). The adapter keeps that
model: fedmem's namespace maps onto a namespace prefix
``(root, tenant, agent, user)`` (the tenant in the prefix is what makes a shared
instance ``logical``), an item's ``namespace/key`` is its external id. Labels are
escaped (:func:`label`): LangGraph joins a namespace with ``.`` on the wire and
refuses a ``.`` in a label, so ``alice@example.com`` is sent as
``alice@example%2Ecom``; a user literally named ``_`` cannot pose as "no user".

Checkpoints (a graph's execution state) are not memory: a checkpoint saver is
refused outright, and an item that is a checkpoint (under a ``checkpoint``
namespace, or shaped like one) is refused with a reason and never returned.

Two stores, one adapter:

* :class:`LibraryStore` — any ``langgraph.store.base.BaseStore`` in process
  (``InMemoryStore``, ``PostgresStore`` ...), handed in by the caller;
* :class:`ServerStore` — a LangGraph Server's ``/store`` API through the official
  ``langgraph-sdk`` client over the guarded egress client (declared instances).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

from providers.adapters.base import (
    MEMORY_CAPABILITIES,
    RECORD_KINDS,
    AdapterError,
    HealthReport,
    Hit,
    MemoryAdapter,
    NewRecord,
    OperationContext,
    RecordRefused,
    WriteResult,
    check_status,
    ranked,
)
from providers.credentials import Secret

Namespace = tuple[str, ...]
_NO_SCOPE = "_"


def label(value: str) -> str:
    """One namespace label, reversible and free of ``.`` (percent-escaping ``%`` and ``.``)."""
    if value == _NO_SCOPE:
        return "%5F"
    return value.replace("%", "%25").replace(".", "%2E")


def unlabel(value: str) -> str:
    if value == _NO_SCOPE:
        return ""
    return value.replace("%2E", ".").replace("%5F", "_").replace("%25", "%")


_CHECKPOINT_KEYS = {"channel_values", "channel_versions", "versions_seen"}


class StorePort(Protocol):
    def search(self, prefix: Namespace, query: str | None, limit: int) -> list[dict[str, Any]]: ...
    def get(self, namespace: Namespace, key: str) -> dict[str, Any] | None: ...
    def put(self, namespace: Namespace, key: str, value: dict[str, Any]) -> None: ...
    def delete(self, namespace: Namespace, key: str) -> None: ...
    def list_namespaces(self, prefix: Namespace, limit: int) -> list[Namespace]: ...


def _item_dict(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    return {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at,
        "updated_at": item.updated_at,
        "score": getattr(item, "score", None),
    }


class LibraryStore:
    """A LangGraph ``BaseStore`` in this process."""

    def __init__(self, store: Any) -> None:
        from langgraph.checkpoint.base import BaseCheckpointSaver
        from langgraph.store.base import BaseStore

        if isinstance(store, BaseCheckpointSaver):
            raise RecordRefused("LangGraph checkpoints are execution state, not memory.", retryable=False)
        if not isinstance(store, BaseStore):
            raise TypeError("LibraryStore needs a langgraph BaseStore")
        self.store = store

    def search(self, prefix: Namespace, query: str | None, limit: int) -> list[dict[str, Any]]:
        return [_item_dict(item) for item in self.store.search(prefix, query=query, limit=limit)]

    def get(self, namespace: Namespace, key: str) -> dict[str, Any] | None:
        item = self.store.get(namespace, key)
        return _item_dict(item) if item is not None else None

    def put(self, namespace: Namespace, key: str, value: dict[str, Any]) -> None:
        self.store.put(namespace, key, value)

    def delete(self, namespace: Namespace, key: str) -> None:
        self.store.delete(namespace, key)

    def list_namespaces(self, prefix: Namespace, limit: int) -> list[Namespace]:
        return [tuple(ns) for ns in self.store.list_namespaces(prefix=prefix, limit=limit)]


class ServerStore:
    """A LangGraph Server's store API via ``langgraph_sdk``'s sync client."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def search(self, prefix: Namespace, query: str | None, limit: int) -> list[dict[str, Any]]:
        body = self.client.store.search_items(list(prefix), query=query, limit=limit)
        return list(body.get("items", []))

    def get(self, namespace: Namespace, key: str) -> dict[str, Any] | None:
        try:
            return dict(self.client.store.get_item(list(namespace), key=key))
        except Exception as exc:
            if getattr(getattr(exc, "response", None), "status_code", None) == 404:
                return None
            raise

    def put(self, namespace: Namespace, key: str, value: dict[str, Any]) -> None:
        self.client.store.put_item(list(namespace), key=key, value=value)

    def delete(self, namespace: Namespace, key: str) -> None:
        self.client.store.delete_item(list(namespace), key=key)

    def list_namespaces(self, prefix: Namespace, limit: int) -> list[Namespace]:
        body = self.client.store.list_namespaces(prefix=list(prefix), limit=limit)
        return [tuple(ns) for ns in body.get("namespaces", [])]


class LangGraphAdapter(MemoryAdapter):
    provider = "langgraph"
    sdk_modules = ("langgraph_sdk.client",)
    label = "LangGraph store"
    memory_capabilities: ClassVar[frozenset[str]] = frozenset(MEMORY_CAPABILITIES)  # the whole set
    shared_isolation = "logical"
    record_kinds = RECORD_KINDS
    option_types: ClassVar[dict[str, type | tuple[type, ...]]] = {"namespace_root": str}
    injectable = ("http_transport", "store")

    def __init__(self, *args: Any, store: StorePort | Any | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if _is_checkpointer(store):
            raise RecordRefused("LangGraph checkpoints are execution state, not memory.", retryable=False)
        if store is not None and not isinstance(store, LibraryStore | ServerStore):
            store = LibraryStore(store)
        self._store = store

    def auth_headers(self, secret: Secret | None) -> dict[str, str]:
        return {"x-api-key": secret.reveal()} if secret else {}

    def store(self, ctx: OperationContext) -> StorePort:
        if self._store is not None:
            return self._store
        from langgraph_sdk.client import SyncLangGraphClient

        return ServerStore(SyncLangGraphClient(self.server_client(ctx)))

    def server_client(self, ctx: OperationContext) -> Any:
        """The guarded client, rooted at base_url's path: a server behind a prefix
        (``https://host/langgraph``) keeps it on every store call."""
        client = self.http_client(ctx)
        client.base_url = client.base_url.copy_with(path=self.base_path() + "/")
        return client

    # -- namespaces -------------------------------------------------------------

    def prefix(self, ctx: OperationContext) -> Namespace:
        root = label(str(self.engine.options.get("namespace_root") or "fedmem"))
        prefix: Namespace = (root, label(ctx.tenant_slug))
        if ctx.agent_id:
            prefix += (label(ctx.agent_id),)
            if ctx.user_id:
                prefix += (label(ctx.user_id),)
        return prefix

    def write_namespace(self, ctx: OperationContext) -> Namespace:
        root = label(str(self.engine.options.get("namespace_root") or "fedmem"))
        agent = label(ctx.agent_id) if ctx.agent_id else _NO_SCOPE
        user = label(ctx.user_id) if ctx.user_id else _NO_SCOPE
        return (root, label(ctx.tenant_slug), agent, user)

    @staticmethod
    def external_id(namespace: Sequence[str], key: str) -> str:
        return json.dumps([*namespace, key], separators=(",", ":"))

    def split_id(self, external_id: str, ctx: OperationContext) -> tuple[Namespace, str]:
        try:
            parts = json.loads(external_id)
        except ValueError:
            parts = None
        if not isinstance(parts, list) or len(parts) < 2 or not all(isinstance(p, str) for p in parts):
            raise AdapterError("Not a LangGraph item id.", retryable=False, reason="not_found", status=404)
        namespace, key = tuple(parts[:-1]), parts[-1]
        if namespace[: len(self.prefix(ctx))] != self.prefix(ctx):
            # Another tenant's or agent's namespace is the same "not found" as a missing one.
            raise AdapterError("No such LangGraph item.", retryable=False, reason="not_found", status=404)
        return namespace, key

    # -- records ---------------------------------------------------------------

    def to_hit(self, item: dict[str, Any]) -> Hit:
        namespace = [str(part) for part in item.get("namespace", [])]
        value = item.get("value")
        if any("checkpoint" in part.lower() for part in namespace) or (
            isinstance(value, dict) and _CHECKPOINT_KEYS & set(value)
        ):
            raise RecordRefused("A LangGraph checkpoint is execution state, not memory.", retryable=False)
        if not isinstance(value, dict):
            raise RecordRefused("A LangGraph item value is a JSON object.", retryable=False)
        kind = str(value["kind"]) if value.get("kind") in RECORD_KINDS else "fact"
        metadata = {k: v for k, v in value.items() if k not in {"text", "content", "kind"}}
        readable = "/".join(unlabel(part) or _NO_SCOPE for part in namespace)
        metadata["namespace"] = readable
        return Hit(
            provider_id=self.provider,
            engine_id=self.engine.engine_id,
            external_id=self.external_id(namespace, str(item.get("key"))),
            kind=kind,
            text=_text_of(value),
            provenance={
                "provider": "langgraph",
                "namespace": readable,
                "key": item.get("key"),
            },
            created_at=item.get("created_at"),
            updated_at=item.get("updated_at"),
            metadata=metadata,
            score=item.get("score"),
        )

    def _hits(self, items: list[dict[str, Any]], limit: int) -> list[Hit]:
        hits = []
        for item in items:
            try:
                hits.append(self.to_hit(item))
            except RecordRefused:
                continue  # never returned as memory; the import task reports refusals with reasons
        return ranked(hits, limit)

    # -- operations -----------------------------------------------------------

    def get_health(self, ctx: OperationContext) -> HealthReport:
        watch = self.timed()
        if self._store is not None:
            self._store.list_namespaces(self.prefix(ctx), 1)
            return HealthReport("ok", watch.ms, {"store": "library"})
        with self.server_client(ctx) as client:
            check_status(client.get("ok"), self.provider)
        return HealthReport("ok", watch.ms, {"store": "server"})

    def remember(self, ctx: OperationContext, *, record: NewRecord) -> WriteResult:
        import uuid

        key = str(uuid.uuid4())
        namespace = self.write_namespace(ctx)
        value = {"text": record.text, "kind": record.kind, **record.metadata}
        self.store(ctx).put(namespace, key, value)
        return WriteResult("settled", [self.external_id(namespace, key)])

    def recall(self, ctx: OperationContext, *, query: str, top_k: int) -> list[Hit]:
        return self.search(ctx, query=query, top_k=top_k)

    def search(self, ctx: OperationContext, *, query: str, top_k: int) -> list[Hit]:
        return self._hits(self.store(ctx).search(self.prefix(ctx), query or None, top_k), top_k)

    def list(self, ctx: OperationContext, *, limit: int) -> list[Hit]:
        return self._hits(self.store(ctx).search(self.prefix(ctx), None, limit), limit)

    def get(self, ctx: OperationContext, *, external_id: str) -> Hit:
        namespace, key = self.split_id(external_id, ctx)
        item = self.store(ctx).get(namespace, key)
        if item is None:
            raise AdapterError("No such LangGraph item.", retryable=False, reason="not_found", status=404)
        hit = self.to_hit(item)
        hit.rank = 1
        return hit

    def update(self, ctx: OperationContext, *, external_id: str, text: str) -> WriteResult:
        namespace, key = self.split_id(external_id, ctx)
        store = self.store(ctx)
        item = store.get(namespace, key)
        if item is None:
            raise AdapterError("No such LangGraph item.", retryable=False, reason="not_found", status=404)
        self.to_hit(item)  # refuses a checkpoint before anything is written
        store.put(namespace, key, {**item["value"], "text": text})
        return WriteResult("settled", [external_id])

    def forget(self, ctx: OperationContext, *, external_id: str) -> WriteResult:
        namespace, key = self.split_id(external_id, ctx)
        self.store(ctx).delete(namespace, key)
        return WriteResult("settled", [external_id])

    def purge(self, ctx: OperationContext) -> WriteResult:
        store = self.store(ctx)
        deleted = 0
        # Bounded: a purge pages through at most 100 x 100 items per call.
        for _ in range(100):
            items = store.search(self.prefix(ctx), None, 100)
            if not items:
                break
            for item in items:
                store.delete(tuple(item["namespace"]), item["key"])
                deleted += 1
        return WriteResult("settled", [], None, {"deleted": deleted})


def _is_checkpointer(store: Any) -> bool:
    if store is None:
        return False
    try:
        from langgraph.checkpoint.base import BaseCheckpointSaver
    except ImportError:  # pragma: no cover - langgraph not installed
        return False
    return isinstance(store, BaseCheckpointSaver)


def _text_of(value: dict[str, Any]) -> str:
    for field in ("text", "content", "memory", "data"):
        candidate = value.get(field)
        if isinstance(candidate, str):
            return candidate
        if isinstance(candidate, dict):  # LangMem: {"kind": "Memory", "content": {"content": "..."}}
            inner = candidate.get("content") or candidate.get("text")
            if isinstance(inner, str):
                return inner
    return json.dumps(value, sort_keys=True, default=str)
