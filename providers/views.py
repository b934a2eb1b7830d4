"""Console pages for engines: list, detail with capabilities and health, declare /
remove (platform_admin), the tenant's own credential (tenant_admin). Writes call
the same services as the API; a credential reference is never shown back."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods, require_POST

from core.errors import ApiError
from core.htmx import render_page
from governance.models import Agent, Role
from governance.permissions import has_role
from governance.selectors import memory_policies_for_tenant
from providers import selectors, services
from providers.credentials import parse_ref
from providers.forms import CredentialForm, EngineForm
from providers.models import BUILTIN_ENGINE_ID, ISOLATION_ORDER, Isolation

HEALTH_ROLES = (Role.TENANT_ADMIN, Role.DEVELOPER, Role.SECURITY_OFFICER, Role.AUDITOR)


def _tenant(request: HttpRequest) -> Any:
    tenant = getattr(request, "tenant", None)
    if tenant is None:
        raise Http404
    return tenant


def _engine_or_404(request: HttpRequest, engine_id: str) -> Any:
    try:
        return selectors.access_engine(request.user, _tenant(request), engine_id)
    except ApiError as exc:
        raise Http404 from exc


@login_required
@require_http_methods(["GET", "POST"])
def engines(request: HttpRequest) -> HttpResponse:
    tenant = _tenant(request)
    can_declare = has_role(request.user, tenant, (Role.PLATFORM_ADMIN,))
    form = EngineForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if not can_declare:
            return HttpResponse(status=403)
        status = 400
        if form.is_valid():
            data = dict(form.cleaned_data)
            owner = None
            if data.pop("tenant"):
                from governance.models import Tenant

                owner = Tenant.objects.filter(slug=form.cleaned_data["tenant"]).first()
            if form.cleaned_data["tenant"] and owner is None:
                form.add_error("tenant", "No such tenant.")
            else:
                try:
                    services.engine_create(actor=request.user, engine_id=data.pop("id"), tenant=owner, **data)
                    return redirect("console:engines")
                except ApiError as exc:
                    fields = exc.details.get("fields", {})
                    for field, errors in fields.items():
                        form.add_error(field if field in form.fields else None, " ".join(errors))
                    if not fields:
                        form.add_error(None, exc.message)
    rows = list(selectors.engines_for(request.user, tenant).order_by("id"))
    own = selectors.tenants_with_credentials(rows, tenant)
    context = {
        "engines": [
            {
                "engine": engine,
                "announcement": services.announcement_for(engine),
                "own_credential": engine.id in own,
            }
            for engine in rows
        ],
        "builtin": services.builtin_announcement(),
        "form": form,
        "can_declare": can_declare,
    }
    return render_page(
        request, "providers/engines.html", "providers/partials/engine_list.html", context, status=status
    )


def _agents_refused(tenant: Any, isolation: str) -> list[tuple[str, str]]:
    """Agents whose policy requires more isolation than the engine guarantees."""
    policies = memory_policies_for_tenant(tenant)
    refused = []
    for agent in Agent.objects.filter(tenant=tenant).order_by("name"):
        required = policies[agent.pk].required_isolation
        if ISOLATION_ORDER[Isolation(required)] > ISOLATION_ORDER[Isolation(isolation)]:
            refused.append((agent.name, required))
    return refused


@login_required
def engine_detail(request: HttpRequest, engine_id: str) -> HttpResponse:
    tenant = _tenant(request)
    if engine_id == BUILTIN_ENGINE_ID:
        announcement, engine, credential = services.builtin_announcement(), None, None
    else:
        engine = _engine_or_404(request, engine_id)
        announcement = services.announcement_for(engine)
        credential = selectors.tenant_credential(engine, tenant)
    context = {
        "engine_id": engine_id,
        "engine": engine,
        "announcement": announcement,
        "credential_scheme": parse_ref(credential.credential_ref).scheme if credential else None,
        "refused": _agents_refused(tenant, announcement["isolation"]),
        "can_health": engine is not None and has_role(request.user, tenant, HEALTH_ROLES),
        "can_credential": engine is not None
        and engine.access_control != "none"
        and has_role(request.user, tenant, (Role.TENANT_ADMIN,)),
        "can_remove": engine is not None and has_role(request.user, tenant, (Role.PLATFORM_ADMIN,)),
        "form": CredentialForm(),
        "writes": selectors.engine_writes(engine, tenant) if engine is not None else [],
    }
    return render_page(request, "providers/engine_detail.html", "providers/partials/credential.html", context)


@login_required
@require_POST
def engine_health(request: HttpRequest, engine_id: str) -> HttpResponse:
    tenant = _tenant(request)
    engine = _engine_or_404(request, engine_id)
    if not has_role(request.user, tenant, HEALTH_ROLES):
        return HttpResponse(status=403)
    try:
        report: dict[str, Any] = services.engine_health(engine=engine, tenant=tenant).to_dict()
    except ApiError as exc:
        report = {"status": "unavailable", "error": exc.message, "code": exc.code}
    return render_page(
        request, "providers/partials/health.html", "providers/partials/health.html", {"report": report}
    )


@login_required
@require_POST
def engine_credential(request: HttpRequest, engine_id: str) -> HttpResponse:
    tenant = _tenant(request)
    engine = _engine_or_404(request, engine_id)
    if not has_role(request.user, tenant, (Role.TENANT_ADMIN,)):
        return HttpResponse(status=403)
    form = CredentialForm(request.POST)
    status = 200
    try:
        if request.POST.get("action") == "remove":
            services.engine_credential_remove(actor=request.user, engine=engine, tenant=tenant)
            form = CredentialForm()
        elif form.is_valid():
            services.engine_credential_set(
                actor=request.user,
                engine=engine,
                tenant=tenant,
                credential_ref=form.cleaned_data["credential_ref"],
            )
            form = CredentialForm()  # the reference is never rendered back
        else:
            status = 400
    except ApiError as exc:
        form = CredentialForm({"credential_ref": ""})
        form.errors.clear()
        form.add_error("credential_ref", exc.message)
        status = 400
    credential = selectors.tenant_credential(engine, tenant)
    context = {
        "engine_id": engine.id,
        "engine": engine,
        "credential_scheme": parse_ref(credential.credential_ref).scheme if credential else None,
        "can_credential": True,
        "form": form,
    }
    return render_page(
        request, "providers/engine_detail.html", "providers/partials/credential.html", context, status=status
    )


@login_required
@require_POST
def engine_remove(request: HttpRequest, engine_id: str) -> HttpResponse:
    tenant = _tenant(request)
    engine = _engine_or_404(request, engine_id)
    if not has_role(request.user, tenant, (Role.PLATFORM_ADMIN,)):
        return HttpResponse(status=403)
    services.engine_delete(actor=request.user, engine=engine)
    return redirect("console:engines")


@login_required
def dashboard_engines(request: HttpRequest) -> HttpResponse:
    """The dashboard's engine panel: every engine the tenant may use, with a short,
    cached health check for the roles that may run one (loaded after the page)."""
    tenant = _tenant(request)
    rows = list(selectors.engines_for(request.user, tenant).order_by("id"))
    can_health = has_role(request.user, tenant, HEALTH_ROLES)
    health = services.engines_health_overview(engines=rows, tenant=tenant) if can_health else {}
    context = {
        "engines": [{"engine": e, "report": health.get(e.id)} for e in rows],
        "can_health": can_health,
    }
    return render_page(
        request,
        "providers/partials/dashboard_engines.html",
        "providers/partials/dashboard_engines.html",
        context,
    )
