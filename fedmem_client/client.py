"""Sync and async clients. Each API operation is described once (:class:`Call`)
and executed by either transport, so the two clients cannot drift apart.

Retries: connection failures, 429 (after ``Retry-After``) and 502/503/504 are
retried with backoff — reads always, writes only when they carry an
``Idempotency-Key``, which the client adds to every remember call (one key per
logical call, reused by its retries, so a retry never writes twice).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from fedmem_client.errors import FedmemError, RateLimited, error_for

RETRY_STATUSES = {429, 502, 503, 504}


@dataclass
class Call:
    method: str
    path: str
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    safe_to_retry: bool = True
    headers: dict[str, str] = field(default_factory=dict)
    stream_lines: bool = False


def _clean(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


class _Operations:
    """The agent memory operations; ``_run`` is the transport's."""

    agent_id: str

    def _run(self, call: Call) -> Any:  # pragma: no cover - provided by the transports
        raise NotImplementedError

    def _path(self, suffix: str) -> str:
        return f"/v1/memory/agents/{self.agent_id}/{suffix}"

    def remember(self, content: str, *, idempotency_key: str | None = None, **fields: Any) -> Any:
        """Store one memory. Fields: scope, kind, classification, user_id, session_id, team,
        project, retention_days, legal_hold, source, metadata (see docs/memory-api.md)."""
        key = idempotency_key or uuid.uuid4().hex
        return self._run(
            Call(
                "POST",
                self._path("memories"),
                {"content": content, **_clean(fields)},
                headers={"Idempotency-Key": key},
            )
        )

    def remember_batch(self, items: list[dict[str, Any]], *, idempotency_key: str | None = None) -> Any:
        key = idempotency_key or uuid.uuid4().hex
        return self._run(
            Call("POST", self._path("memories/batch"), {"items": items}, headers={"Idempotency-Key": key})
        )

    def get(self, item_id: str) -> Any:
        return self._run(Call("GET", self._path(f"memories/{item_id}")))

    def update(self, item_id: str, content: str) -> Any:
        # Same content twice leaves the same state: safe to retry.
        return self._run(Call("PATCH", self._path(f"memories/{item_id}"), {"content": content}))

    def forget(self, item_id: str) -> Any:
        return self._run(Call("DELETE", self._path(f"memories/{item_id}")))

    def list_page(self, *, cursor: str | None = None, limit: int = 50, **filters: Any) -> Any:
        params = _clean({"cursor": cursor, "limit": limit, **filters})
        return self._run(Call("GET", self._path("memories"), params=params))

    def recall(self, query: str, **fields: Any) -> Any:
        """Results framed as untrusted data: ``context`` is ready to put in a prompt."""
        return self._run(Call("POST", self._path("recall"), {"query": query, **_clean(fields)}))

    def search(self, query: str, **fields: Any) -> Any:
        return self._run(Call("POST", self._path("memories/search"), {"query": query, **_clean(fields)}))

    def purge(self, scope: str, *, confirm: bool = False, **fields: Any) -> Any:
        body = {"scope": scope, "confirm": confirm, **_clean(fields)}
        return self._run(Call("POST", self._path("memories/purge"), body, safe_to_retry=False))

    def federated_recall(self, query: str, **fields: Any) -> Any:
        return self._run(Call("POST", self._path("federated/recall"), {"query": query, **_clean(fields)}))

    def history(self, item_id: str) -> Any:
        return self._run(Call("GET", self._path(f"memories/{item_id}/history")))

    def supersede(self, item_id: str, content: str, *, reason: str = "") -> Any:
        body = {"content": content, "reason": reason}
        return self._run(Call("POST", self._path(f"memories/{item_id}/supersede"), body, safe_to_retry=False))

    def discover(self, query: str, **fields: Any) -> Any:
        return self._run(Call("POST", self._path("discover"), {"query": query, **_clean(fields)}))

    def trace(self, direction: str, **fields: Any) -> Any:
        """``item_id=`` or ``content=``; direction ``effects`` or ``causes``."""
        return self._run(Call("POST", self._path("trace"), {"direction": direction, **_clean(fields)}))

    def causal_chain(self, source: str, target: str, **fields: Any) -> Any:
        body = {"from": source, "to": target, **_clean(fields)}
        return self._run(Call("POST", self._path("causal_chain"), body))

    def what_if(self, item_id: str, origin: str, **fields: Any) -> Any:
        body = {"item_id": item_id, "origin": origin, **_clean(fields)}
        return self._run(Call("POST", self._path("what_if"), body))

    def answer(self, query: str, **fields: Any) -> Any:
        """A cited answer with the facts and causal chain it rests on. Fields: mode
        (discover | recall), scopes, top_k, hops, as_of, user_id, session_id, synthesizer."""
        return self._run(Call("POST", self._path("answer"), {"query": query, **_clean(fields)}))

    # --- knowledge datasets (docs/knowledge.md) ---

    def ingest_knowledge(self, dataset_id: str, texts: list[str], **fields: Any) -> Any:
        """Chunk 1 to 50 texts into a dataset. Fields: scope, team, project, classification,
        retention_days, legal_hold, build_graph. Not retried: a retry could queue a second
        graph build or reach an engine that does not deduplicate."""
        body = {"dataset_id": dataset_id, "texts": texts, **_clean(fields)}
        return self._run(Call("POST", self._path("knowledge"), body, safe_to_retry=False))

    def datasets_page(self, *, cursor: str | None = None, limit: int = 50, scope: str | None = None) -> Any:
        params = _clean({"cursor": cursor, "limit": limit, "scope": scope})
        return self._run(Call("GET", self._path("knowledge/datasets"), params=params))

    def job(self, job_id: str) -> Any:
        """Status and progress of a queued ingest or graph build this agent started."""
        return self._run(Call("GET", f"/v1/jobs/{job_id}"))

    def build_knowledge_graph(self, dataset_ids: list[str]) -> Any:
        """Queue the graph build of datasets: ``{"job": {id, status, url}}``."""
        body = {"dataset_ids": dataset_ids}
        return self._run(Call("POST", self._path("knowledge/graph"), body, safe_to_retry=False))

    def search_knowledge(self, query: str, **fields: Any) -> Any:
        """Fields: dataset_ids, top_k, search_type (CHUNKS, CHUNKS_LEXICAL, SUMMARIES,
        RAG_COMPLETION, GRAPH_COMPLETION), hops, synthesizer."""
        body = {"query": query, **_clean(fields)}
        return self._run(Call("POST", self._path("knowledge/search"), body))

    def dataset_relations(self, dataset_id: str, *, limit: int = 100) -> Any:
        params = {"limit": limit}
        return self._run(Call("GET", self._path(f"knowledge/datasets/{dataset_id}/relations"), params=params))

    def delete_dataset(self, dataset_id: str) -> Any:
        return self._run(Call("DELETE", self._path(f"knowledge/datasets/{dataset_id}")))

    def append_message(self, session_id: str, role: str, content: str, **fields: Any) -> Any:
        """Session memory: one message of a conversation (builtin engine only)."""
        body = {"role": role, "content": content, **_clean(fields)}
        return self._run(
            Call("POST", self._path(f"sessions/{session_id}/messages"), body, safe_to_retry=False)
        )

    def session_page(self, session_id: str, *, cursor: str | None = None, limit: int = 50) -> Any:
        params = _clean({"cursor": cursor, "limit": limit})
        return self._run(Call("GET", self._path(f"sessions/{session_id}/messages"), params=params))

    def policy(self) -> Any:
        """The memory policy in force for this agent (``policy`` holds the rules)."""
        return self._run(Call("GET", self._path("policy")))


def _cursor_of(next_url: str | None) -> str | None:
    if not next_url:
        return None
    return httpx.URL(next_url).params.get("cursor")


def _decode(response: httpx.Response, call: Call) -> Any:
    if response.status_code >= 400:
        try:
            body = response.json()
        except ValueError:
            body = None
        raise error_for(response.status_code, body, response.headers.get("Retry-After"))
    if response.status_code == 204 or not response.content:
        return None
    if call.stream_lines:
        import json

        return [json.loads(line) for line in response.text.splitlines() if line.strip()]
    return response.json()


def _delay(attempt: int, exc: Exception | None) -> float:
    if isinstance(exc, RateLimited):
        return exc.retry_after
    return min(8.0, 0.25 * 2**attempt)


class _Base:
    def __init__(self, base_url: str, api_key: str, *, timeout: float, max_retries: int) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json"}
        self.timeout = timeout
        self.max_retries = max_retries

    def _should_retry(self, call: Call, attempt: int, exc: Exception) -> bool:
        if attempt >= self.max_retries:
            return False
        retriable = isinstance(exc, httpx.TransportError) or (
            isinstance(exc, FedmemError) and exc.status in RETRY_STATUSES
        )
        writes = call.method != "GET"
        return retriable and (not writes or call.safe_to_retry or "Idempotency-Key" in call.headers)


class AgentMemory(_Operations):
    def __init__(self, client: FedmemClient, agent_id: str) -> None:
        self.client, self.agent_id = client, str(agent_id)

    def _run(self, call: Call) -> Any:
        return self.client._run(call)

    def iter_memories(self, *, limit: int = 50, **filters: Any) -> Iterator[dict[str, Any]]:
        cursor = None
        while True:
            page = self.list_page(cursor=cursor, limit=limit, **filters)
            yield from page["results"]
            cursor = _cursor_of(page.get("next"))
            if cursor is None:
                return

    def iter_session(self, session_id: str, *, limit: int = 50) -> Iterator[dict[str, Any]]:
        """A session's messages, oldest first, every page."""
        cursor = None
        while True:
            page = self.session_page(session_id, cursor=cursor, limit=limit)
            yield from page["results"]
            cursor = _cursor_of(page.get("next"))
            if cursor is None:
                return

    def iter_datasets(self, *, limit: int = 50, scope: str | None = None) -> Iterator[dict[str, Any]]:
        """Every knowledge dataset the caller may read, newest first."""
        cursor = None
        while True:
            page = self.datasets_page(cursor=cursor, limit=limit, scope=scope)
            yield from page["results"]
            cursor = _cursor_of(page.get("next"))
            if cursor is None:
                return

    def export(self, scopes: list[str] | None = None) -> list[dict[str, Any]]:
        """Every memory the caller may read, as the JSON Lines records."""
        return self._run(
            Call("POST", self._path("memories/export"), _clean({"scopes": scopes}), stream_lines=True)
        )


class FedmemClient(_Base):
    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        max_retries: int = 3,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, api_key, timeout=timeout, max_retries=max_retries)
        self.http = httpx.Client(
            base_url=self.base_url, headers=self.headers, timeout=timeout, transport=transport
        )

    def __enter__(self) -> FedmemClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def agent(self, agent_id: str) -> AgentMemory:
        return AgentMemory(self, agent_id)

    def me(self) -> Any:
        return self._run(Call("GET", "/v1/me"))

    def engines(self) -> Any:
        return self._run(Call("GET", "/v1/memory/engines"))

    def _run(self, call: Call) -> Any:
        attempt = 0
        while True:
            try:
                response = self.http.request(
                    call.method, call.path, json=call.json, params=call.params or None, headers=call.headers
                )
                return _decode(response, call)
            except (httpx.TransportError, FedmemError) as exc:
                if not self._should_retry(call, attempt, exc):
                    if isinstance(exc, httpx.TransportError):
                        raise FedmemError(0, "connection_failed", str(exc)) from exc
                    raise
                time.sleep(_delay(attempt, exc))
                attempt += 1


class AsyncAgentMemory(_Operations):
    def __init__(self, client: AsyncFedmemClient, agent_id: str) -> None:
        self.client, self.agent_id = client, str(agent_id)

    def _run(self, call: Call) -> Any:
        return self.client._run(call)  # a coroutine: callers await every operation

    async def iter_memories(self, *, limit: int = 50, **filters: Any) -> AsyncIterator[dict[str, Any]]:
        cursor = None
        while True:
            page = await self.list_page(cursor=cursor, limit=limit, **filters)
            for row in page["results"]:
                yield row
            cursor = _cursor_of(page.get("next"))
            if cursor is None:
                return

    async def iter_datasets(
        self, *, limit: int = 50, scope: str | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        cursor = None
        while True:
            page = await self.datasets_page(cursor=cursor, limit=limit, scope=scope)
            for row in page["results"]:
                yield row
            cursor = _cursor_of(page.get("next"))
            if cursor is None:
                return


class AsyncFedmemClient(_Base):
    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        max_retries: int = 3,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, api_key, timeout=timeout, max_retries=max_retries)
        self.http = httpx.AsyncClient(
            base_url=self.base_url, headers=self.headers, timeout=timeout, transport=transport
        )

    async def __aenter__(self) -> AsyncFedmemClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()

    def agent(self, agent_id: str) -> AsyncAgentMemory:
        return AsyncAgentMemory(self, agent_id)

    async def me(self) -> Any:
        return await self._run(Call("GET", "/v1/me"))

    async def _run(self, call: Call) -> Any:
        attempt = 0
        while True:
            try:
                response = await self.http.request(
                    call.method, call.path, json=call.json, params=call.params or None, headers=call.headers
                )
                return _decode(response, call)
            except (httpx.TransportError, FedmemError) as exc:
                if not self._should_retry(call, attempt, exc):
                    if isinstance(exc, httpx.TransportError):
                        raise FedmemError(0, "connection_failed", str(exc)) from exc
                    raise
                await asyncio.sleep(_delay(attempt, exc))
                attempt += 1
