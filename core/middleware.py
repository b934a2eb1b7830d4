"""Request hygiene every route shares: NUL characters and over-long URLs refused, a
Content-Security-Policy set, the requests in flight counted."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import unquote_to_bytes

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.template.loader import render_to_string

from core.beside import serving
from core.errors import ErrorCode, error_body

NUL_MESSAGE = "The URL contains a NUL character."
TOO_LONG_MESSAGE = "The request line is too long."
# The request line daphne (fedmem_site.serve) accepts; uvicorn, which the
# multi-process default runs, accepts any length, so the same bound is kept here.
MAX_URL_BYTES = 16 * 1024


class RequestsInFlightMiddleware:
    """Count the requests this process serves now (:mod:`core.beside` reads beside a
    request only while it is the only one). Django's request_started / request_finished
    signals would count too, but a streaming answer whose body is never read out sends
    no finish, and the count then stayed up for good; this one comes down in any case."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with serving():
            return self.get_response(request)


class RejectNulMiddleware:
    """Answer 400 for a NUL anywhere in the path or the query string.

    PostgreSQL cannot store or compare text containing NUL, so an id, a filter or a
    ``?subject=`` with one failed deep inside a query as a 500. Refusing it here
    covers every route, present and future, before any view runs.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        raw_query = request.META.get("QUERY_STRING", "")
        if len(request.path) + len(raw_query) > MAX_URL_BYTES:
            return JsonResponse(error_body(ErrorCode.URI_TOO_LONG, TOO_LONG_MESSAGE), status=414)
        if "\x00" in request.path or b"\x00" in unquote_to_bytes(raw_query.replace("+", " ")):
            if request.path.startswith("/v1/") or request.path == "/v1":
                return JsonResponse(error_body(ErrorCode.BAD_REQUEST, NUL_MESSAGE), status=400)
            # Rendered without the request: the session and user are not loaded yet.
            page = render_to_string("errors/error.html", {"status": 400, "message": NUL_MESSAGE})
            return HttpResponseBadRequest(page)
        return self.get_response(request)


class ContentSecurityPolicyMiddleware:
    """Send ``FEDMEM_CSP`` on every HTML answer (console, admin, API docs).

    The console loads only its own vendored scripts and stylesheets (htmx,
    cytoscape, static/js), with no inline script or style, so ``'self'`` suffices;
    an injected ``<script>`` or ``onclick`` in stored content cannot run.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        policy = settings.FEDMEM_CSP
        if policy and response.get("Content-Type", "").startswith("text/html"):
            response.headers.setdefault("Content-Security-Policy", policy)
        return response
