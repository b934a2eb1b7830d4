"""The one place that decides whether memory is under legal hold.

An item is held when its own ``legal_hold`` flag is set (written under a policy
with ``legal_hold``) OR an active :class:`governance.models.LegalHold` of its
tenant covers it. Every deleting path — forget, purge, retention, erasure,
provider forget — asks here, and every attempt a hold stops is audited as
``legal_hold.blocked``.

Which rows a hold covers:

* subject: items and session messages whose ``user_id`` is the subject;
* agent: the agent's items and session messages;
* scope: items visible at that scope level (of one agent when the hold names one),
  and session messages for a ``session`` scope hold;
* dataset: items whose provenance names the dataset (``provenance.dataset``, set
  by knowledge ingestion);
* item: that item.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import Q

from core.vocabulary import Scope
from governance.models import LegalHold
from governance.services.audit import audit_record

_NOTHING = Q(pk__in=[])


def active_holds(tenant_id: Any) -> list[LegalHold]:
    return list(LegalHold.objects.active().filter(tenant_id=tenant_id))


def hold_item_q(hold: LegalHold) -> Q:
    """The memory items one hold covers (within its tenant)."""
    base = Q(tenant_id=hold.tenant_id)
    match hold.target:
        case LegalHold.Target.SUBJECT:
            return base & Q(user_id=hold.subject)
        case LegalHold.Target.AGENT:
            return base & Q(agent_id=hold.agent_id)
        case LegalHold.Target.SCOPE:
            q = base & Q(scopes__contains=[hold.scope])
            return q & Q(agent_id=hold.agent_id) if hold.agent_id else q
        case LegalHold.Target.DATASET:
            return base & Q(provenance__dataset=hold.dataset)
        case LegalHold.Target.ITEM:
            return base & Q(pk=hold.item_id)
    return _NOTHING


def hold_message_q(hold: LegalHold) -> Q:
    """The session messages one hold covers."""
    base = Q(tenant_id=hold.tenant_id)
    match hold.target:
        case LegalHold.Target.SUBJECT:
            return base & Q(user_id=hold.subject)
        case LegalHold.Target.AGENT:
            return base & Q(agent_id=hold.agent_id)
        case LegalHold.Target.SCOPE if hold.scope == Scope.SESSION:
            return base & Q(agent_id=hold.agent_id) if hold.agent_id else base
    return _NOTHING


def _any(qs: Iterable[Q]) -> Q:
    combined = _NOTHING
    for q in qs:
        combined |= q
    return combined


def held_items_q(tenant_id: Any, holds: list[LegalHold] | None = None) -> Q:
    """Items of the tenant that must not be deleted: flagged or covered by a hold."""
    holds = active_holds(tenant_id) if holds is None else holds
    return Q(legal_hold=True) | _any(hold_item_q(h) for h in holds)


def held_messages_q(tenant_id: Any, holds: list[LegalHold] | None = None) -> Q:
    holds = active_holds(tenant_id) if holds is None else holds
    return Q(legal_hold=True) | _any(hold_message_q(h) for h in holds)


def holds_covering_item(item: Any) -> list[LegalHold]:
    """The active holds covering one item (its own flag is not a hold row)."""
    from memory.models import MemoryItem

    holds = active_holds(item.tenant_id)
    return [h for h in holds if MemoryItem.objects.filter(hold_item_q(h), pk=item.pk).exists()]


def is_held(item: Any) -> bool:
    return bool(item.legal_hold) or bool(holds_covering_item(item))


def holds_covering_subject(tenant_id: Any, *, subject: str, agent_id: Any = None) -> list[LegalHold]:
    """Active holds that stop deleting a subject's data (erasure, provider forget)."""
    out = []
    for hold in active_holds(tenant_id):
        if (hold.target == LegalHold.Target.SUBJECT and hold.subject == subject) or (
            hold.target == LegalHold.Target.AGENT
            and agent_id is not None
            and str(hold.agent_id) == str(agent_id)
        ):
            out.append(hold)
    return out


def audit_blocked(
    *,
    tenant: Any,
    actor: Any,
    operation: str,
    holds: list[LegalHold],
    count: int,
    flagged: int = 0,
    target: Any = None,
) -> None:
    """Record that holds stopped a deletion. Runs in its own transaction when called
    outside one, so the record survives the refusal that follows it."""
    with transaction.atomic():
        audit_record(
            tenant=tenant,
            actor=actor,
            action="legal_hold.blocked",
            target_type=target[0] if target else "",
            target_id=target[1] if target else "",
            data={
                "operation": operation,
                "count": count,
                "flagged_items": flagged,
                "holds": sorted(str(h.pk) for h in holds),
            },
        )
