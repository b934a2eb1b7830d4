"""One HTMX fragment, two render paths.

A page template ``{% include %}``s its fragment; an HTMX request for the same URL
gets the fragment alone. Views call :func:`render_page` and never branch on
``request.htmx`` themselves.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def wants_fragment(request: HttpRequest) -> bool:
    htmx = getattr(request, "htmx", None)
    # A boosted navigation wants the whole page; a targeted swap wants the fragment.
    return bool(htmx) and not htmx.boosted


def render_page(
    request: HttpRequest,
    page: str,
    fragment: str,
    context: dict[str, Any],
    *,
    status: int = 200,
) -> HttpResponse:
    template = fragment if wants_fragment(request) else page
    return render(request, template, context, status=status)
