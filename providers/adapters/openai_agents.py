"""openai_agents: an Agents SDK session's ordered items, as ``message`` records.

A session is conversation state: the ordered input/output items of one
conversation. The adapter hands them over as ``message`` records, most recent
first, each marked ``durable: false`` — they are never presented as durable
facts about a user. Tool calls, reasoning and other non-message items are
execution steps and are skipped. A session has no search: ``recall`` returns the
most recent messages of the caller's session, whatever the query.

Sessions come from:

* a ``session_factory`` handed in by the caller (any ``agents.memory.Session``:
  ``SQLiteSession``, ``SQLAlchemySession`` ...); the session id is namespaced
  ``tenant:agent:session``, which makes a shared instance ``logical``;
* otherwise the OpenAI Conversations API (``OpenAIConversationsSession`` with an
  ``AsyncOpenAI`` client over the guarded egress client); the fedmem session id is
  the conversation id. Conversation ids are global to an OpenAI project, so a
  shared instance is only ``none``-isolated.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, ClassVar

from providers.adapters.base import (
    AdapterError,
    HealthReport,
    Hit,
    MemoryAdapter,
    NewRecord,
    OperationContext,
    WriteResult,
    check_status,
    ranked,
    run_sync,
)
from providers.credentials import Secret

SessionFactory = Callable[[str], Any]
MAX_SESSION_ITEMS = 1000


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts = []
    for part in content or []:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
        elif isinstance(part, dict) and isinstance(part.get("refusal"), str):
            parts.append(part["refusal"])
    return "\n".join(parts)


def _is_message(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type", "message") == "message" and "role" in item


class OpenAIAgentsAdapter(MemoryAdapter):
    provider = "openai_agents"
    sdk_modules = ("agents.memory", "openai")
    label = "OpenAI Agents SDK session"
    memory_capabilities: ClassVar[frozenset[str]] = frozenset(
        {
            "remember",
            "recall",
            "list",
            "get",
            "purge",
            "get_health",
            "get_capabilities",
        }
    )
    shared_isolation = "none"
    session_memory = True
    record_kinds = ("message",)

    def __init__(self, *args: Any, session_factory: SessionFactory | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._session_factory = session_factory

    @property
    def isolation(self) -> str:
        if self.engine.dedicated:
            return "dedicated"
        return "logical" if self._session_factory is not None else self.shared_isolation

    def auth_headers(self, secret: Secret | None) -> dict[str, str]:
        return {}  # AsyncOpenAI sets Authorization from api_key

    # -- sessions ----------------------------------------------------------------

    def session_key(self, ctx: OperationContext) -> str:
        if not ctx.session_id:
            raise AdapterError(
                "Agents SDK sessions need a session id.", retryable=False, reason="scope_required"
            )
        if self._session_factory is not None:
            return f"{ctx.tenant_slug}:{ctx.agent_id or '_'}:{ctx.session_id}"
        return ctx.session_id

    def session(self, ctx: OperationContext) -> Any:
        key = self.session_key(ctx)
        if self._session_factory is not None:
            return self._session_factory(key)
        from agents.memory import OpenAIConversationsSession
        from openai import AsyncOpenAI

        secret = self.credential()
        client = AsyncOpenAI(
            api_key=secret.reveal() if secret else "unset",
            base_url=self.engine.base_url,
            # openai 3.x annotates httpx2's client; httpx's AsyncClient has the same
            # interface and is what carries the guarded transport (tested end to end).
            http_client=self.async_http_client(ctx, with_auth=False),  # type: ignore[arg-type]
            max_retries=0,
        )
        return OpenAIConversationsSession(conversation_id=key, openai_client=client)

    def _items(self, ctx: OperationContext, limit: int | None) -> list[dict[str, Any]]:
        session = self.session(ctx)
        return list(run_sync(lambda: session.get_items(limit=limit)))

    def _hit(self, item: dict[str, Any], position: int, ctx: OperationContext) -> Hit:
        external_id = str(
            item.get("id")
            or "sha:"
            + hashlib.sha256(json.dumps(item, sort_keys=True, default=str).encode()).hexdigest()[:24]
        )
        return Hit(
            provider_id=self.provider,
            engine_id=self.engine.engine_id,
            external_id=external_id,
            kind="message",
            text=_text(item),
            provenance={
                "provider": "openai_agents",
                "session_id": ctx.session_id,
                "position": position,
            },
            metadata={"role": item.get("role"), "durable": False, "status": item.get("status")},
        )

    def _recent(self, ctx: OperationContext, limit: int) -> list[Hit]:
        # Ask for more than the limit: tool calls and reasoning items are skipped.
        items = self._items(ctx, min(MAX_SESSION_ITEMS, limit * 4))
        messages = [(position, item) for position, item in enumerate(items) if _is_message(item)]
        newest_first = list(reversed(messages))[:limit]
        return ranked([self._hit(item, position, ctx) for position, item in newest_first], limit)

    # -- operations -----------------------------------------------------------

    def get_health(self, ctx: OperationContext) -> HealthReport:
        watch = self.timed()
        if self._session_factory is not None:
            return HealthReport("ok", watch.ms, {"sessions": "library"})
        with self.http_client(ctx) as client:
            secret = self.credential()
            headers = {"Authorization": f"Bearer {secret.reveal()}"} if secret else {}
            check_status(client.get(f"{self.base_path()}/models", headers=headers), self.provider)
        return HealthReport("ok", watch.ms, {"sessions": "conversations_api"})

    def remember(self, ctx: OperationContext, *, record: NewRecord) -> WriteResult:
        role = record.role if record.role in {"user", "assistant", "system", "developer"} else "user"
        session = self.session(ctx)
        run_sync(lambda: session.add_items([{"role": role, "content": record.text}]))
        return WriteResult("settled", [], None, {"session_id": ctx.session_id})

    def recall(self, ctx: OperationContext, *, query: str, top_k: int) -> list[Hit]:
        return self._recent(ctx, top_k)

    def list(self, ctx: OperationContext, *, limit: int) -> list[Hit]:
        return self._recent(ctx, limit)

    def get(self, ctx: OperationContext, *, external_id: str) -> Hit:
        items = self._items(ctx, MAX_SESSION_ITEMS)
        for position, item in enumerate(items):
            if _is_message(item):
                hit = self._hit(item, position, ctx)
                if hit.external_id == external_id:
                    hit.rank = 1
                    return hit
        raise AdapterError("No such session item.", retryable=False, reason="not_found", status=404)

    def purge(self, ctx: OperationContext) -> WriteResult:
        session = self.session(ctx)
        run_sync(session.clear_session)
        return WriteResult("settled", [], None, {"session_id": ctx.session_id})
