"""Erase every trace of a data subject, with a certificate and a fence.

Apps own their tables, so erasure does not know them: each app registers a
*subject deleter* (``register_subject_deleter``) that removes the subject's rows
from its tables, skips what a legal hold covers, and reports counts per table,
what it kept under hold and the content hashes it erased (for the fence). An app
adding a table that can hold a subject's data registers (or extends) a deleter;
the catalog-driven canary test fails until it does. Provider engines are asked
to forget through *engine forgetters* (``register_engine_forgetter``), each
answering one status per engine instance.

The worker task calls :func:`erasure_run`, which is idempotent: a redelivered
message finds the request completed and does nothing; a run that died half way
is repeated. The deleters, the engine forgets and the certificate run in one
transaction, so a run either completes or fails without deleting anything.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.errors import ErasureCompleted, field_error
from core.tasks import enqueue_on_commit
from governance import authz
from governance.authz import Capability
from governance.models import Agent, ErasureFence, ErasureRequest, Job, Tenant
from governance.services.audit import audit_record, subject_hash
from governance.services.jobs import job_finish, job_mark_running


@dataclass(frozen=True)
class ErasureTarget:
    """Whose data to erase, and where (the whole tenant or one agent)."""

    tenant_id: uuid.UUID
    subject: str
    agent_id: uuid.UUID | None
    actor: Any = None


@dataclass
class DeleterResult:
    counts: dict[str, int] = field(default_factory=dict)
    # One entry per kind of kept row: {"table", "count", "holds": [hold ids],
    # "by_hold": {hold id: rows it covers}, "flagged": rows with their own legal_hold flag}
    held: list[dict[str, Any]] = field(default_factory=list)
    content_hashes: list[str] = field(default_factory=list)


SubjectDeleter = Callable[[ErasureTarget], DeleterResult]
EngineForgetter = Callable[[ErasureTarget], list[dict[str, Any]]]

_DELETERS: dict[str, SubjectDeleter] = {}
_FORGETTERS: dict[str, EngineForgetter] = {}


def register_subject_deleter(name: str, deleter: SubjectDeleter) -> None:
    """Called from an app's ``ready()``; deleters run in registration order."""
    _DELETERS[name] = deleter


def register_engine_forgetter(name: str, forgetter: EngineForgetter) -> None:
    """Each forgetter answers ``[{"engine": id, "status": ..., "detail": ...}]``."""
    _FORGETTERS[name] = forgetter


def subject_deleters() -> dict[str, SubjectDeleter]:
    return dict(_DELETERS)


invalid_field = field_error  # the one field-error helper (core.errors)


@transaction.atomic
def erasure_request_create(
    *, tenant: Tenant, actor: Any, subject: str, scope: str, reason: str, agent: Agent | None = None
) -> ErasureRequest:
    """Accept an erasure request and queue the work (202: the worker does it)."""
    authz.require(
        actor,
        tenant,
        Capability.ERASURE_REQUEST,
        "Only a security officer or a tenant admin may request an erasure.",
    )
    if not subject.strip():
        raise invalid_field("subject", "required")
    if scope not in ErasureRequest.Scope.values:
        raise invalid_field("scope", "must be one of " + ", ".join(ErasureRequest.Scope.values))
    if scope == ErasureRequest.Scope.AGENT and agent is None:
        raise invalid_field("agent", "required when scope is 'agent'")
    if agent is not None and agent.tenant_id != tenant.pk:
        raise invalid_field("agent", "no such agent in your tenant")
    job = Job.objects.create(tenant=tenant, kind="erasure", total=len(_DELETERS) + 1, created_by=actor)
    request = ErasureRequest.objects.create(
        tenant=tenant,
        subject=subject,
        subject_hash=subject_hash(subject),
        scope=scope,
        agent=agent if scope == ErasureRequest.Scope.AGENT else None,
        reason=reason,
        job=job,
        requested_by=actor,
    )
    audit_record(
        tenant=tenant,
        actor=actor,
        action="erasure.requested",
        target=request,
        data={"subject_hash": request.subject_hash, "scope": scope, "agent": str(request.agent_id or "")},
    )
    enqueue_on_commit("governance.run_erasure", str(request.pk))
    return request


@transaction.atomic
def erasure_retry(*, request: ErasureRequest, actor: Any) -> ErasureRequest:
    """Run a failed erasure again, with a job of its own (202). Idempotent: a request
    already queued or running again is returned as it is, with no second run; a
    completed one is refused (409 ``erasure_completed``). Audited as
    ``erasure.retried``. The caller found ``request`` in the actor's tenant."""
    authz.require(
        actor,
        request.tenant,
        Capability.ERASURE_REQUEST,
        "Only a security officer or a tenant admin may retry an erasure.",
    )
    locked = ErasureRequest.objects.select_for_update().select_related("tenant", "job").get(pk=request.pk)
    if locked.status == ErasureRequest.Status.COMPLETED:
        raise ErasureCompleted("This erasure has completed; there is nothing to retry.")
    if locked.status != ErasureRequest.Status.FAILED:
        return locked  # queued or running: a retry is already on its way
    failed_job = locked.job_id
    locked.job = Job.objects.create(
        tenant=locked.tenant, kind="erasure", total=len(_DELETERS) + 1, created_by=actor
    )
    locked.status = ErasureRequest.Status.QUEUED
    locked.save(update_fields=["job", "status"])
    audit_record(
        tenant=locked.tenant,
        actor=actor,
        action="erasure.retried",
        target=locked,
        data={
            "subject_hash": locked.subject_hash,
            "failed_job": str(failed_job or ""),
            "job": str(locked.job_id),
        },
    )
    enqueue_on_commit("governance.run_erasure", str(locked.pk))
    return locked


def erasure_run(*, request_id: Any) -> ErasureRequest | None:
    """Do one erasure: delete, ask engines to forget, fence, certify. Idempotent."""
    request = ErasureRequest.objects.select_related("tenant", "job").filter(pk=request_id).first()
    if request is None or request.status == ErasureRequest.Status.COMPLETED:
        return request
    job = job_mark_running(request.job_id)
    if job is None:
        return request
    ErasureRequest.objects.filter(pk=request.pk).update(status=ErasureRequest.Status.RUNNING)
    target = ErasureTarget(tenant_id=request.tenant_id, subject=request.subject, agent_id=request.agent_id)
    try:
        # One plan, one transaction: every app's deleter, the engines' forgets and the
        # certificate commit together, or nothing is deleted and the run can repeat.
        with transaction.atomic():
            counts: dict[str, int] = {}
            held: list[dict[str, Any]] = []
            hashes: list[str] = []
            for deleter in _DELETERS.values():
                result = deleter(target)
                for table, n in result.counts.items():
                    counts[table] = counts.get(table, 0) + n
                held.extend(result.held)
                hashes.extend(result.content_hashes)
            engines: list[dict[str, Any]] = []
            for forgetter in _FORGETTERS.values():
                engines.extend(forgetter(target))
            return _complete(
                request=request, job=job, counts=counts, held=held, hashes=hashes, engines=engines
            )
    except Exception as exc:
        with transaction.atomic():
            ErasureRequest.objects.filter(pk=request.pk).update(status=ErasureRequest.Status.FAILED)
            job_finish(
                job, error=f"{type(exc).__name__}: erasure failed; nothing was deleted; it can be retried"
            )
        raise


@transaction.atomic
def _complete(
    *,
    request: ErasureRequest,
    job: Job,
    counts: dict[str, int],
    held: list[dict[str, Any]],
    hashes: list[str],
    engines: list[dict[str, Any]],
) -> ErasureRequest:
    now = timezone.now()
    ErasureFence.objects.update_or_create(
        request=request,
        defaults={
            "tenant_id": request.tenant_id,
            "subject_hash": request.subject_hash,
            "erased_at": now,
            "content_hashes": sorted(set(hashes)),
        },
    )
    certificate = {
        "request": str(request.pk),
        "tenant": str(request.tenant_id),
        "subject_hash": request.subject_hash,
        "scope": request.scope,
        "agent": str(request.agent_id or ""),
        "requested_by": request.requested_by.get_username(),
        "requested_at": request.created_at.isoformat(),
        "completed_at": now.isoformat(),
        "deleted": dict(sorted(counts.items())),
        "held": held,
        "holds": _holds_summary(request.tenant_id, held),
        "engines": engines,
        "fence": {"erased_at": now.isoformat(), "content_hashes": len(set(hashes))},
    }
    request.subject = ""  # from here on the subject is known only by its hash
    request.status = ErasureRequest.Status.COMPLETED
    request.completed_at = now
    request.certificate = certificate
    request.save(update_fields=["subject", "status", "completed_at", "certificate"])
    audit_record(
        tenant=request.tenant,
        actor=None,
        action="erasure.completed",
        target=request,
        data={
            "subject_hash": request.subject_hash,
            "deleted": certificate["deleted"],
            "held": sum(h["count"] for h in held),
        },
    )
    job_finish(job, result={"erasure_request": str(request.pk), "deleted": sum(counts.values())})
    return request


def _holds_summary(tenant_id: Any, held: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per hold that kept something: what it names (subject only by hash) and how
    many rows of which table it kept."""
    from governance.models import LegalHold

    rows: dict[str, dict[str, int]] = {}
    for entry in held:
        for hold_id in entry.get("by_hold") or dict.fromkeys(entry["holds"], entry["count"]):
            count = (entry.get("by_hold") or {}).get(hold_id, entry["count"])
            rows.setdefault(hold_id, {})[entry["table"]] = count
    out = []
    for hold in LegalHold.objects.filter(tenant_id=tenant_id, pk__in=list(rows)).order_by("placed_at"):
        out.append(
            {
                "hold": str(hold.pk),
                "target": hold.target,
                "subject_hash": hold.subject,
                "agent": str(hold.agent_id or ""),
                "scope": hold.scope,
                "dataset": hold.dataset,
                "item": str(hold.item_id or ""),
                "placed_at": hold.placed_at.isoformat(),
                "rows": rows[str(hold.pk)],
            }
        )
    return out


def erasure_fenced(*, tenant_id: Any, subject: str, captured_at: Any, content_hash: str = "") -> bool:
    """Whether an erasure fence forbids bringing this record back: same subject and
    captured before the erasure, or content erased for that subject."""
    fences = ErasureFence.objects.filter(tenant_id=tenant_id, subject_hash=subject_hash(subject))
    if captured_at is not None and fences.filter(erased_at__gte=captured_at).exists():
        return True
    return bool(content_hash) and fences.filter(content_hashes__contains=[content_hash]).exists()
