"""History rows: one per mutation of a memory, written in the mutation's transaction."""

from __future__ import annotations

from typing import Any

from django.db import connection

from memory.enforcement import MemoryAccess
from memory.models import MemoryHistory, MemoryItem


def jsonable(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return list(value) if isinstance(value, tuple) else value


def history_row(
    access: MemoryAccess,
    item: MemoryItem,
    event: str,
    *,
    old: str = "",
    new: str = "",
    details: dict[str, Any] | None = None,
) -> MemoryHistory:
    return MemoryHistory(
        tenant_id=item.tenant_id,
        agent_id=item.agent_id,
        item_id=item.pk,
        event=event,
        actor_type=access.actor.type,
        actor_id=access.actor.id,
        old_content=old,
        new_content=new,
        # The subject rides along so erasure finds the history of items already deleted.
        details={**(details or {}), "user_id": item.user_id},
    )


def history_rows_sql(access: MemoryAccess, ids: list[Any], event: str, *, scope: str, with_old: bool) -> None:
    """One history row per affected item, written in SQL so contents never pass through Python."""
    if not ids:
        return
    old = "content" if with_old else "''"
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO memory_history (tenant_id, agent_id, item_id, event, actor_type, actor_id,
                                        old_content, new_content, details, created_at)
            SELECT tenant_id, agent_id, id, %s, %s, %s, {old}, '',
                   jsonb_build_object('scope', %s::text, 'user_id', user_id), now()
            FROM memory_item WHERE id = ANY(%s)
            """,  # noqa: S608 - {old} is one of two fixed fragments; values are parameters
            [event, access.actor.type, access.actor.id, scope, list(ids)],
        )
