"""A memory loop around any chat function ``f(messages) -> str``.

Before each call it recalls what is relevant to the latest user message — within a
budget of facts and characters, above a minimum score, in graph mode for
why-questions so the causal chain reaches its root cause — and puts it in front of
that message as one system message framed as untrusted data. After the call it may
store the exchange, as the switches and the agent's policy allow:

* nothing is stored unless ``store_user`` / ``store_assistant`` say so, and only in a
  scope the agent's policy lets it write (checked before writing, and the server
  checks again);
* a ``redact`` hook sees every text before it leaves (return None to store nothing);
* recalled text is never stored again: the memory block is never a candidate, and a
  sentence repeating a fact shown in this conversation is dropped;
* a fact already shown in this conversation is not injected again.

    loop = MemoryLoop(fm.agent(agent_id), chat, user_id="alice", store_user=True)
    reply = loop([{"role": "user", "content": "Why did checkout fail yesterday?"}])
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fedmem_client.client import AgentMemory
from fedmem_client.errors import FedmemError, PermissionDenied, ValidationError
from fedmem_client.framing import frame, new_nonce

Message = dict[str, Any]
ChatFn = Callable[[list[Message]], str]

WHY = re.compile(r"\b(why|cause[sd]?|because|reason|root cause|how come|what led to)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
# Which policy mode governs writes in each scope.
_MODE_OF_SCOPE = {
    "session": "session",
    "user": "long_term",
    "agent": "agent",
    "shared_agents": "shared",
    "team": "shared",
    "project": "shared",
    "organization": "shared",
    "global": "shared",
}
FRAMED_FIELDS = ("id", "scope", "kind", "created_at", "score", "content")


def is_why_question(text: str) -> bool:
    return bool(WHY.search(text))


def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


@dataclass
class Turn:
    """What one call did: the recall it made, what it injected, what it stored or skipped."""

    query: str
    mode: str = "hybrid"
    injected: list[dict[str, Any]] = field(default_factory=list)
    stored: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


class MemoryLoop:
    def __init__(
        self,
        memory: AgentMemory,
        chat: ChatFn,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        scopes: list[str] | None = None,
        max_facts: int = 5,
        max_chars: int = 2000,
        min_score: float | None = None,
        graph_for_why: bool = True,
        hops: int = 3,
        store_user: bool = False,
        store_assistant: bool = False,
        store_scope: str | None = None,
        redact: Callable[[str], str | None] | None = None,
    ) -> None:
        self.memory = memory
        self.chat = chat
        self.user_id, self.session_id, self.scopes = user_id, session_id, scopes
        self.max_facts, self.max_chars, self.min_score = max_facts, max_chars, min_score
        self.graph_for_why, self.hops = graph_for_why, hops
        self.store_user, self.store_assistant = store_user, store_assistant
        self.store_scope = store_scope
        self.redact = redact
        self.shown: dict[str, str] = {}  # item id -> content shown in this conversation
        self.turns: list[Turn] = []
        self._policy: dict[str, Any] | None = None

    # --- before the call ----------------------------------------------------------

    def _recall(self, turn: Turn) -> list[dict[str, Any]]:
        turn.mode = "graph" if self.graph_for_why and is_why_question(turn.query) else "hybrid"
        fields: dict[str, Any] = {
            "user_id": self.user_id,
            "session_id": self.session_id,
            "scopes": self.scopes,
            "min_score": self.min_score,
            "mode": turn.mode,
            # Ask for more than the budget: some results may have been shown already.
            "top_k": min(100, self.max_facts + len(self.shown) + 5),
        }
        if turn.mode == "graph":
            fields["hops"] = self.hops
        results = self.memory.recall(turn.query, **fields)["results"]
        chosen, used = [], 0
        for result in results:
            if result["id"] in self.shown or len(chosen) >= self.max_facts:
                continue
            if used + len(result["content"]) > self.max_chars:
                continue
            chosen.append(result)
            used += len(result["content"])
        return chosen

    def _inject(self, messages: list[Message], chosen: list[dict[str, Any]]) -> list[Message]:
        if not chosen:
            return list(messages)
        block = frame([{k: r[k] for k in FRAMED_FIELDS if k in r} for r in chosen], new_nonce())
        system = {"role": "system", "content": "Relevant memory for this conversation:\n" + block}
        last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
        return [*messages[:last_user], system, *messages[last_user:]]

    # --- after the call -----------------------------------------------------------

    def policy(self) -> dict[str, Any]:
        if self._policy is None:
            self._policy = self.memory.policy()["policy"]
        return self._policy

    def _scope(self) -> str:
        return self.store_scope or self.policy()["default_scope"]

    def _may_write(self, scope: str) -> str | None:
        """Why the policy forbids writing in ``scope``, or None when it allows it."""
        policy = self.policy()
        if scope not in policy["write_scopes"]:
            return f"scope {scope} is not in the policy's write_scopes"
        mode = _MODE_OF_SCOPE.get(scope, "shared")
        if not policy["modes"].get(mode, False):
            return f"the policy's {mode} mode is off"
        if "episodic" not in policy["allowed_kinds"]:
            return "the policy does not allow episodic memories"
        return None

    def _fresh_text(self, text: str) -> str:
        """The text without any sentence repeating a fact shown in this conversation."""
        shown = [_norm(content) for content in self.shown.values()]
        kept = []
        for sentence in _SENTENCE.split(text.strip()):
            norm = _norm(sentence)
            if not norm or "memory_data_" in norm:
                continue
            padded = f" {norm} "
            if any(padded in f" {fact} " or f" {fact} " in padded for fact in shown if fact):
                continue
            kept.append(sentence)
        return " ".join(kept).strip()

    def _store(self, turn: Turn, role: str, text: str) -> None:
        fresh = self._fresh_text(text)
        if self.redact is not None and fresh:
            fresh = self.redact(fresh) or ""
        if not fresh:
            turn.skipped.append(f"{role}: nothing new to store")
            return
        scope = self._scope()
        refusal = self._may_write(scope)
        if refusal:
            turn.skipped.append(f"{role}: {refusal}")
            return
        try:
            item = self.memory.remember(
                fresh,
                scope=scope,
                kind="episodic",
                record_kind="message",
                user_id=self.user_id,
                session_id=self.session_id,
                source="memory-loop",
                metadata={"role": role},
            )
        except (PermissionDenied, ValidationError) as exc:
            # The server's policy check is the last word (personal data, classification).
            turn.skipped.append(f"{role}: refused ({exc.code})")
            return
        turn.stored.append(item)

    # --- the call -----------------------------------------------------------------

    def __call__(self, messages: list[Message]) -> str:
        users = [m for m in messages if m.get("role") == "user"]
        if not users:
            return self.chat(list(messages))
        turn = Turn(query=str(users[-1]["content"]))
        self.turns.append(turn)
        try:
            turn.injected = self._recall(turn)
        except FedmemError as exc:
            # Memory is an aid: the conversation goes on without it.
            turn.skipped.append(f"recall failed ({exc.code})")
        reply = self.chat(self._inject(messages, turn.injected))
        for result in turn.injected:
            self.shown[result["id"]] = result["content"]
        if self.store_user:
            self._store(turn, "user", turn.query)
        if self.store_assistant:
            self._store(turn, "assistant", reply)
        return reply
