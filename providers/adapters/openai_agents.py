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
  shared instance is only ``none``-isolated; still, a conversation fedmem started
  carries ``fedmem_tenant`` in its metadata and is never read for another tenant.

A conversation must exist before items can be added to it (the API answers 404).
``remember`` into a session id that is no conversation starts one (with the item
and the tenant in its metadata) and answers the new conversation id in
``detail.session_id``: the caller uses that id from then on.
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
    injectable = ("http_transport", "session_factory", "client")

    def __init__(
        self,
        *args: Any,
        session_factory: SessionFactory | None = None,
        client: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._session_factory = session_factory
        self._client = client  # a caller's AsyncOpenAI for the Conversations API

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

    def openai_client(self, ctx: OperationContext) -> Any:
        if self._client is not None:
            return self._client
        from openai import AsyncOpenAI

        secret = self.credential()
        return AsyncOpenAI(
            api_key=secret.reveal() if secret else "unset",
            base_url=self.engine.base_url,
            # openai 3.x annotates httpx2's client; httpx's AsyncClient has the same
            # interface and is what carries the guarded transport (tested end to end).
            http_client=self.async_http_client(ctx, with_auth=False),  # type: ignore[arg-type]
            max_retries=0,
        )

    def session(self, ctx: OperationContext) -> Any:
        key = self.session_key(ctx)
        if self._session_factory is not None:
            return self._session_factory(key)
        from agents.memory import OpenAIConversationsSession

        self._check_conversation(ctx)
        return OpenAIConversationsSession(conversation_id=key, openai_client=self.openai_client(ctx))

    def _conversation(self, ctx: OperationContext) -> Any | None:
        """The conversation behind the session id, None when the API has no such one."""
        from openai import NotFoundError

        client = self.openai_client(ctx)
        try:
            return run_sync(lambda: client.conversations.retrieve(self.session_key(ctx)))
        except NotFoundError:
            return None

    def _check_conversation(self, ctx: OperationContext) -> None:
        conversation = self._conversation(ctx)
        if conversation is None:
            raise AdapterError("No such conversation.", retryable=False, reason="not_found", status=404)
        tenant = (getattr(conversation, "metadata", None) or {}).get("fedmem_tenant")
        if tenant is not None and tenant != ctx.tenant_slug:
            # Started by fedmem for another tenant: the same answer as a missing one.
            raise AdapterError("No such conversation.", retryable=False, reason="not_found", status=404)

    def _items(self, ctx: OperationContext, limit: int | None) -> list[dict[str, Any]]:
        try:
            session = self.session(ctx)
        except AdapterError as exc:
            if exc.reason == "not_found":
                return []  # no conversation: nothing remembered there
            raise
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
        item = {"role": role, "content": record.text}
        if self._session_factory is None and self._conversation(ctx) is None:
            client = self.openai_client(ctx)
            metadata = {"fedmem_tenant": ctx.tenant_slug, "fedmem_session": str(ctx.session_id)[:512]}
            created = run_sync(lambda: client.conversations.create(items=[item], metadata=metadata))
            return WriteResult(
                "settled",
                [],
                None,
                {
                    "session_id": created.id,
                    "conversation_created": True,
                    "requested_session_id": ctx.session_id,
                },
            )
        session = self.session(ctx)
        run_sync(lambda: session.add_items([item]))
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
        try:
            session = self.session(ctx)
        except AdapterError as exc:
            if exc.reason == "not_found":
                return WriteResult("settled", [], None, {"session_id": ctx.session_id, "deleted": 0})
            raise
        run_sync(session.clear_session)
        return WriteResult("settled", [], None, {"session_id": ctx.session_id})
