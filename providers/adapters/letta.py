"""letta: an agent's core memory blocks and its recent messages.

Letta keeps an agent's always-in-context memory as *blocks* (label, value,
limit) — handed over as ``pinned_context`` — and its conversation as
*messages* — handed over as ``message`` (user and assistant messages only;
reasoning, tool calls and tool returns are execution steps). The adapter makes
no claim to Letta's archival memory: it does not announce ``search``. A recall
answers the query: the blocks and recent messages that share a word with it,
most shared words first (a block the query does not touch is not a hit, so
pinned blocks never take the top ranks of every fused answer); ``list`` returns
every block and the recent messages.

Which Letta agent? The one the engine's ``agents`` option maps the fedmem agent
to (``{"<fedmem agent id>": "<letta agent id>"}``; fedmem agent ids are unique
across tenants), else the one tagged ``fedmem:<tenant>:<agent>`` (the tag carries
the tenant, so a shared Letta server is ``logical``). On Letta Cloud, ``project``
/ ``project_id`` name the project every call is made in. The official
``letta-client`` runs over the guarded egress client.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from providers.adapters.base import (
    AdapterError,
    HealthReport,
    Hit,
    MemoryAdapter,
    OperationContext,
    ranked,
)
from providers.credentials import Secret

CONVERSATION_TYPES = {"user_message": "user", "assistant_message": "assistant"}
_WORD = re.compile(r"\w+")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "me",
        "my",
        "of",
        "on",
        "or",
        "the",
        "to",
        "was",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "with",
        "you",
    ]
)


def _words(text: str) -> set[str]:
    # A plural and its singular count as one word ("ships" / "ship"); nothing more clever.
    return {
        w[:-1] if len(w) > 3 and w.endswith("s") else w for w in _WORD.findall(text.lower()) if w not in _STOP
    }


def _content(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for part in content or []:
        text = getattr(part, "text", None) if not isinstance(part, dict) else part.get("text")
        if isinstance(text, str):
            parts.append(text)
    return "\n".join(parts)


class LettaAdapter(MemoryAdapter):
    provider = "letta"
    sdk_modules = ("letta_client",)
    label = "Letta"
    memory_capabilities: ClassVar[frozenset[str]] = frozenset(
        {"recall", "list", "get_health", "get_capabilities"}
    )
    shared_isolation = "logical"
    session_memory = True
    record_kinds = ("pinned_context", "message")
    option_types: ClassVar[dict[str, type | tuple[type, ...]]] = {
        "recent_messages": int,
        "agents": dict,  # fedmem agent id -> Letta agent id
        "project": str,  # Letta Cloud project slug (X-Project)
        "project_id": str,  # Letta Cloud project id (X-Project-Id)
    }
    injectable = ("http_transport", "client")

    def __init__(self, *args: Any, client: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._client = client

    @classmethod
    def validate_options(cls, options: Any) -> dict[str, Any]:
        clean = super().validate_options(options)
        mapping = clean.get("agents", {})
        if not all(isinstance(k, str) and isinstance(v, str) and v for k, v in mapping.items()):
            raise ValueError("agents maps fedmem agent ids to Letta agent ids (strings).")
        return clean

    def auth_headers(self, secret: Secret | None) -> dict[str, str]:
        return {}  # the Letta client sets "Authorization: Bearer <key>"

    def client(self, ctx: OperationContext) -> Any:
        if self._client is not None:
            return self._client
        from letta_client import Letta

        secret = self.credential()
        return Letta(
            api_key=secret.reveal() if secret else None,
            base_url=self.engine.base_url,
            max_retries=0,
            http_client=self.http_client(ctx, with_auth=False),
            project=self.engine.options.get("project"),
            project_id=self.engine.options.get("project_id"),
        )

    @staticmethod
    def tag(ctx: OperationContext) -> str:
        if not ctx.agent_id:
            raise AdapterError("Letta memory belongs to an agent.", retryable=False, reason="scope_required")
        return f"fedmem:{ctx.tenant_slug}:{ctx.agent_id}"

    def letta_agent(self, client: Any, ctx: OperationContext) -> str | None:
        mapped = (self.engine.options.get("agents") or {}).get(ctx.agent_id or "")
        if mapped:
            return str(mapped)
        extra: dict[str, Any] = {}
        if self.engine.options.get("project_id"):
            extra["project_id"] = self.engine.options["project_id"]
        page = client.agents.list(tags=[self.tag(ctx)], match_all_tags=True, limit=2, **extra)
        agents = list(page.items) if hasattr(page, "items") else list(page)
        if len(agents) > 1:
            raise AdapterError(
                "Two Letta agents carry the same fedmem tag.", retryable=False, reason="ambiguous"
            )
        return agents[0].id if agents else None

    def _memory(self, ctx: OperationContext, limit: int) -> list[Hit]:
        client = self.client(ctx)
        agent_id = self.letta_agent(client, ctx)
        if agent_id is None:
            return []  # no Letta agent for this fedmem agent: nothing remembered there
        hits: list[Hit] = []
        for block in client.agents.blocks.list(agent_id, limit=50).items:
            hits.append(
                Hit(
                    provider_id=self.provider,
                    engine_id=self.engine.engine_id,
                    external_id=f"block:{block.id}",
                    kind="pinned_context",
                    text=block.value or "",
                    provenance={"provider": "letta", "agent_id": agent_id, "block_id": block.id},
                    metadata={
                        "label": block.label,
                        "limit": block.limit,
                        "description": block.description,
                        "read_only": block.read_only,
                    },
                )
            )
        recent = int(self.engine.options.get("recent_messages") or limit)
        page = client.agents.messages.list(agent_id, limit=min(100, recent * 3), order="desc")
        messages = [m for m in page.items if getattr(m, "message_type", None) in CONVERSATION_TYPES]
        for message in messages[:recent]:
            hits.append(
                Hit(
                    provider_id=self.provider,
                    engine_id=self.engine.engine_id,
                    external_id=f"message:{message.id}",
                    kind="message",
                    text=_content(getattr(message, "content", "")),
                    provenance={
                        "provider": "letta",
                        "agent_id": agent_id,
                        "message_id": message.id,
                    },
                    created_at=getattr(message, "date", None),
                    metadata={"role": CONVERSATION_TYPES[message.message_type], "durable": False},
                )
            )
        return ranked(hits, limit)

    def get_health(self, ctx: OperationContext) -> HealthReport:
        watch = self.timed()
        health = self.client(ctx).health()
        return HealthReport(
            "ok" if health.status == "ok" else "degraded",
            watch.ms,
            {"version": health.version, "engine_status": health.status},
        )

    def recall(self, ctx: OperationContext, *, query: str, top_k: int) -> list[Hit]:
        # Letta offers no query over blocks and recent messages (archival search is
        # not claimed), so the query is applied here: shared words, most first; ties
        # keep Letta's order (blocks, then newest messages).
        wanted = _words(query)
        scored = []
        for position, hit in enumerate(self._memory(ctx, 100)):
            overlap = len(wanted & _words(hit.text))
            if overlap:
                hit.score = overlap / max(1, len(wanted))
                scored.append((-overlap, position, hit))
        return ranked([hit for _, _, hit in sorted(scored, key=lambda t: t[:2])], top_k)

    def list(self, ctx: OperationContext, *, limit: int) -> list[Hit]:
        return self._memory(ctx, limit)
