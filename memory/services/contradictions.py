"""Contradiction check on write, and its review: list and undo.

When a write asks for it (``check_contradictions``) or the agent's policy does, the
new item is compared with the agent's current facts under the same keys (scope,
subject, team, project; session for session memory), nearest by embedding first,
by the configured resolver (:mod:`memory.contradictions`). A contradicted fact is
soft-superseded by the new one (the supersession service's ``retire``: its
interval closes, ``as_of`` still finds it) and the decision is stored with its
reason. Writing a retired fact's text again re-asserts it: the new item is current
and the retirement is marked reverted (``revived``). Undo restores the old fact as
current again (a new item with its text) and keeps the new one.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from pgvector.django import CosineDistance

from core.errors import ApiError, ContradictionNotFound, ContradictionUndone
from core.vocabulary import Scope
from governance.services.audit import audit_record
from memory.contradictions import get_resolver
from memory.enforcement import MemoryAccess, modifiable_q
from memory.models import ContradictionDecision, MemoryHistory, MemoryItem, Supersession
from memory.services.supersession import retire, successor_draft
from memory.services.write import Prepared, history_row, prepare, store

# Current facts compared with each write (the nearest by embedding).
CANDIDATES = 10


def wants_check(access: MemoryAccess, requested: bool | None) -> bool:
    return access.policy.check_contradictions if requested is None else requested


def _same_keys(item: MemoryItem) -> Q:
    q = Q(scope=item.scope, user_id=item.user_id, team=item.team, project=item.project)
    if item.scope == Scope.SESSION:
        q &= Q(session_id=item.session_id)
    return q


def contradictions_check(*, access: MemoryAccess, item: MemoryItem) -> list[ContradictionDecision]:
    """Compare the freshly stored ``item`` with the agent's current facts and retire
    those it contradicts. Runs inside the write's transaction."""
    resolver = get_resolver()
    revived = _revive_reasserted(access, item)
    candidates = (
        MemoryItem.objects.current()
        .filter(modifiable_q(access), _same_keys(item), created_at__lte=item.created_at, legal_hold=False)
        .exclude(pk=item.pk)
        .exclude(content_hash=item.content_hash)
        .annotate(distance=CosineDistance("embedding", item.embedding))
        .order_by("distance", "created_at")
        .defer("embedding", "search_vector")[:CANDIDATES]
    )
    decisions = []
    for old in candidates:
        verdict = resolver.check(item.content, old.content)
        if verdict is None:
            continue
        locked = MemoryItem.objects.select_for_update().filter(pk=old.pk, invalid_at__isnull=True).first()
        if locked is None:
            continue  # retired meanwhile
        record = retire(access, old=locked, new=item, reason=f"contradiction ({resolver.name})")
        details = {**verdict.details}
        if revived:
            details["revives"] = revived
        decisions.append(
            ContradictionDecision.objects.create(
                tenant_id=access.tenant_id,
                agent=access.agent,
                new_item=item,
                old_item=locked,
                supersession=record,
                resolver=resolver.name,
                reason=verdict.reason[:500],
                details=details,
                actor=access.actor.as_json(),
                created_at=record.created_at,
            )
        )
    return decisions


def _revive_reasserted(access: MemoryAccess, item: MemoryItem) -> list[str]:
    """Retired facts with the same keys and text as ``item``: re-asserted, so their
    retirement is reverted (the new item is their current version)."""
    retired = list(
        MemoryItem.objects.filter(
            modifiable_q(access), _same_keys(item), content_hash=item.content_hash, invalid_at__isnull=False
        )
        .filter(superseded_by_records__reverted_at__isnull=True)
        .exclude(pk=item.pk)
        .distinct()
        .defer("embedding", "search_vector")
    )
    now = timezone.now()
    for old in retired:
        Supersession.objects.filter(old_item=old, reverted_at__isnull=True).update(reverted_at=now)
        history_row(access, old, MemoryHistory.Event.REVIVED, details={"new_item_id": str(item.pk)}).save()
    return [str(old.pk) for old in retired]


# --- review -----------------------------------------------------------------------


def contradictions_for(agent: Any) -> Any:
    return ContradictionDecision.objects.filter(tenant_id=agent.tenant_id, agent=agent).select_related(
        "new_item", "old_item"
    )


def contradiction_get(agent: Any, decision_id: Any) -> ContradictionDecision:
    pk = decision_id if isinstance(decision_id, int) else None
    if pk is None and str(decision_id).isdigit():
        pk = int(str(decision_id))
    found = contradictions_for(agent).filter(pk=pk).first() if pk else None
    if found is None:
        raise ContradictionNotFound("Contradiction decision not found.")
    return found


def contradiction_undo(*, access: MemoryAccess, decision_id: Any, user: Any) -> ContradictionDecision:
    """Undo a decision: the old fact is current again (re-asserted as a new item, so
    ``as_of`` stays exact) and its retirement is marked reverted; the new fact stays.

    The restored copy is prepared (detection, embedding) before the transaction that
    locks the decision and the old row; the decision is re-read under the lock, so an
    undo that raced another finds it undone and stores nothing."""
    decision = contradiction_get(access.agent, decision_id)
    if decision.status == ContradictionDecision.Status.UNDONE:
        raise ContradictionUndone("This decision was already undone.")
    old = MemoryItem.objects.get(pk=decision.old_item_id)
    prepared: Prepared | None = None
    if old.invalid_at is not None:
        found = prepare(access, [successor_draft(old, old.content)])[0]
        if isinstance(found, ApiError):
            raise found
        prepared = found
    with transaction.atomic():
        decision = ContradictionDecision.objects.select_for_update().get(pk=decision.pk)
        if decision.status == ContradictionDecision.Status.UNDONE:
            raise ContradictionUndone("This decision was already undone.")
        old = MemoryItem.objects.select_for_update().get(pk=decision.old_item_id)
        restored = None
        if old.invalid_at is not None and prepared is not None:
            restored = store(access, [prepared], "contradiction-undo")[0].item
            history_row(
                access,
                old,
                MemoryHistory.Event.REVIVED,
                details={"new_item_id": str(restored.pk), "contradiction": decision.pk},
            ).save()
        now = timezone.now()
        if decision.supersession_id:
            Supersession.objects.filter(pk=decision.supersession_id, reverted_at__isnull=True).update(
                reverted_at=now
            )
        decision.status = ContradictionDecision.Status.UNDONE
        decision.undone_at = now
        decision.undone_by = access.actor.as_json()
        decision.details = {**decision.details, "restored_item": str(restored.pk) if restored else None}
        decision.save(update_fields=["status", "undone_at", "undone_by", "details"])
        audit_record(
            tenant=access.agent.tenant,
            actor=user,
            action="memory.contradiction.undo",
            target=decision,
            data={
                "agent": str(access.agent.pk),
                "old_item": str(decision.old_item_id),
                "new_item": str(decision.new_item_id),
                "restored_item": str(restored.pk) if restored else None,
                "resolver": decision.resolver,
            },
        )
    return decision
