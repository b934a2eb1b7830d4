"""Promote an approved candidate into builtin memory, with provenance.

Refused unless the candidate is approved by its owner (see
:func:`governance.services.candidates.candidate_review`) and no erasure fence
covers it. The copy is written through the ordinary write path, so the agent's
memory policy applies to it like to any other write.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from core.errors import ApiError, CandidateNotApproved, CandidatePromoted, ErasureFenced
from governance.models import Candidate
from governance.services.audit import audit_record, subject_hash
from governance.services.erasure import erasure_fenced
from memory.enforcement import MemoryAccess, system_access
from memory.models import MemoryItem
from memory.services.items import store_one
from memory.services.write import MemoryDraft, Prepared, prepare


def _refuse(candidate: Candidate) -> None:
    if candidate.status == Candidate.Status.PROMOTED:
        raise CandidatePromoted("This candidate was already promoted.")
    if candidate.status != Candidate.Status.APPROVED or not candidate.reviewed_as:
        raise CandidateNotApproved("Promotion needs an approved review by the owner.")
    if erasure_fenced(
        tenant_id=candidate.tenant_id,
        subject=candidate.subject,
        captured_at=candidate.captured_at,
        content_hash=candidate.content_hash,
    ):
        raise ErasureFenced("An erasure of this subject covers this record; it cannot be promoted.")


def candidate_promote(*, candidate: Candidate, actor: Any) -> MemoryItem:
    candidate = Candidate.objects.select_related("agent", "tenant").get(pk=candidate.pk)
    _refuse(candidate)  # before the slow work; checked again under the row lock
    access = system_access(candidate.agent)
    draft = MemoryDraft(
        content=candidate.content,
        kind=candidate.kind,
        record_kind=candidate.record_kind,
        user_id=candidate.subject,
        source=f"{candidate.provider}:{candidate.external_id}",
    )
    prepared = prepare(access, [draft])[0]
    if isinstance(prepared, ApiError):
        raise prepared
    with transaction.atomic():
        return _promote_locked(candidate, access, draft, prepared, actor)


def _promote_locked(
    candidate: Candidate, access: MemoryAccess, draft: MemoryDraft, prepared: Prepared, actor: Any
) -> MemoryItem:
    candidate = Candidate.objects.select_for_update().select_related("agent", "tenant").get(pk=candidate.pk)
    _refuse(candidate)
    outcome = store_one(access=access, draft=draft, prepared=prepared, via="promotion")
    item = outcome.item
    now = timezone.now()
    provenance = {
        **item.provenance,
        "promoted_from": {
            "provider": candidate.provider,
            "external_id": candidate.external_id,
            "candidate": str(candidate.pk),
            "reviewer": str(candidate.reviewed_by_id or ""),
            "reviewed_as": candidate.reviewed_as,
            "reviewed_at": candidate.reviewed_at.isoformat() if candidate.reviewed_at else None,
            "promoted_by": str(getattr(actor, "pk", "") or ""),
        },
    }
    MemoryItem.objects.filter(pk=item.pk).update(provenance=provenance)
    item.provenance = provenance
    candidate.status = Candidate.Status.PROMOTED
    candidate.promoted_item_id = item.pk
    candidate.promoted_at = now
    candidate.save(update_fields=["status", "promoted_item_id", "promoted_at"])
    audit_record(
        tenant=candidate.tenant,
        actor=actor,
        action="candidate.promote",
        target=candidate,
        data={"item": str(item.pk), "subject_hash": subject_hash(candidate.subject)},
    )
    return item
