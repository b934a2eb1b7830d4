"""Console pages for identity: dashboard, tenant switch, agents & keys.

Each page includes its fragment; an HTMX swap gets the fragment alone
(core.htmx.render_page). Writes call the same services as the API.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods, require_POST

from core.errors import ApiError
from core.htmx import render_page
from governance import authz
from governance.authz import Capability
from governance.filtersets import AuditEventFilterSet
from governance.forms import AgentForm, KeyForm
from governance.lockout import client_address, lockout_check
from governance.middleware import SESSION_KEY
from governance.models.agents import AgentPermission
from governance.selectors import (
    access_agent,
    access_job,
    agents_for,
    audit_events,
    jobs_for,
    keys_for_agent,
    memberships_for,
)
from governance.services import agents as agent_services
from governance.services import jobs as job_services
from governance.services.audit import audit_verify


class LoginView(auth_views.LoginView):
    template_name = "governance/login.html"
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        # While locked out the password is not even checked (the backend refuses too,
        # for the admin's login): 429 with the wait, the form shown again.
        locked = lockout_check(address=client_address(request), account=request.POST.get("username") or None)
        if locked is None:
            return super().post(request, *args, **kwargs)
        message = f"Too many failed attempts; try again in {locked.retry_after} seconds."
        form = self.get_form_class()(request, initial={"username": request.POST.get("username", "")})
        response = self.render_to_response(self.get_context_data(form=form, lockout=message), status=429)
        response["Retry-After"] = str(locked.retry_after)
        return response


class LogoutView(auth_views.LogoutView):
    pass


def _tenant(request: HttpRequest) -> Any:
    tenant = getattr(request, "tenant", None)
    if tenant is None:
        raise Http404("You are not a member of any tenant.")
    return tenant


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    tenant = _tenant(request)
    agents = agents_for(request.user, tenant=tenant).annotate(
        active_keys=Count("api_keys", filter=Q(api_keys__revoked_at__isnull=True))
    )
    context = {
        "agents": agents,
        "members": memberships_for(tenant),
        "jobs": jobs_for(request.user, tenant)[:10],
        "can_self_check": authz.can(request.user, tenant, Capability.SELF_CHECK_RUN),
    }
    return render_page(request, "governance/dashboard.html", "governance/partials/jobs.html", context)


@login_required
@require_POST
def switch_tenant(request: HttpRequest) -> HttpResponse:
    wanted = request.POST.get("tenant_id", "")
    if any(str(t.pk) == wanted for t in request.tenants):  # type: ignore[attr-defined]
        request.session[SESSION_KEY] = wanted
    return redirect("console:dashboard")


@login_required
@require_POST
def self_check(request: HttpRequest) -> HttpResponse:
    tenant = _tenant(request)
    if not authz.can(request.user, tenant, Capability.SELF_CHECK_RUN):
        return HttpResponse(status=403)
    job_services.self_check_start(tenant=tenant, requested_by=request.user)
    jobs = jobs_for(request.user, tenant)[:10]
    return render_page(
        request,
        "governance/dashboard.html",
        "governance/partials/jobs.html",
        {"jobs": jobs, "can_self_check": True},
    )


@login_required
def job_row(request: HttpRequest, job_id: str) -> HttpResponse:
    try:
        job = access_job(request.user, job_id)
    except ApiError as exc:
        raise Http404 from exc
    return render_page(
        request, "governance/partials/job_row.html", "governance/partials/job_row.html", {"job": job}
    )


@login_required
@require_http_methods(["GET", "POST"])
def agents(request: HttpRequest) -> HttpResponse:
    tenant = _tenant(request)
    can_create = authz.can(request.user, tenant, Capability.AGENT_CREATE)
    form = AgentForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if not can_create:
            return HttpResponse(status=403)
        if form.is_valid():
            try:
                agent_services.agent_create(tenant=tenant, created_by=request.user, **form.cleaned_data)
                form = AgentForm()
            except ApiError as exc:
                form.add_error("name", exc.message)
                status = 400
        else:
            status = 400
    context = {
        "agents": agents_for(request.user, tenant=tenant).annotate(
            active_keys=Count("api_keys", filter=Q(api_keys__revoked_at__isnull=True))
        ),
        "form": form,
        "can_create": can_create,
    }
    return render_page(
        request, "governance/agents.html", "governance/partials/agent_list.html", context, status=status
    )


def _agent_or_404(request: HttpRequest, agent_id: str, permission: str) -> Any:
    try:
        return access_agent(request.user, agent_id, permission)
    except ApiError as exc:
        raise Http404 from exc


@login_required
def agent_detail(request: HttpRequest, agent_id: str) -> HttpResponse:
    agent = _agent_or_404(request, agent_id, AgentPermission.VIEWER)
    can_edit = agents_for(request.user, AgentPermission.EDITOR).filter(pk=agent.pk).exists()
    context = {
        "agent": agent,
        "can_edit": can_edit,
        "keys": keys_for_agent(agent) if can_edit else [],
        "form": KeyForm(),
    }
    return render_page(request, "governance/agent_detail.html", "governance/partials/key_list.html", context)


@login_required
@require_POST
def agent_key_create(request: HttpRequest, agent_id: str) -> HttpResponse:
    agent = _agent_or_404(request, agent_id, AgentPermission.EDITOR)
    form = KeyForm(request.POST)
    context: dict[str, Any] = {"agent": agent, "can_edit": True, "form": form}
    status = 200
    if form.is_valid():
        try:
            key, secret = agent_services.api_key_create(
                tenant=agent.tenant, agent=agent, name=form.cleaned_data["name"], created_by=request.user
            )
            context.update(new_key=key, secret=secret, form=KeyForm())
        except ApiError as exc:
            form.add_error("name", exc.message)
            status = 400
    else:
        status = 400
    context["keys"] = keys_for_agent(agent)
    return render_page(
        request, "governance/agent_detail.html", "governance/partials/key_list.html", context, status=status
    )


@login_required
@require_POST
def agent_key_revoke(request: HttpRequest, agent_id: str, key_id: str) -> HttpResponse:
    agent = _agent_or_404(request, agent_id, AgentPermission.EDITOR)
    key = keys_for_agent(agent).filter(pk=key_id).first()
    if key is None:
        raise Http404
    agent_services.api_key_revoke(key=key, actor=request.user)
    context = {"agent": agent, "can_edit": True, "keys": keys_for_agent(agent), "form": KeyForm()}
    return render_page(request, "governance/agent_detail.html", "governance/partials/key_list.html", context)


@login_required
def audit(request: HttpRequest) -> HttpResponse:
    tenant = _tenant(request)
    if not authz.can(request.user, tenant, Capability.AUDIT_READ):
        raise Http404
    filterset = AuditEventFilterSet(request.GET, queryset=audit_events(tenant))
    events = filterset.qs if filterset.is_valid() else audit_events(tenant).none()
    page = Paginator(events, 50).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "filterset": filterset,
        "page": page,
        "verification": audit_verify(chain=str(tenant.pk)),
        "query": query.urlencode(),
    }
    return render_page(request, "governance/audit.html", "governance/partials/audit_list.html", context)
