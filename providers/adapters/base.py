"""The one contract every provider adapter fills: ``MemoryAdapter``.

An adapter keeps its provider's own model (Mem0 memories, Zep episodes and
edges, Letta blocks, LangGraph store items, ...) and hands fedmem one bounded
envelope per record (:class:`Hit`). It announces what it can do
(:meth:`MemoryAdapter.announcement`, validated against
``providers/contracts/v1/memory-provider.schema.json``); :meth:`MemoryAdapter.perform`
refuses anything outside that announcement before any call leaves the process,
and turns every failure into an :class:`AdapterError` with ``retryable`` set.

Adapters never touch fedmem's database: they get an :class:`EngineConfig`, a
credential *getter* (so reading capabilities needs no credential) and an
:class:`OperationContext`.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, TypeVar

import httpx

from providers.credentials import CredentialError, CredentialMissing, Secret
from providers.egress import (
    EgressError,
    EgressPolicy,
    EgressTimeout,
    Resolver,
    find_egress_error,
    guarded_async_client,
    guarded_client,
)

SCHEMA_VERSION = "1"
T = TypeVar("T")

MEMORY_CAPABILITIES: tuple[str, ...] = (
    "remember",
    "recall",
    "search",
    "update",
    "forget",
    "list",
    "get",
    "purge",
    "get_health",
    "get_capabilities",
)
KNOWLEDGE_CAPABILITIES: tuple[str, ...] = (
    "ingest_knowledge",
    "build_graph",
    "search_graph",
    "get_relations",
    "delete_dataset",
)
ALL_CAPABILITIES = frozenset(MEMORY_CAPABILITIES + KNOWLEDGE_CAPABILITIES)
RECORD_KINDS: tuple[str, ...] = (
    "message",
    "fact",
    "summary",
    "episode",
    "pinned_context",
    "document",
    "entity",
    "edge",
)
ISOLATION_LEVELS: tuple[str, ...] = ("none", "logical", "dedicated")

# Envelope bounds: what one provider record may occupy in a fedmem answer.
MAX_TEXT_CHARS = 8000
MAX_METADATA_KEYS = 24
MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 500
MAX_ID_CHARS = 256
MAX_HITS = 100


# --- errors ------------------------------------------------------------------------


class AdapterError(Exception):
    """A provider call that failed. ``retryable`` tells the caller whether trying again can help."""

    reason = "provider_error"

    def __init__(
        self, message: str, *, retryable: bool, reason: str | None = None, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.status = status
        if reason:
            self.reason = reason


class CapabilityUnsupported(AdapterError):
    reason = "capability_unsupported"

    def __init__(self, operation: str, provider: str) -> None:
        super().__init__(f"The {provider} engine does not announce {operation!r}.", retryable=False)
        self.operation = operation


class EngineUnavailable(AdapterError):
    """The engine could not be reached or did not answer in time."""

    reason = "unavailable"


class EngineTimeout(EngineUnavailable):
    reason = "timeout"


class RecordRefused(AdapterError):
    """A provider record that is not memory (a LangGraph checkpoint, an unknown kind)."""

    reason = "record_refused"


# --- values ------------------------------------------------------------------------


@dataclass(frozen=True)
class EngineConfig:
    """What an adapter knows about its engine instance (a plain copy, no ORM object)."""

    engine_id: str
    provider: str
    base_url: str
    tenant_id: str | None = None
    timeout_seconds: float = 10.0
    tls_verify: bool = True
    allow_development_hosts: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def dedicated(self) -> bool:
        return self.tenant_id is not None


@dataclass(frozen=True)
class OperationContext:
    """Who is asking, in which namespace, until when. Serialises to the contract's
    ``operation_context`` (see the JSON Schema)."""

    operation: str
    tenant_id: str
    tenant_slug: str
    agent_id: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    trace_parent: str | None = None
    deadline: float | None = None  # time.monotonic() value
    required_isolation: str = "none"

    def remaining_ms(self) -> int | None:
        if self.deadline is None:
            return None
        return max(0, int((self.deadline - time.monotonic()) * 1000))

    def for_operation(self, operation: str) -> OperationContext:
        return OperationContext(
            operation=operation,
            tenant_id=self.tenant_id,
            tenant_slug=self.tenant_slug,
            agent_id=self.agent_id,
            user_id=self.user_id,
            session_id=self.session_id,
            trace_parent=self.trace_parent,
            deadline=self.deadline,
            required_isolation=self.required_isolation,
        )

    def to_contract(self, engine_id: str) -> dict[str, Any]:
        data: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "operation": self.operation,
            "engine_instance": engine_id,
            "tenant": {"id": self.tenant_id, "slug": self.tenant_slug},
            "namespace": {
                key: value
                for key, value in (
                    ("agent_id", self.agent_id),
                    ("user_id", self.user_id),
                    ("session_id", self.session_id),
                )
                if value
            },
            "required_isolation": self.required_isolation,
        }
        if self.trace_parent:
            data["traceparent"] = self.trace_parent
        remaining = self.remaining_ms()
        if remaining is not None:
            data["deadline_ms"] = remaining
        return data


def _bounded_scalar(value: Any) -> str | int | float | bool | None:
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if not isinstance(value, str):
        value = json.dumps(value, default=str, sort_keys=True)
    return value[:MAX_VALUE_CHARS]


def bounded_mapping(data: Mapping[str, Any] | None) -> dict[str, Any]:
    """At most MAX_METADATA_KEYS keys, short keys, scalar short values (nested values as JSON)."""
    if not data:
        return {}
    items = sorted(((str(key), value) for key, value in data.items()), key=lambda item: item[0])
    return {key[:MAX_KEY_CHARS]: _bounded_scalar(value) for key, value in items[:MAX_METADATA_KEYS]}


def iso(value: Any) -> str | None:
    """Provider timestamps arrive as datetimes, ISO strings or epoch numbers."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, int | float):
        from datetime import UTC

        seconds = value / 1000 if value > 10**11 else value  # epoch milliseconds vs seconds
        return datetime.fromtimestamp(seconds, tz=UTC).isoformat()
    return str(value)[:64]


@dataclass
class Hit:
    """One provider record in fedmem's bounded envelope."""

    provider_id: str
    engine_id: str
    external_id: str
    kind: str
    text: str
    provenance: dict[str, Any] = field(default_factory=dict)
    created_at: str | None = None
    updated_at: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    score: float | None = None  # source-local: never comparable across providers
    rank: int = 0  # 1-based position in the source's own answer

    def __post_init__(self) -> None:
        if self.kind not in RECORD_KINDS:
            raise RecordRefused(f"Record kind {self.kind!r} is not in fedmem's vocabulary.", retryable=False)
        self.external_id = str(self.external_id)[:MAX_ID_CHARS]
        self.metadata = bounded_mapping(self.metadata)
        if len(self.text) > MAX_TEXT_CHARS:
            self.text = self.text[:MAX_TEXT_CHARS]
            # The flag must survive the key bound: make room for it.
            kept = dict(list(self.metadata.items())[: MAX_METADATA_KEYS - 1])
            self.metadata = {**kept, "truncated": True}
        self.provenance = bounded_mapping(self.provenance)
        self.created_at = iso(self.created_at)
        self.updated_at = iso(self.updated_at)
        if self.score is not None:
            self.score = float(self.score)

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider_id": self.provider_id,
            "engine_id": self.engine_id,
            "external_id": self.external_id,
            "kind": self.kind,
            "text": self.text,
            "provenance": self.provenance,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "metadata": self.metadata,
            "score": self.score,
            "rank": self.rank,
        }


def ranked(hits: list[Hit], limit: int) -> list[Hit]:
    """Number hits in the source's own order and bound them."""
    out = hits[: max(0, min(limit, MAX_HITS))]
    for position, hit in enumerate(out, start=1):
        hit.rank = position
    return out


@dataclass
class NewRecord:
    """What fedmem asks an engine to remember."""

    text: str
    kind: str = "fact"
    role: str = "user"
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class WriteResult:
    """The outcome of a write. ``queued`` writes are never reported as settled:
    ``handle`` says what to ask the provider (:meth:`MemoryAdapter.settle`) until it
    answers settled or failed."""

    status: str  # "settled" | "queued"
    external_ids: list[str] = field(default_factory=list)
    event_id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    # Not part of the answer: what the reconcile task polls (an event, task or run id).
    handle: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "external_ids": self.external_ids,
            "event_id": self.event_id,
            "detail": bounded_mapping(self.detail),
        }


SETTLEMENT_STATUSES = ("queued", "settled", "failed")


@dataclass
class Settlement:
    """What the provider says about a queued write now: still ``queued``, ``settled``
    (with the ids it produced) or ``failed`` (with the provider's own reason)."""

    status: str
    reason: str | None = None
    external_ids: list[str] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in SETTLEMENT_STATUSES:
            raise ValueError(f"Settlement status is one of {SETTLEMENT_STATUSES}.")

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason,
            "external_ids": self.external_ids[:100],
            "detail": bounded_mapping(self.detail),
        }


@dataclass
class HealthReport:
    status: str  # "ok" | "degraded"
    latency_ms: int
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "latency_ms": self.latency_ms,
            "detail": bounded_mapping(self.detail),
        }


# --- the contract ------------------------------------------------------------------

CredentialGetter = Callable[[], Secret | None]


class MemoryAdapter:
    """Base class of every provider adapter.

    Subclasses set the class attributes, implement the operations they announce,
    and build their provider client from :meth:`http_client` (the guarded egress
    client, with the credential in the provider's own header).
    """

    provider: ClassVar[str]
    label: ClassVar[str]
    memory_capabilities: ClassVar[frozenset[str]] = frozenset({"get_capabilities"})
    knowledge_capabilities: ClassVar[frozenset[str]] = frozenset()
    # The guarantee on a shared instance; a dedicated instance (one tenant) is "dedicated".
    shared_isolation: ClassVar[str] = "none"
    session_memory: ClassVar[bool] = False
    record_kinds: ClassVar[tuple[str, ...]] = ()
    # Provider-specific options accepted on the engine instance: name -> type.
    option_types: ClassVar[dict[str, type | tuple[type, ...]]] = {}
    # The SDK modules the adapter imports lazily (see warm()).
    sdk_modules: ClassVar[tuple[str, ...]] = ()
    # Constructor keywords an engine instance can be bound to in code
    # (providers.adapters.registry.bind): a client, store, transport, session factory.
    # Every adapter takes an ``http_transport`` (an httpx transport the caller owns).
    injectable: ClassVar[tuple[str, ...]] = ("http_transport",)

    def __init__(
        self,
        engine: EngineConfig,
        *,
        credential: CredentialGetter | None = None,
        resolver: Resolver | None = None,
        http_transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.engine = engine
        self._credential = credential or (lambda: None)
        self._resolver = resolver
        # A caller-owned transport (registry.bind): replaces the guarded egress transport.
        self._http_transport = http_transport

    @classmethod
    def warm(cls) -> None:
        """Import the SDK now. Some SDKs take seconds to import (mem0, the Agents SDK):
        done on the first recall, that would eat the recall's deadline."""
        from importlib import import_module

        for module in cls.sdk_modules:
            import_module(module)

    # -- announcement ------------------------------------------------------------

    @classmethod
    def validate_options(cls, options: Mapping[str, Any] | None) -> dict[str, Any]:
        options = dict(options or {})
        unknown = sorted(set(options) - set(cls.option_types))
        if unknown:
            raise ValueError(f"Unknown {cls.provider} options: {', '.join(unknown)}.")
        for name, value in options.items():
            expected = cls.option_types[name]
            if not isinstance(value, expected) or (isinstance(value, bool) and expected in (int, float)):
                raise ValueError(f"Option {name!r} has the wrong type.")
        return options

    @property
    def isolation(self) -> str:
        return "dedicated" if self.engine.dedicated else self.shared_isolation

    def announcement(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "provider": self.provider,
            "engine_instance": self.engine.engine_id,
            "capabilities": {
                "memory": [c for c in MEMORY_CAPABILITIES if c in self.memory_capabilities],
                "knowledge": [c for c in KNOWLEDGE_CAPABILITIES if c in self.knowledge_capabilities],
            },
            "isolation": self.isolation,
            "session_memory": self.session_memory,
            "record_kinds": list(self.record_kinds),
        }

    def supports(self, operation: str) -> bool:
        return operation in self.memory_capabilities or operation in self.knowledge_capabilities

    # -- dispatch ----------------------------------------------------------------

    def perform(self, operation: str, ctx: OperationContext, **kwargs: Any) -> Any:
        """Run one announced operation; every failure comes out as an AdapterError."""
        if operation not in ALL_CAPABILITIES or not self.supports(operation):
            raise CapabilityUnsupported(operation, self.provider)
        if operation == "get_capabilities":
            return self.announcement()
        # Services refuse weak engines with a 422 first; this is the second lock, so no
        # path (a task, a future caller) can reach an engine below the required isolation.
        required = ctx.required_isolation or "none"
        if ISOLATION_LEVELS.index(self.isolation) < ISOLATION_LEVELS.index(required):
            raise AdapterError(
                f"The {self.provider} engine guarantees {self.isolation!r} isolation; "
                f"{required!r} is required.",
                retryable=False,
                reason="isolation_insufficient",
            )
        method = getattr(self, operation)
        ctx = ctx.for_operation(operation)
        with self.translate_errors():
            return method(ctx, **kwargs)

    def check_write(self, ctx: OperationContext, handle: Mapping[str, Any]) -> Settlement:
        """Ask the provider where a queued write stands (the reconcile task's call);
        failures come out as AdapterError like every other call."""
        with self.translate_errors():
            return self.settle(ctx.for_operation("settle"), handle=dict(handle))

    def settle(self, ctx: OperationContext, *, handle: dict[str, Any]) -> Settlement:
        """Providers that queue writes override this with their own status call."""
        raise self._unsupported("settle")

    @contextlib.contextmanager
    def translate_errors(self) -> Iterator[None]:
        try:
            yield
        except AdapterError:
            raise
        except CredentialMissing as exc:
            raise AdapterError(str(exc), retryable=False, reason="credential_missing") from None
        except CredentialError as exc:
            # The secret store may come back (OpenBao down, a variable being rotated).
            raise AdapterError(str(exc), retryable=True, reason="credential_unavailable") from None
        except Exception as exc:
            egress = find_egress_error(exc)
            if egress is not None:
                raise self._from_egress(egress) from None
            status = status_of(exc)
            if status is None and isinstance(exc, ValueError | TypeError):
                # Refused on our side of the wire (an SDK validating its arguments):
                # the same call fails the same way, so it is never worth retrying.
                raise AdapterError(
                    self._scrub(f"{self.provider} refused the request: {str(exc)[:300]}"),
                    retryable=False,
                    reason="request_refused",
                ) from None
            raise AdapterError(
                self._scrub(f"{self.provider} failed: {exc.__class__.__name__}: {str(exc)[:300]}"),
                retryable=status is None or status == 429 or status >= 500,
                reason=_reason_for_status(status),
                status=status,
            ) from None

    @staticmethod
    def _from_egress(exc: EgressError) -> AdapterError:
        if isinstance(exc, EgressTimeout):
            return EngineTimeout(str(exc), retryable=True)
        if exc.retryable:
            return EngineUnavailable(str(exc), retryable=True, reason=exc.reason)
        return EngineUnavailable(str(exc), retryable=False, reason=exc.reason)

    def _scrub(self, text: str) -> str:
        try:
            secret = self._credential()
        except CredentialError:
            return text
        if secret is not None and secret.reveal() and secret.reveal() in text:
            text = text.replace(secret.reveal(), "***")
        return text

    # -- transport ---------------------------------------------------------------

    def egress_policy(self) -> EgressPolicy:
        return EgressPolicy.for_url(
            self.engine.base_url,
            timeout=self.engine.timeout_seconds,
            allow_private=self.engine.allow_development_hosts,
            tls_verify=self.engine.tls_verify,
            resolver=self._resolver,
        )

    def auth_headers(self, secret: Secret | None) -> dict[str, str]:
        """The provider's own credential header; override per provider."""
        return {"Authorization": f"Bearer {secret.reveal()}"} if secret else {}

    def credential(self) -> Secret | None:
        return self._credential()

    def http_client(self, ctx: OperationContext, *, with_auth: bool = True) -> httpx.Client:
        headers = self.auth_headers(self.credential()) if with_auth else {}
        if self._http_transport is not None:
            url = httpx.URL(self.engine.base_url)
            return httpx.Client(
                transport=self._http_transport,
                base_url=url.copy_with(path="/", query=None, fragment=None),
                headers=headers,
                timeout=self.engine.timeout_seconds,
                follow_redirects=False,
            )
        return guarded_client(
            self.egress_policy(),
            headers=headers,
            trace_parent=ctx.trace_parent,
            deadline=ctx.deadline,
        )

    def async_http_client(self, ctx: OperationContext, *, with_auth: bool = True) -> httpx.AsyncClient:
        headers = self.auth_headers(self.credential()) if with_auth else {}
        return guarded_async_client(
            self.egress_policy(),
            headers=headers,
            trace_parent=ctx.trace_parent,
            deadline=ctx.deadline,
        )

    def base_path(self) -> str:
        """The path part of base_url (an engine may live under a prefix)."""
        path = httpx.URL(self.engine.base_url).path.rstrip("/")
        return path

    def timed(self) -> _Stopwatch:
        return _Stopwatch()

    # -- operations (each raises CapabilityUnsupported unless overridden) ---------

    def _unsupported(self, operation: str) -> CapabilityUnsupported:
        return CapabilityUnsupported(operation, self.provider)

    def remember(self, ctx: OperationContext, *, record: NewRecord) -> WriteResult:
        raise self._unsupported("remember")

    def recall(self, ctx: OperationContext, *, query: str, top_k: int) -> list[Hit]:
        raise self._unsupported("recall")

    def search(self, ctx: OperationContext, *, query: str, top_k: int) -> list[Hit]:
        raise self._unsupported("search")

    def update(self, ctx: OperationContext, *, external_id: str, text: str) -> WriteResult:
        raise self._unsupported("update")

    def forget(self, ctx: OperationContext, *, external_id: str) -> WriteResult:
        raise self._unsupported("forget")

    def list(self, ctx: OperationContext, *, limit: int) -> list[Hit]:
        raise self._unsupported("list")

    def get(self, ctx: OperationContext, *, external_id: str) -> Hit:
        raise self._unsupported("get")

    def purge(self, ctx: OperationContext) -> WriteResult:
        raise self._unsupported("purge")

    def get_health(self, ctx: OperationContext) -> HealthReport:
        raise self._unsupported("get_health")

    def ingest_knowledge(
        self, ctx: OperationContext, *, dataset: str, documents: builtins.list[str]
    ) -> WriteResult:
        raise self._unsupported("ingest_knowledge")

    def build_graph(self, ctx: OperationContext, *, dataset: str) -> WriteResult:
        raise self._unsupported("build_graph")

    def search_graph(
        self,
        ctx: OperationContext,
        *,
        query: str,
        top_k: int,
        dataset: str | None = None,
        search_type: str | None = None,
    ) -> builtins.list[Hit]:
        raise self._unsupported("search_graph")

    def get_relations(self, ctx: OperationContext, *, external_id: str) -> builtins.list[Hit]:
        raise self._unsupported("get_relations")

    def delete_dataset(self, ctx: OperationContext, *, dataset: str) -> WriteResult:
        raise self._unsupported("delete_dataset")


class _Stopwatch:
    def __init__(self) -> None:
        self.started = time.perf_counter()

    @property
    def ms(self) -> int:
        return int((time.perf_counter() - self.started) * 1000)


def run_sync(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run an async SDK call from sync adapter code. Adapters run in federation worker
    threads (no loop), but a caller inside a running loop gets a helper thread instead
    of a "loop already running" error."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


def status_of(exc: BaseException | None) -> int | None:
    """The HTTP status behind an SDK error, looking down the cause chain (SDKs re-raise)."""
    for _ in range(8):
        if exc is None:
            return None
        for attr in ("status_code", "status"):
            value = getattr(exc, attr, None)
            if isinstance(value, int) and 100 <= value <= 599:
                return value
        response = getattr(exc, "response", None)
        value = getattr(response, "status_code", None)
        if isinstance(value, int):
            return value
        exc = exc.__cause__ or exc.__context__
    return None


def _reason_for_status(status: int | None) -> str:
    if status is None:
        return "provider_error"
    if status in (401, 403):
        return "auth_refused"
    if status == 404:
        return "not_found"
    if status == 429:
        return "rate_limited"
    if status >= 500:
        return "provider_error"
    return "request_refused"


def check_status(response: httpx.Response, provider: str) -> httpx.Response:
    """Raw-HTTP adapters: turn a provider error status into an AdapterError."""
    if response.status_code < 400:
        return response
    status = response.status_code
    raise AdapterError(
        f"{provider} answered {status}.",
        retryable=status == 429 or status >= 500,
        reason=_reason_for_status(status),
        status=status,
    )


def json_body(response: httpx.Response, provider: str) -> Any:
    try:
        return response.json()
    except ValueError:
        raise AdapterError(f"{provider} answered something that is not JSON.", retryable=False) from None
