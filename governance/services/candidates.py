"""Candidate intake and review. Promotion copies into builtin memory and so lives
with the memory app (:mod:`memory.services.promotion`).

Import and promotion are refused when an erasure fence covers the record: the
same subject with a copy captured before the erasure, or content erased for that
subject — a stale copy must never bring erased data back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.errors import CandidatePromoted, ErrorCode, InvalidInput, NotCandidateOwner, field_error
from core.vocabulary import Kind, RecordKind
from governance import authz
from governance.authz import Capability
from governance.models import Agent, Candidate, LegalHold, Membership
from governance.services.audit import audit_record, subject_hash
from governance.services.erasure import DeleterResult, erasure_fenced

# Execution state, not memory: a LangGraph checkpoint is never a candidate.
REFUSED_RECORD_KINDS = frozenset({"checkpoint", "langgraph_checkpoint"})


class CandidateRefused(InvalidInput):
    code = ErrorCode.CANDIDATE_REFUSED


def candidate_record_kind(record_kind: str) -> str:
    """The closed vocabulary: a known record kind, or refused with the reason. (The
    LangGraph adapter already refuses checkpoint items before they become records.)"""
    if record_kind in REFUSED_RECORD_KINDS:
        raise CandidateRefused(
            "LangGraph checkpoints are execution state, not memory; they are never imported.",
            details={"fields": {"record_kind": ["checkpoints are refused"]}},
            code=ErrorCode.CHECKPOINT_REFUSED,
        )
    if record_kind not in RecordKind.values:
        raise CandidateRefused(
            f"Record kind {record_kind!r} is not in the vocabulary.",
            details={"fields": {"record_kind": ["must be one of " + ", ".join(RecordKind.values)]}},
        )
    return record_kind


@transaction.atomic
def candidate_import(
    *,
    agent: Agent,
    provider: str,
    external_id: str,
    record_kind: str,
    content: str,
    subject: str,
    captured_at: datetime,
    content_hash: str,
    kind: str = Kind.FACT,
) -> Candidate | None:
    """Store one provider record as a pending candidate (None when an erasure fence
    covers it; an already imported record is returned as it is)."""
    candidate_record_kind(record_kind)
    if not content.strip():
        raise field_error("content", "empty")
    if erasure_fenced(
        tenant_id=agent.tenant_id, subject=subject, captured_at=captured_at, content_hash=content_hash
    ):
        return None
    candidate, _ = Candidate.objects.get_or_create(
        tenant_id=agent.tenant_id,
        provider=provider,
        external_id=external_id,
        defaults={
            "agent": agent,
            "record_kind": record_kind,
            "kind": kind if kind in Kind.values else Kind.FACT,
            "content": content,
            "content_hash": content_hash,
            "subject": subject,
            "captured_at": captured_at,
        },
    )
    return candidate


def reviewer_role(actor: Any, candidate: Candidate) -> str:
    """Who may decide: the subject themselves (a member whose user id is the
    subject) or a tenant admin acting for them; anyone else is refused.

    Matched on the user's id, never the username: usernames are chosen and can be
    renamed, so a user named like an end user's id must not gain their records."""
    actor_id = getattr(actor, "pk", None)
    is_subject = (
        actor_id is not None
        and str(actor_id) == candidate.subject
        and Membership.objects.filter(user=actor, tenant_id=candidate.tenant_id).exists()
    )
    if is_subject:
        return Candidate.ReviewedAs.SUBJECT
    if authz.can(actor, candidate.tenant_id, Capability.CANDIDATE_REVIEW_FOR_SUBJECT):
        return Candidate.ReviewedAs.TENANT_ADMIN
    raise NotCandidateOwner(
        "Only the person the record is about, or a tenant admin acting for them, may review it.",
    )


@transaction.atomic
def candidate_review(*, candidate: Candidate, actor: Any, decision: str, reason: str) -> Candidate:
    if decision not in ("approve", "reject"):
        raise field_error("decision", "must be approve or reject")
    reviewed_as = reviewer_role(actor, candidate)
    candidate = Candidate.objects.select_for_update().get(pk=candidate.pk)
    if candidate.status == Candidate.Status.PROMOTED:
        raise CandidatePromoted("This candidate was already promoted.")
    candidate.status = Candidate.Status.APPROVED if decision == "approve" else Candidate.Status.REJECTED
    candidate.reviewed_by = actor
    candidate.reviewed_as = reviewed_as
    candidate.reviewed_at = timezone.now()
    candidate.review_reason = reason
    candidate.save(update_fields=["status", "reviewed_by", "reviewed_as", "reviewed_at", "review_reason"])
    audit_record(
        tenant=candidate.tenant,
        actor=actor,
        action="candidate.review",
        target=candidate,
        data={
            "decision": decision,
            "reviewed_as": reviewed_as,
            "subject_hash": subject_hash(candidate.subject),
        },
    )
    return candidate


def erase_subject_candidates(target: Any) -> Any:
    """Subject deleter for erasure: the subject's candidates, except under a subject
    or agent hold (registered in ``GovernanceConfig.ready``)."""
    if not target.subject:  # a request naming only datasets erases no subject's candidates
        return DeleterResult()
    qs = Candidate.objects.filter(tenant_id=target.tenant_id, subject=target.subject)
    if target.agent_id is not None:
        qs = qs.filter(agent_id=target.agent_id)
    holds = list(LegalHold.objects.active().filter(tenant_id=target.tenant_id))
    digest = subject_hash(target.subject)  # holds store the subject's keyed hash
    subject_holds = [h for h in holds if h.target == LegalHold.Target.SUBJECT and h.subject == digest]
    agent_holds = [h for h in holds if h.target == LegalHold.Target.AGENT]
    result = DeleterResult()
    kept_qs = qs.none() if not subject_holds else qs
    if not subject_holds and agent_holds:
        kept_qs = qs.filter(agent_id__in=[h.agent_id for h in agent_holds])
    kept = kept_qs.count()
    result.content_hashes = list(
        qs.exclude(pk__in=kept_qs.values("pk")).values_list("content_hash", flat=True)
    )
    deleted = qs.exclude(pk__in=kept_qs.values("pk")).delete()[0]
    result.counts = {Candidate._meta.db_table: deleted}
    if kept:
        used = subject_holds or [
            h for h in agent_holds if h.agent_id is not None and kept_qs.filter(agent_id=h.agent_id).exists()
        ]
        result.held.append(
            {
                "table": Candidate._meta.db_table,
                "count": kept,
                "holds": [str(h.pk) for h in used],
                "flagged": 0,
            }
        )
    return result
