"""Console pages for compliance and policy: legal holds, erasure requests (live
progress, certificate), retention settings, the policy editor with version diff
and restore.

Each page includes one fragment; HTMX swaps get the fragment alone
(core.htmx.render_page). Writes call the same services as the API, so roles,
the two-person rule and the audit trail are enforced in one place; a page the
user may not use answers 404, an action their role may not take 403.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.errors import ApiError, Forbidden
from core.htmx import render_page
from governance import authz
from governance.authz import Capability
from governance.forms import ErasureForm, HoldForm, PolicyForm, ReleaseForm, RetentionForm
from governance.models import AgentPolicyVersion, ErasureRequest
from governance.models.agents import AgentPermission
from governance.selectors import (
    access_agent,
    access_erasure_request,
    access_legal_hold,
    agents_for,
    current_policy_version,
    erasure_requests_for,
    legal_holds_for,
    memory_policies_for_tenant,
    memory_policy_for,
    policy_diff,
    policy_versions,
)
from governance.services import erasure as erasure_services
from governance.services import holds as hold_services
from governance.services import policies as policy_services

PAGE_SIZE = 25


def _tenant(request: HttpRequest) -> Any:
    tenant = getattr(request, "tenant", None)
    if tenant is None:
        raise Http404("You are not a member of any tenant.")
    return tenant


def _require_page(request: HttpRequest, capability: Capability) -> Any:
    """The active tenant, if the user's roles offer this page; otherwise a 404."""
    tenant = _tenant(request)
    if not authz.can(request.user, tenant, capability):
        raise Http404
    return tenant


def _form_errors(form: Any, exc: ApiError) -> None:
    fields = exc.details.get("fields", {}) if exc.details else {}
    for name, errors in fields.items():
        name = name.removeprefix("policy.")
        form.add_error(name if name in form.fields else None, " ".join(errors))
    if not fields:
        form.add_error(None, exc.message)


def _query(request: HttpRequest) -> str:
    query = request.GET.copy()
    query.pop("page", None)
    return query.urlencode()


# --- legal holds ------------------------------------------------------------------


def _holds_context(request: HttpRequest, tenant: Any, **extra: Any) -> dict[str, Any]:
    state = request.GET.get("state", "active")
    active = {"active": True, "released": False}.get(state)
    page = Paginator(legal_holds_for(tenant, active=active), PAGE_SIZE).get_page(request.GET.get("page"))
    return {
        "page": page,
        "state": state,
        "query": _query(request),
        "is_officer": authz.can(request.user, tenant, Capability.HOLD_MANAGE),
        "agents": agents_for(request.user, tenant=tenant),
        "form": HoldForm(),
        "release_form": ReleaseForm(),
        **extra,
    }


@login_required
@require_http_methods(["GET", "POST"])
def holds(request: HttpRequest) -> HttpResponse:
    tenant = _require_page(request, Capability.HOLD_READ)
    status, extra = 200, {}
    if request.method == "POST":
        form = HoldForm(request.POST)
        status = 400
        if form.is_valid():
            data = form.cleaned_data
            try:
                agent = None
                if data["agent"]:
                    agent = access_agent(request.user, data["agent"], AgentPermission.VIEWER)
                hold = hold_services.legal_hold_place(
                    tenant=tenant,
                    actor=request.user,
                    target=data["target"],
                    reason=data["reason"],
                    subject=data["subject"],
                    agent=agent,
                    scope=data["scope"],
                    dataset=data["dataset"],
                    item_id=data["item"],
                )
                status, extra = 200, {"notice": f"Legal hold placed on {hold.target}."}
            except Forbidden as exc:  # legal_hold_place is the one officer check
                return HttpResponse(exc.message, status=403)
            except ApiError as exc:
                if exc.code == "agent_not_found":
                    form.add_error("agent", "No such agent in your tenant.")
                else:
                    _form_errors(form, exc)
        if status != 200:
            extra = {"form": form}
    context = _holds_context(request, tenant)
    context.update(extra)
    return render_page(
        request, "governance/holds.html", "governance/partials/hold_list.html", context, status=status
    )


@login_required
@require_POST
def hold_release(request: HttpRequest, hold_id: str) -> HttpResponse:
    tenant = _require_page(request, Capability.HOLD_READ)
    try:
        hold = access_legal_hold(tenant, hold_id)
    except ApiError as exc:
        raise Http404 from exc
    form = ReleaseForm(request.POST)
    status, extra = 200, {}
    if not form.is_valid():
        status, extra = 400, {"error": {"hold": hold.pk, "message": "Give a reason for the release."}}
    else:
        try:
            hold_services.legal_hold_release(
                hold=hold, actor=request.user, reason=form.cleaned_data["reason"]
            )
            extra = {"notice": "Legal hold released."}
        except ApiError as exc:
            status, extra = exc.status_code, {"error": {"hold": hold.pk, "message": exc.message}}
    return render_page(
        request,
        "governance/holds.html",
        "governance/partials/hold_list.html",
        _holds_context(request, tenant, **extra),
        status=status,
    )


# --- erasure ----------------------------------------------------------------------


def _erasure_context(request: HttpRequest, tenant: Any, **extra: Any) -> dict[str, Any]:
    page = Paginator(erasure_requests_for(tenant), PAGE_SIZE).get_page(request.GET.get("page"))
    return {
        "page": page,
        "query": _query(request),
        "can_request": authz.can(request.user, tenant, Capability.ERASURE_REQUEST),
        "agents": agents_for(request.user, tenant=tenant),
        "form": ErasureForm(),
        **extra,
    }


@login_required
@require_http_methods(["GET", "POST"])
def erasures(request: HttpRequest) -> HttpResponse:
    tenant = _require_page(request, Capability.ERASURE_READ)
    status, extra = 200, {}
    if request.method == "POST":
        form = ErasureForm(request.POST)
        status = 400
        if form.is_valid():
            data = form.cleaned_data
            try:
                agent = None
                if data["agent"]:
                    agent = access_agent(request.user, data["agent"], AgentPermission.VIEWER)
                created = erasure_services.erasure_request_create(
                    tenant=tenant,
                    actor=request.user,
                    subject=data["subject"],
                    datasets=data["datasets"],
                    scope=data["scope"],
                    reason=data["reason"],
                    agent=agent,
                )
                status, extra = 200, {"created": created}
            except Forbidden as exc:  # erasure_request_create is the one role check
                return HttpResponse(exc.message, status=403)
            except ApiError as exc:
                if exc.code == "agent_not_found":
                    form.add_error("agent", "No such agent in your tenant.")
                else:
                    _form_errors(form, exc)
        if status != 200:
            extra = {"form": form}
    context = _erasure_context(request, tenant)
    context.update(extra)
    return render_page(
        request, "governance/erasures.html", "governance/partials/erasure_list.html", context, status=status
    )


def _erasure_or_404(request: HttpRequest, request_id: str) -> ErasureRequest:
    tenant = _require_page(request, Capability.ERASURE_READ)
    try:
        return access_erasure_request(tenant, request_id)
    except ApiError as exc:
        raise Http404 from exc


@login_required
@require_GET
def erasure_detail(request: HttpRequest, request_id: str) -> HttpResponse:
    found = _erasure_or_404(request, request_id)
    context = {
        "erasure": found,
        "job": found.job,
        "finished": found.status in (ErasureRequest.Status.COMPLETED, ErasureRequest.Status.FAILED),
        "can_retry": found.status == ErasureRequest.Status.FAILED
        and authz.can(request.user, found.tenant, Capability.ERASURE_REQUEST),
        "certificate_json": json.dumps(found.certificate, indent=2, sort_keys=True)
        if found.certificate
        else "",
    }
    return render_page(
        request, "governance/erasure_detail.html", "governance/partials/erasure_progress.html", context
    )


@login_required
@require_POST
def erasure_retry(request: HttpRequest, request_id: str) -> HttpResponse:
    """Run a failed erasure again (audited; a second click while it runs is a no-op)."""
    found = _erasure_or_404(request, request_id)
    if not authz.can(request.user, found.tenant, Capability.ERASURE_REQUEST):
        raise Http404
    status = 202
    try:
        found = erasure_services.erasure_retry(request=found, actor=request.user)
    except ApiError as exc:
        status = exc.status_code
    context = {"erasure": found, "job": found.job, "finished": False, "can_retry": False}
    return render_page(
        request,
        "governance/erasure_detail.html",
        "governance/partials/erasure_progress.html",
        context,
        status=status,
    )


@login_required
@require_GET
def erasure_certificate(request: HttpRequest, request_id: str) -> HttpResponse:
    found = _erasure_or_404(request, request_id)
    if found.status != ErasureRequest.Status.COMPLETED:
        return HttpResponse("The erasure has not completed yet.", status=409)
    response = HttpResponse(
        json.dumps(found.certificate, indent=2, sort_keys=True), content_type="application/json"
    )
    response["Content-Disposition"] = f'attachment; filename="erasure-certificate-{found.pk}.json"'
    return response


# --- retention --------------------------------------------------------------------


def _retention_context(request: HttpRequest, tenant: Any, **extra: Any) -> dict[str, Any]:
    policies = memory_policies_for_tenant(tenant)
    agents = list(agents_for(request.user, tenant=tenant))
    return {
        "rows": [{"agent": agent, "policy": policies[agent.pk]} for agent in agents],
        "can_set": authz.can(request.user, tenant, Capability.RETENTION_SET),
        **extra,
    }


@login_required
@require_GET
def retention(request: HttpRequest) -> HttpResponse:
    tenant = _require_page(request, Capability.RETENTION_READ)
    return render_page(
        request,
        "governance/retention.html",
        "governance/partials/retention_list.html",
        _retention_context(request, tenant),
    )


@login_required
@require_POST
def retention_set(request: HttpRequest, agent_id: str) -> HttpResponse:
    tenant = _require_page(request, Capability.RETENTION_READ)
    try:
        agent = access_agent(request.user, agent_id, AgentPermission.VIEWER)
    except ApiError as exc:
        raise Http404 from exc
    if agent.tenant_id != tenant.pk:
        raise Http404
    if not authz.can(request.user, tenant, Capability.RETENTION_SET):
        return HttpResponse("Only a security officer or an admin may set retention.", status=403)
    form = RetentionForm(request.POST)
    status, extra = 200, {}
    if form.is_valid():
        current = current_policy_version(agent)
        policy = {**memory_policy_for(agent).to_json(), **form.cleaned_data}
        try:
            policy_services.policy_version_create(
                agent=agent,
                policy=policy,
                engine=current.engine if current else AgentPolicyVersion.Engine.BUILTIN,
                mem0_instance=current.mem0_instance if current else "",
                cognee_instance=current.cognee_instance if current else "",
                created_by=request.user,
                note="retention settings",
            )
            extra = {"notice": {"agent": agent.pk, "message": "Saved as a new policy version."}}
        except ApiError as exc:
            status, extra = 400, {"error": {"agent": agent.pk, "message": exc.message}}
    else:
        errors = "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())
        status, extra = 400, {"error": {"agent": agent.pk, "message": errors}}
    return render_page(
        request,
        "governance/retention.html",
        "governance/partials/retention_list.html",
        _retention_context(request, tenant, **extra),
        status=status,
    )


# --- policy editor ----------------------------------------------------------------


@login_required
@require_GET
def policies(request: HttpRequest) -> HttpResponse:
    tenant = _require_page(request, Capability.POLICY_READ)
    agents = agents_for(request.user, tenant=tenant)
    editable = set(
        agents_for(request.user, AgentPermission.EDITOR, tenant=tenant).values_list("pk", flat=True)
    )
    versions = dict(
        AgentPolicyVersion.objects.filter(agent__in=agents).in_force().values_list("agent_id", "version")
    )
    rows = [{"agent": a, "version": versions.get(a.pk, 0), "editable": a.pk in editable} for a in agents]
    return render_page(request, "governance/policies.html", "governance/policies.html", {"rows": rows})


def _policy_agent(request: HttpRequest, agent_id: str) -> tuple[Any, bool]:
    tenant = _require_page(request, Capability.POLICY_READ)
    try:
        agent = access_agent(request.user, agent_id, AgentPermission.VIEWER)
    except ApiError as exc:
        raise Http404 from exc
    if agent.tenant_id != tenant.pk:
        raise Http404
    editable = agents_for(request.user, AgentPermission.EDITOR).filter(pk=agent.pk).exists()
    return agent, editable


def _policy_context(
    agent: Any, editable: bool, form: PolicyForm | None = None, **extra: Any
) -> dict[str, Any]:
    current = current_policy_version(agent)
    if form is None:
        form = PolicyForm(
            initial=PolicyForm.initial_from(
                engine=current.engine if current else "builtin",
                mem0_instance=current.mem0_instance if current else "",
                cognee_instance=current.cognee_instance if current else "",
                policy=memory_policy_for(agent),
            )
        )
    versions = list(policy_versions(agent))
    newest = versions[0].version if versions else 0
    return {
        "agent": agent,
        "editable": editable,
        "form": form,
        "current": current,
        "versions": versions,
        "diff_from": newest - 1 if newest > 0 else 0,
        "diff_to": newest,
        **extra,
    }


@login_required
@require_http_methods(["GET", "POST"])
def policy_detail(request: HttpRequest, agent_id: str) -> HttpResponse:
    agent, editable = _policy_agent(request, agent_id)
    form, status, extra = None, 200, {}
    if request.method == "POST":
        if not editable:
            return HttpResponse("Changing the memory policy needs editor on the agent.", status=403)
        form = PolicyForm(request.POST)
        status = 400
        if form.is_valid():
            data = form.cleaned_data
            try:
                row = policy_services.policy_version_create(
                    agent=agent,
                    policy=form.policy(),
                    engine=data["engine"],
                    mem0_instance=data["mem0_instance"],
                    cognee_instance=data["cognee_instance"],
                    created_by=request.user,
                    note=data["note"],
                )
                form, status, extra = None, 200, {"notice": f"Saved as version {row.version}."}
            except ApiError as exc:
                _form_errors(form, exc)
    return render_page(
        request,
        "governance/policy_detail.html",
        "governance/partials/policy_panel.html",
        _policy_context(agent, editable, form, **extra),
        status=status,
    )


@login_required
@require_POST
def policy_restore(request: HttpRequest, agent_id: str, version: int) -> HttpResponse:
    agent, editable = _policy_agent(request, agent_id)
    if not editable:
        return HttpResponse("Restoring the memory policy needs editor on the agent.", status=403)
    try:
        row = policy_services.policy_version_restore(agent=agent, version=version, actor=request.user)
    except ApiError as exc:
        if exc.status_code == 404:
            raise Http404 from exc
        raise
    return render_page(
        request,
        "governance/policy_detail.html",
        "governance/partials/policy_panel.html",
        _policy_context(agent, editable, notice=f"Version {version} restored as version {row.version}."),
    )


@login_required
@require_GET
def policy_diff_view(request: HttpRequest, agent_id: str) -> HttpResponse:
    agent, _ = _policy_agent(request, agent_id)
    try:
        old, new = int(request.GET.get("from", "")), int(request.GET.get("to", ""))
        rows = policy_diff(agent, old, new)
    except (ValueError, ApiError):
        return render_page(
            request,
            "governance/partials/policy_diff.html",
            "governance/partials/policy_diff.html",
            {"agent": agent, "diff_error": "Pick two existing versions."},
            status=400,
        )
    return render_page(
        request,
        "governance/partials/policy_diff.html",
        "governance/partials/policy_diff.html",
        {"agent": agent, "diff": rows, "diff_from": old, "diff_to": new},
    )
