"""Place and release legal holds (security officers; release by a second one).

The audit trail names a subject only by :func:`subject_hash`, so erasing the
subject later leaves nothing of them in the trail.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.apps import apps
from django.db import transaction
from django.utils import timezone

from core.errors import Forbidden, LegalHoldReleased, TwoPersonRule, field_error
from core.vocabulary import Scope
from governance.models import Agent, LegalHold, Role, Tenant
from governance.permissions import has_role
from governance.services.audit import audit_record, subject_hash

invalid_field = field_error  # the one field-error helper (core.errors)


def _require_officer(actor: Any, tenant: Tenant) -> None:
    if not has_role(actor, tenant, [Role.SECURITY_OFFICER]):
        raise Forbidden("Only a security officer may place or release legal holds.")


def _audit_data(hold: LegalHold) -> dict[str, Any]:
    return {
        "target": hold.target,
        "subject_hash": subject_hash(hold.subject) if hold.subject else "",
        "agent": str(hold.agent_id) if hold.agent_id else "",
        "scope": hold.scope,
        "dataset": hold.dataset,
        "item": str(hold.item_id) if hold.item_id else "",
    }


@transaction.atomic
def legal_hold_place(
    *,
    tenant: Tenant,
    actor: Any,
    target: str,
    reason: str,
    subject: str = "",
    agent: Agent | None = None,
    scope: str = "",
    dataset: str = "",
    item_id: uuid.UUID | None = None,
) -> LegalHold:
    """Place a hold; from the commit on, nothing it covers can be deleted."""
    _require_officer(actor, tenant)
    if target not in LegalHold.Target.values:
        raise invalid_field("target", "must be one of " + ", ".join(LegalHold.Target.values))
    if target == LegalHold.Target.SUBJECT and not subject:
        raise invalid_field("subject", "required for a subject hold")
    if target == LegalHold.Target.AGENT and agent is None:
        raise invalid_field("agent", "required for an agent hold")
    if target == LegalHold.Target.SCOPE and scope not in Scope.values:
        raise invalid_field("scope", "must be one of " + ", ".join(Scope.values))
    if target == LegalHold.Target.DATASET and not dataset:
        raise invalid_field("dataset", "required for a dataset hold")
    if target == LegalHold.Target.ITEM:
        # Looked up through the app registry: governance does not import memory.
        item_model = apps.get_model("memory", "MemoryItem")
        if item_id is None or not item_model.objects.filter(pk=item_id, tenant=tenant).exists():
            raise invalid_field("item", "no memory item with this id in your tenant")
    if agent is not None and agent.tenant_id != tenant.pk:
        raise invalid_field("agent", "no such agent in your tenant")
    # Only the fields of the chosen target are kept, so a hold covers exactly what it says.
    hold = LegalHold.objects.create(
        tenant=tenant,
        target=target,
        subject=subject if target == LegalHold.Target.SUBJECT else "",
        agent=agent if target in (LegalHold.Target.AGENT, LegalHold.Target.SCOPE) else None,
        scope=scope if target == LegalHold.Target.SCOPE else "",
        dataset=dataset if target == LegalHold.Target.DATASET else "",
        item_id=item_id if target == LegalHold.Target.ITEM else None,
        reason=reason,
        placed_by=actor,
    )
    audit_record(tenant=tenant, actor=actor, action="legal_hold.place", target=hold, data=_audit_data(hold))
    return hold


@transaction.atomic
def legal_hold_release(*, hold: LegalHold, actor: Any, reason: str) -> LegalHold:
    """Release a hold. Two-person rule: the officer who placed it cannot release it."""
    _require_officer(actor, hold.tenant)
    hold = LegalHold.objects.select_for_update().get(pk=hold.pk)
    if hold.released_at is not None:
        raise LegalHoldReleased("This legal hold was already released.")
    if hold.placed_by_id == actor.pk:
        raise TwoPersonRule(
            "A legal hold must be released by a second security officer, not the one who placed it.",
        )
    hold.released_by = actor
    hold.released_at = timezone.now()
    hold.release_reason = reason
    hold.save(update_fields=["released_by", "released_at", "release_reason"])
    audit_record(
        tenant=hold.tenant,
        actor=actor,
        action="legal_hold.release",
        target=hold,
        data={**_audit_data(hold), "placed_by": str(hold.placed_by_id)},
    )
    return hold
