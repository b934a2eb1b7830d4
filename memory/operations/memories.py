"""Writing and reading an agent's memories: remember (one, split, or a batch),
list, get, update, forget, purge, export, and session messages."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from core.errors import ApiError
from memory import engines
from memory.enforcement import MemoryAccess
from memory.models import MemoryItem, SessionMessage
from memory.rendering import item_json, message_json
from memory.selectors import (
    memory_export_rows,
    memory_item_get,
    memory_items_visible,
    session_messages_visible,
)
from memory.services import items as item_services
from memory.services.items import MemoryDraft, PurgeReport
from memory.services.sessions import session_message_append

CREATED, OK, ACCEPTED = 201, 200, 202


def _error_json(error: ApiError) -> dict[str, Any]:
    return {"code": str(error.code), "message": error.message, "details": error.details}


@dataclass(frozen=True)
class RememberRequest:
    draft: MemoryDraft
    split: bool = False  # one memory per sentence
    idempotency_key: str | None = None
    trace_parent: str | None = None


@dataclass(frozen=True)
class Remembered:
    """One remember as the engine answered it; ``status`` is the HTTP status REST
    answers with (MCP answers the same body)."""

    result: engines.WriteResult

    @property
    def status(self) -> int:
        if self.result.status == "queued":
            return ACCEPTED
        if self.result.status == "settled":
            return CREATED
        assert self.result.outcome is not None
        return CREATED if self.result.outcome.created else OK

    @property
    def replayed(self) -> bool:
        return self.result.outcome is not None and self.result.outcome.replayed

    def body(self) -> dict[str, Any]:
        if self.result.record is not None:
            return {"engine": self.result.record}
        outcome = self.result.outcome
        assert outcome is not None
        data = item_json(outcome.item)
        data["deduplicated"] = outcome.deduplicated
        if outcome.contradictions is not None:
            data["contradictions"] = [
                {"id": d.pk, "old_item_id": str(d.old_item_id), "reason": d.reason}
                for d in outcome.contradictions
            ]
        return data


@dataclass(frozen=True)
class BatchRemembered:
    """A batch's entries in request order, each with its own status."""

    write: engines.BatchWrite
    replayed: bool = False

    def _count(self, name: str) -> int:
        return sum(1 for e in self.write.entries if e.status == name)

    @property
    def status(self) -> int:
        if self._count("queued"):
            return ACCEPTED
        if self._count("created") or self._count("settled"):
            return CREATED
        return OK

    def body(self) -> dict[str, Any]:
        results = []
        for entry in self.write.entries:
            row: dict[str, Any] = {"index": entry.index, "status": entry.status}
            if entry.error is not None:
                row["error"] = _error_json(entry.error)
            elif entry.record is not None:
                row["engine"] = entry.record
            else:
                assert entry.outcome is not None
                row["item"] = item_json(entry.outcome.item)
            results.append(row)
        names = (
            ("created", "deduplicated", "queued", "settled")
            if self.write.routed
            else ("created", "deduplicated")
        )
        return {
            **{name: self._count(name) for name in names},
            "failed": self._count("error"),
            "results": results,
        }


def remember(access: MemoryAccess, request: RememberRequest) -> Remembered | BatchRemembered:
    """One remember: the engine the policy names takes it (under mem0 / hybrid a
    queued write is 202, never settled); ``split`` stores one memory per sentence
    and answers with the batch shape."""
    engine = engines.for_access(access)
    if request.split:
        drafts: list[MemoryDraft | ApiError] = list(item_services.split_drafts(request.draft))
        written = engine.remember_batch(
            access,
            drafts,
            idempotency_key=request.idempotency_key,
            trace_parent=request.trace_parent,
            via="split",
        )
        return BatchRemembered(written)
    return Remembered(
        engine.remember(
            access, request.draft, idempotency_key=request.idempotency_key, trace_parent=request.trace_parent
        )
    )


@dataclass(frozen=True)
class BatchRequest:
    # Items that failed to parse arrive as their error, so results keep the request's order.
    drafts: tuple[MemoryDraft | ApiError, ...]
    idempotency_key: str | None = None
    trace_parent: str | None = None


def remember_batch(access: MemoryAccess, request: BatchRequest) -> BatchRemembered:
    """1 to 100 memories, each with its own result."""
    written = engines.for_access(access).remember_batch(
        access,
        list(request.drafts),
        idempotency_key=request.idempotency_key,
        trace_parent=request.trace_parent,
    )
    return BatchRemembered(written)


@dataclass(frozen=True)
class ListRequest:
    scope: str | None = None
    kind: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    include_content: bool = True


def memories(access: MemoryAccess, request: ListRequest) -> Any:
    """The memories the caller may read, newest first (a queryset to page)."""
    return memory_items_visible(
        access,
        scopes=[request.scope] if request.scope else None,
        kind=request.kind,
        session_id=request.session_id,
        user_id=request.user_id,
        include_content=request.include_content,
    )


def page_body(items: list[MemoryItem], *, include_content: bool) -> list[dict[str, Any]]:
    return [item_json(item, include_content=include_content) for item in items]


@dataclass(frozen=True)
class ItemResult:
    item: MemoryItem

    def body(self) -> dict[str, Any]:
        return item_json(self.item)


def memory_get(access: MemoryAccess, item_id: Any) -> ItemResult:
    return ItemResult(memory_item_get(access, item_id))


def update(access: MemoryAccess, item_id: Any, content: str) -> ItemResult:
    """New content (re-embedded; created_at kept; history written); refused under hold."""
    return ItemResult(item_services.memory_update(access=access, item_id=item_id, content=content))


def forget(access: MemoryAccess, item_id: Any) -> None:
    """Delete one memory; refused (and audited) under legal hold."""
    item_services.memory_forget(access=access, item_id=item_id)


@dataclass(frozen=True)
class PurgeRequest:
    scope: str
    confirm: bool = False
    team: str = ""
    project: str = ""
    session_id: str = ""
    user_id: str = ""


def purge(access: MemoryAccess, request: PurgeRequest) -> PurgeReport:
    """Every memory of the agent in one scope; held ones kept and counted."""
    return item_services.memory_purge(
        access=access,
        scope=request.scope,
        confirm=request.confirm,
        team=request.team,
        project=request.project,
        session_id=request.session_id,
        user_id=request.user_id,
    )


def export_lines(access: MemoryAccess, scopes: list[str] | None) -> Iterator[dict[str, Any]]:
    """Everything the caller may read, one JSON object per row (``type``: memory or
    session_message). The scopes are checked before the first row is asked for."""
    rows = memory_export_rows(access, scopes)

    def lines() -> Iterator[dict[str, Any]]:
        for kind, row in rows:
            data = item_json(row) if kind == "memory" else message_json(row)
            data["type"] = kind
            yield data

    return lines()


@dataclass(frozen=True)
class MessageRequest:
    session_id: str
    role: str
    content: str
    user_id: str | None = None
    classification: str | None = None
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True)
class MessageResult:
    message: SessionMessage

    def body(self) -> dict[str, Any]:
        return message_json(self.message)


def session_append(access: MemoryAccess, request: MessageRequest) -> MessageResult:
    """Append a message to a session (session memory stays builtin)."""
    return MessageResult(
        session_message_append(
            access=access,
            session_id=request.session_id,
            role=request.role,
            content=request.content,
            user_id=request.user_id,
            classification=request.classification,
            metadata=request.metadata,
        )
    )


def session_messages(access: MemoryAccess, session_id: str) -> Any:
    return session_messages_visible(access, session_id)
