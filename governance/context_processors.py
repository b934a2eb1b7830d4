"""Navigation for the console: what the user's capabilities in the active tenant offer."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from governance import authz
from governance.authz import Capability

# (label, then the pages it may open, first held capability wins; empty = everyone)
NAVIGATION: list[tuple[str, list[tuple[Capability | None, str]]]] = [
    ("Dashboard", [(None, "console:dashboard")]),
    ("Memories", [(None, "console:memories")]),
    ("Graph", [(None, "console:graph")]),
    ("Candidates", [(None, "console:candidates")]),
    (
        "Holds & erasure",
        [
            (Capability.HOLD_READ, "console:holds"),
            (Capability.ERASURE_READ, "console:erasures"),
            (Capability.RETENTION_READ, "console:retention"),
        ],
    ),
    ("Engines", [(None, "console:engines")]),
    ("Policies", [(Capability.POLICY_READ, "console:policies")]),
    ("Audit", [(Capability.AUDIT_READ, "console:audit")]),
    ("Agents & keys", [(None, "console:agents")]),
]


def console(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    tenant = getattr(request, "tenant", None)
    if user is None or not user.is_authenticated or tenant is None:
        return {"nav": [], "roles": set(), "can": set()}
    held = authz.capabilities_in(user, tenant)
    nav = []
    for label, pages in NAVIGATION:
        url_name = next((url for needed, url in pages if needed is None or needed in held), None)
        if url_name is not None:
            nav.append({"label": label, "url_name": url_name})
    # Templates test capabilities by value: {% if "hold.read" in can %}.
    return {"nav": nav, "roles": authz.roles_in(user, tenant), "can": {str(c) for c in held}}
