"""Erase every trace of a data subject, and the knowledge chunks of named datasets,
with a certificate and a fence.

Apps own their tables, so erasure does not know them: each app registers a
*subject deleter* (``register_subject_deleter``) that removes the subject's rows
from its tables, skips what a legal hold covers, and reports counts per table,
what it kept under hold and the content hashes it erased (for the fence). An app
adding a table that can hold a subject's data registers (or extends) a deleter;
the catalog-driven canary test fails until it does. Provider engines are asked
to forget through *engine forgetters* (``register_engine_forgetter``), each
answering one status per engine instance.

A request may name datasets as well as (or instead of) a subject: knowledge
chunks ingested without a ``user_id`` belong to no subject. Datasets are memory's,
so the app that holds them registers a *dataset checker*
(``register_dataset_checker``) that says at request time which names it cannot
erase (unknown in the tenant, another agent's in an agent-scoped request, kept in a
provider engine); deleters read ``target.datasets``.

The worker task calls :func:`erasure_run`, which is idempotent: a redelivered
message finds the request completed and does nothing; a run that died half way
is repeated. The deleters, the engine forgets and the certificate run in one
transaction, so a run either completes or fails without deleting anything.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.errors import ErasureCompleted, ErasureTargetRequired, field_error
from core.tasks import enqueue_on_commit
from governance import authz
from governance.authz import Capability
from governance.models import Agent, ErasureFence, ErasureRequest, Job, Tenant
from governance.services.audit import audit_record, subject_hash
from governance.services.jobs import job_finish, job_mark_running


@dataclass(frozen=True)
class ErasureTarget:
    """Whose data to erase, and where (the whole tenant or one agent). ``subject`` is
    empty when the request names only ``datasets``: a deleter then erases no
    subject's rows (an empty ``user_id`` is nobody, not everybody)."""

    tenant_id: uuid.UUID
    subject: str
    agent_id: uuid.UUID | None
    actor: Any = None
    datasets: tuple[str, ...] = ()


@dataclass
class DeleterResult:
    counts: dict[str, int] = field(default_factory=dict)
    # One entry per kind of kept row: {"table", "count", "holds": [hold ids],
    # "by_hold": {hold id: rows it covers}, "flagged": rows with their own legal_hold flag}
    held: list[dict[str, Any]] = field(default_factory=list)
    content_hashes: list[str] = field(default_factory=list)
    # Per named dataset this deleter erased from: {"name", "deleted", "held", ...}.
    datasets: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class HeldTally:
    """Rows a deleter kept under hold, counted per hold, as ``DeleterResult.held``."""

    count: int = 0
    flagged: int = 0
    by_hold: dict[str, int] = field(default_factory=dict)

    def keep(self, holds: Iterable[Any], *, flagged: bool = False) -> None:
        self.count += 1
        self.flagged += int(flagged)
        for hold in holds:
            self.by_hold[str(hold.pk)] = self.by_hold.get(str(hold.pk), 0) + 1

    def entries(self, table: str) -> list[dict[str, Any]]:
        if not self.count:
            return []
        return [
            {
                "table": table,
                "count": self.count,
                "holds": sorted(self.by_hold),
                "by_hold": dict(self.by_hold),
                "flagged": self.flagged,
            }
        ]


SubjectDeleter = Callable[[ErasureTarget], DeleterResult]
EngineForgetter = Callable[[ErasureTarget], list[dict[str, Any]]]
# (tenant_id, agent_id or None, names) -> {name: why it cannot be erased}
DatasetChecker = Callable[[uuid.UUID, uuid.UUID | None, list[str]], dict[str, str]]

_DELETERS: dict[str, SubjectDeleter] = {}
_FORGETTERS: dict[str, EngineForgetter] = {}
_DATASET_CHECKERS: dict[str, DatasetChecker] = {}

MAX_DATASETS = 50  # per request; a longer list is a 400 (docs/governance.md#erasure)
DATASET_NAME_MAX = 100  # the dataset name's own bound (memory.models.Dataset.name)


def register_subject_deleter(name: str, deleter: SubjectDeleter) -> None:
    """Called from an app's ``ready()``; deleters run in registration order."""
    _DELETERS[name] = deleter


def register_engine_forgetter(name: str, forgetter: EngineForgetter) -> None:
    """Each forgetter answers ``[{"engine": id, "status": ..., "detail": ...}]``."""
    _FORGETTERS[name] = forgetter


def register_dataset_checker(name: str, checker: DatasetChecker) -> None:
    """Called from the ``ready()`` of the app that holds datasets. A name is
    erasable when no checker objects to it; with no checker, no name is."""
    _DATASET_CHECKERS[name] = checker


def subject_deleters() -> dict[str, SubjectDeleter]:
    return dict(_DELETERS)


invalid_field = field_error  # the one field-error helper (core.errors)


def _clean_datasets(datasets: Any) -> list[str]:
    """The request's dataset names, exactly as sent: a list of distinct non-empty
    strings within the name's bound, at most ``MAX_DATASETS`` of them."""
    if datasets is None:
        return []
    if isinstance(datasets, str) or not isinstance(datasets, (list, tuple)):
        raise invalid_field("datasets", "must be a list of dataset names")
    if len(datasets) > MAX_DATASETS:
        raise invalid_field("datasets", f"at most {MAX_DATASETS} datasets per request")
    names: list[str] = []
    for name in datasets:
        if not isinstance(name, str) or not name.strip():
            raise invalid_field("datasets", "each dataset name must be a non-empty string")
        if len(name) > DATASET_NAME_MAX:
            raise invalid_field("datasets", f"a dataset name has at most {DATASET_NAME_MAX} characters")
        if "\x00" in name:
            raise invalid_field("datasets", "a dataset name cannot contain NUL")
        if name in names:
            raise invalid_field("datasets", f"dataset {name!r} is named twice")
        names.append(name)
    return names


@transaction.atomic
def erasure_request_create(
    *,
    tenant: Tenant,
    actor: Any,
    subject: str = "",
    scope: str,
    reason: str,
    agent: Agent | None = None,
    datasets: Any = None,
) -> ErasureRequest:
    """Accept an erasure request and queue the work (202: the worker does it). It
    names a subject, datasets, or both (neither: 400 ``erasure_target_required``);
    a dataset the tenant (or, scope ``agent``, the agent) does not have is a 400
    naming it, so a typo never certifies an erasure of nothing."""
    authz.require(
        actor,
        tenant,
        Capability.ERASURE_REQUEST,
        "Only a security officer or a tenant admin may request an erasure.",
    )
    names = _clean_datasets(datasets)
    if subject and not subject.strip():
        raise invalid_field("subject", "must not be blank")
    if not subject and not names:
        raise ErasureTargetRequired(
            details={"fields": {"subject": ["name a subject or datasets"], "datasets": ["or both"]}}
        )
    if scope not in ErasureRequest.Scope.values:
        raise invalid_field("scope", "must be one of " + ", ".join(ErasureRequest.Scope.values))
    if scope == ErasureRequest.Scope.AGENT and agent is None:
        raise invalid_field("agent", "required when scope is 'agent'")
    if agent is not None and agent.tenant_id != tenant.pk:
        raise invalid_field("agent", "no such agent in your tenant")
    scoped_agent = agent if scope == ErasureRequest.Scope.AGENT else None
    if names:
        _check_datasets(tenant, scoped_agent, names)
    job = Job.objects.create(tenant=tenant, kind="erasure", total=len(_DELETERS) + 1, created_by=actor)
    request = ErasureRequest.objects.create(
        tenant=tenant,
        subject=subject,
        subject_hash=subject_hash(subject) if subject else "",
        datasets=names,
        scope=scope,
        agent=scoped_agent,
        reason=reason,
        job=job,
        requested_by=actor,
    )
    audit_record(
        tenant=tenant,
        actor=actor,
        action="erasure.requested",
        target=request,
        data={
            "subject_hash": request.subject_hash,
            "datasets": names,
            "scope": scope,
            "agent": str(request.agent_id or ""),
        },
    )
    enqueue_on_commit("governance.run_erasure", str(request.pk))
    return request


def _check_datasets(tenant: Tenant, agent: Agent | None, names: list[str]) -> None:
    if not _DATASET_CHECKERS:
        raise invalid_field("datasets", "this installation holds no datasets")
    problems: dict[str, str] = {}
    for checker in _DATASET_CHECKERS.values():
        for name, why in checker(tenant.pk, agent.pk if agent else None, names).items():
            problems.setdefault(name, why)
    if problems:
        raise invalid_field("datasets", "; ".join(f"{n}: {problems[n]}" for n in names if n in problems))


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
    target = ErasureTarget(
        tenant_id=request.tenant_id,
        subject=request.subject,
        agent_id=request.agent_id,
        datasets=tuple(request.datasets),
    )
    try:
        # One plan, one transaction: every app's deleter, the engines' forgets and the
        # certificate commit together, or nothing is deleted and the run can repeat.
        with transaction.atomic():
            counts: dict[str, int] = {}
            held: list[dict[str, Any]] = []
            hashes: list[str] = []
            datasets: dict[str, dict[str, Any]] = {
                name: {"name": name, "deleted": 0, "held": 0} for name in target.datasets
            }
            for deleter in _DELETERS.values():
                result = deleter(target)
                for table, n in result.counts.items():
                    counts[table] = counts.get(table, 0) + n
                held.extend(result.held)
                hashes.extend(result.content_hashes)
                for entry in result.datasets:
                    _merge_dataset(datasets, entry)
            engines: list[dict[str, Any]] = []
            for forgetter in _FORGETTERS.values():
                engines.extend(forgetter(target))
            return _complete(
                request=request,
                job=job,
                counts=counts,
                held=held,
                hashes=hashes,
                engines=engines,
                datasets=list(datasets.values()),
            )
    except Exception as exc:
        with transaction.atomic():
            ErasureRequest.objects.filter(pk=request.pk).update(status=ErasureRequest.Status.FAILED)
            job_finish(
                job, error=f"{type(exc).__name__}: erasure failed; nothing was deleted; it can be retried"
            )
        raise


def _merge_dataset(datasets: dict[str, dict[str, Any]], entry: dict[str, Any]) -> None:
    """Counts from several deleters add up; other facts (flags) are taken as reported."""
    merged = datasets.setdefault(entry["name"], {"name": entry["name"], "deleted": 0, "held": 0})
    for key, value in entry.items():
        if isinstance(value, int) and not isinstance(value, bool):
            merged[key] = merged.get(key, 0) + value
        elif key != "name":
            merged[key] = value


@transaction.atomic
def _complete(
    *,
    request: ErasureRequest,
    job: Job,
    counts: dict[str, int],
    held: list[dict[str, Any]],
    hashes: list[str],
    engines: list[dict[str, Any]],
    datasets: list[dict[str, Any]],
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
        # Per named dataset: chunks erased, chunks a hold (or the dataset's flag) kept,
        # and whether the emptied dataset itself went.
        "datasets": datasets,
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
            "datasets": list(request.datasets),
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
