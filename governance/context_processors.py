"""Navigation for the console: what the user's roles in the active tenant offer."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from governance.permissions import roles_in

# (label, url name or None while the area is not built yet, roles that see it; empty = everyone)
NAVIGATION: list[tuple[str, str | None, frozenset[str]]] = [
    ("Dashboard", "console:dashboard", frozenset()),
    ("Memories", "console:memories", frozenset()),
    ("Graph", "console:graph", frozenset()),
    ("Candidates", "console:candidates", frozenset()),
    (
        "Holds & erasure",
        "console:holds",
        frozenset({"security_officer", "auditor", "tenant_admin", "platform_admin"}),
    ),
    ("Engines", "console:engines", frozenset()),
    ("Policies", "console:policies", frozenset({"platform_admin", "tenant_admin", "developer"})),
    ("Audit", "console:audit", frozenset({"auditor"})),
    ("Agents & keys", "console:agents", frozenset()),
]


def console(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    tenant = getattr(request, "tenant", None)
    if user is None or not user.is_authenticated or tenant is None:
        return {"nav": [], "roles": set()}
    roles = roles_in(user, tenant)
    nav = [
        {"label": label, "url_name": url_name}
        for label, url_name, allowed in NAVIGATION
        if not allowed or roles & allowed
    ]
    return {"nav": nav, "roles": roles}
