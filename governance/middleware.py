"""Resolve the console user's active tenant (the tenant switcher's choice)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from governance.selectors import tenants_for_user

SESSION_KEY = "fedmem_tenant_id"


class ActiveTenantMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.tenant = None  # type: ignore[attr-defined]
        request.tenants = []  # type: ignore[attr-defined]
        user = request.user
        if user.is_authenticated:
            tenants = list(tenants_for_user(user))
            chosen = request.session.get(SESSION_KEY)
            active = next((t for t in tenants if str(t.pk) == chosen), tenants[0] if tenants else None)
            request.tenant = active  # type: ignore[attr-defined]
            request.tenants = tenants  # type: ignore[attr-defined]
        return self.get_response(request)
