"""Console page for the candidate review queue: filters, pagination, approve /
reject (with a reason) / promote inline, and importing an engine's records.

It lives with providers because importing needs the engines, and providers sits
above memory (promotion) and governance (review) in the dependency order. Every
action calls the same service as the API; one row fragment answers a row action,
one list fragment a filter or page change.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET, require_POST

from core.errors import AgentNotFound, ApiError
from core.htmx import render_page
from governance import authz
from governance.authz import Capability
from governance.forms import CandidateFilterForm, CandidateImportForm, ReviewForm
from governance.models import Candidate
from governance.models.agents import AgentPermission
from governance.selectors import access_agent, agents_for, as_uuid
from governance.services.candidates import candidate_review
from memory.services.promotion import candidate_promote
from providers import selectors
from providers.imports import candidates_import_start

PAGE_SIZE = 25


def _tenant(request: HttpRequest) -> Any:
    tenant = getattr(request, "tenant", None)
    if tenant is None:
        raise Http404
    return tenant


def _visible(request: HttpRequest, tenant: Any) -> Any:
    agents = agents_for(request.user, AgentPermission.VIEWER, tenant=tenant)
    return Candidate.objects.filter(tenant=tenant, agent__in=agents).select_related("agent", "reviewed_by")


def _powers(request: HttpRequest, tenant: Any) -> dict[str, Any]:
    """What the user may do, computed once per page (not per row)."""
    editable = set(
        agents_for(request.user, AgentPermission.EDITOR, tenant=tenant).values_list("pk", flat=True)
    )
    return {
        "is_admin": authz.can(request.user, tenant, Capability.CANDIDATE_REVIEW_FOR_SUBJECT),
        "user_id": str(request.user.pk),
        "editable": editable,
    }


def _row(candidate: Candidate, powers: dict[str, Any], **extra: Any) -> dict[str, Any]:
    owner = powers["is_admin"] or candidate.subject == powers["user_id"]
    return {
        "c": candidate,
        "can_review": owner and candidate.status != Candidate.Status.PROMOTED,
        "can_promote": candidate.status == Candidate.Status.APPROVED
        and (owner or candidate.agent_id in powers["editable"]),
        **extra,
    }


def _list_context(request: HttpRequest, tenant: Any, **extra: Any) -> dict[str, Any]:
    filters = CandidateFilterForm(request.GET)
    qs = _visible(request, tenant)
    if filters.is_valid():
        for param, field in (("provider", "provider"), ("kind", "record_kind"), ("status", "status")):
            if filters.cleaned_data[param]:
                qs = qs.filter(**{field: filters.cleaned_data[param]})
        if filters.cleaned_data["subject"]:
            qs = qs.filter(subject=filters.cleaned_data["subject"])
    else:
        qs = qs.none()
    page = Paginator(qs, PAGE_SIZE).get_page(request.GET.get("page"))
    powers = _powers(request, tenant)
    query = request.GET.copy()
    query.pop("page", None)
    return {
        "filters": filters,
        "page": page,
        "rows": [_row(c, powers) for c in page],
        "query": query.urlencode(),
        "import_agents": agents_for(request.user, AgentPermission.EDITOR, tenant=tenant),
        "engines": selectors.engines_for(request.user, tenant).order_by("id"),
        "import_form": CandidateImportForm(),
        **extra,
    }


@login_required
@require_GET
def candidates(request: HttpRequest) -> HttpResponse:
    tenant = _tenant(request)
    return render_page(
        request,
        "providers/candidates.html",
        "providers/partials/candidate_list.html",
        _list_context(request, tenant),
    )


def _candidate_or_404(request: HttpRequest, tenant: Any, candidate_id: str) -> Candidate:
    pk = as_uuid(candidate_id)
    found = _visible(request, tenant).filter(pk=pk).first() if pk else None
    if found is None:
        raise Http404
    return found


def _row_response(
    request: HttpRequest, tenant: Any, candidate: Candidate, status: int, **extra: Any
) -> HttpResponse:
    candidate = _visible(request, tenant).get(pk=candidate.pk)
    context = {**_list_context(request, tenant), **_row(candidate, _powers(request, tenant), **extra)}
    return render_page(
        request, "providers/candidates.html", "providers/partials/candidate_row.html", context, status=status
    )


@login_required
@require_POST
def candidate_review_view(request: HttpRequest, candidate_id: str) -> HttpResponse:
    tenant = _tenant(request)
    candidate = _candidate_or_404(request, tenant, candidate_id)
    form = ReviewForm(request.POST)
    if not form.is_valid():
        return _row_response(request, tenant, candidate, 400, error="Give a reason for the decision.")
    try:
        candidate_review(candidate=candidate, actor=request.user, **form.cleaned_data)
    except ApiError as exc:
        return _row_response(request, tenant, candidate, exc.status_code, error=exc.message)
    return _row_response(
        request, tenant, candidate, 200, notice=f"{form.cleaned_data['decision'].capitalize()}d."
    )


@login_required
@require_POST
def candidate_promote_view(request: HttpRequest, candidate_id: str) -> HttpResponse:
    tenant = _tenant(request)
    candidate = _candidate_or_404(request, tenant, candidate_id)
    powers = _powers(request, tenant)
    owner = powers["is_admin"] or candidate.subject == powers["user_id"]
    if not (owner or candidate.agent_id in powers["editable"]):
        return _row_response(
            request, tenant, candidate, 403, error="Only the owner or an editor of the agent may promote."
        )
    try:
        item = candidate_promote(candidate=candidate, actor=request.user)
    except ApiError as exc:
        return _row_response(request, tenant, candidate, exc.status_code, error=exc.message)
    return _row_response(request, tenant, candidate, 200, notice=f"Promoted to memory item {item.pk}.")


@login_required
@require_POST
def candidate_import_view(request: HttpRequest) -> HttpResponse:
    tenant = _tenant(request)
    form = CandidateImportForm(request.POST)
    status, extra = 400, {"import_form": form}
    if form.is_valid():
        data = form.cleaned_data
        try:
            agent = access_agent(request.user, data["agent"], AgentPermission.EDITOR)
            if agent.tenant_id != tenant.pk:
                raise AgentNotFound("Agent not found.")
            job = candidates_import_start(
                tenant=tenant,
                agent=agent,
                engine_id=data["engine"],
                subject=data["subject"],
                actor=request.user,
                limit=data["limit"] or 500,
            )
            status, extra = 202, {"import_job": job}
        except ApiError as exc:
            field = (
                "agent"
                if exc.code == "agent_not_found"
                else "engine"
                if exc.code == "engine_not_found"
                else None
            )
            form.add_error(field, exc.message)
    return render_page(
        request,
        "providers/candidates.html",
        "providers/partials/candidate_list.html",
        _list_context(request, tenant, **extra),
        status=status,
    )
