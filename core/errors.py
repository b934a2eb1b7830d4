"""One error body for every 4xx/5xx answer of the API.

``{"error": {"code": "...", "message": "...", "details": {...}}}`` — validation
errors included. Services raise :class:`ApiError` subclasses with a stable code;
DRF's own exceptions and Django's 404 are mapped here, and anything unexpected
becomes a 500 with no internals in the body.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

logger = logging.getLogger(__name__)


class ApiError(Exception):
    """A failure with a stable machine-readable code, raised by services."""

    status_code = status.HTTP_400_BAD_REQUEST
    code = "bad_request"
    message = "The request cannot be served."

    def __init__(
        self, message: str | None = None, *, details: dict[str, Any] | None = None, code: str | None = None
    ) -> None:
        self.message = message or self.message
        self.details = details or {}
        if code:
            self.code = code
        super().__init__(self.message)


class InvalidInput(ApiError):
    status_code = status.HTTP_400_BAD_REQUEST
    code = "validation_error"
    message = "Invalid input."


class NotFound(ApiError):
    status_code = status.HTTP_404_NOT_FOUND
    code = "not_found"
    message = "Not found."


class Forbidden(ApiError):
    status_code = status.HTTP_403_FORBIDDEN
    code = "permission_denied"
    message = "You do not have permission to perform this action."


class Conflict(ApiError):
    status_code = status.HTTP_409_CONFLICT
    code = "conflict"
    message = "The request conflicts with the current state."


class Unprocessable(ApiError):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    code = "unprocessable"
    message = "The request is well-formed but cannot be processed."


class BadGateway(ApiError):
    """An upstream (a provider engine, a secret store) could not serve the request."""

    status_code = status.HTTP_502_BAD_GATEWAY
    code = "bad_gateway"
    message = "An upstream service could not serve the request."


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or {}}}


_DRF_CODES: dict[type[exceptions.APIException], str] = {
    exceptions.ValidationError: "validation_error",
    exceptions.ParseError: "parse_error",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.PermissionDenied: "permission_denied",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.Throttled: "rate_limited",
}


def _drf_code(exc: exceptions.APIException) -> str:
    for klass in type(exc).__mro__:
        if klass in _DRF_CODES:
            return _DRF_CODES[klass]  # type: ignore[index]
    return "error"


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    headers: dict[str, str] = {}
    if isinstance(exc, ApiError):
        set_rollback()
        return Response(error_body(exc.code, exc.message, exc.details), status=exc.status_code)
    if isinstance(exc, RequestDataTooBig):
        set_rollback()
        return Response(
            error_body("payload_too_large", "The request body is larger than the server accepts."),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, SuspiciousOperation):  # too many fields, a bad header, ...
        set_rollback()
        return Response(error_body("bad_request", "Bad request."), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    if isinstance(exc, exceptions.APIException):
        set_rollback()
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header  # type: ignore[attr-defined]
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(exc.wait))  # type: ignore[attr-defined]
        code = _drf_code(exc)
        if isinstance(exc, exceptions.ValidationError):
            detail = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
            fields = ", ".join(sorted(str(key) for key in detail))
            body = error_body(code, f"Invalid input: {fields}.", {"fields": detail})
        else:
            body = error_body(code, str(exc.detail))
        return Response(body, status=exc.status_code, headers=headers)
    # Unexpected: log it, answer 500 with the uniform body and nothing internal.
    set_rollback()
    logger.exception("unhandled error in %s", context.get("view"))
    return Response(
        error_body("server_error", "The server failed to handle this request."),
        status=status.HTTP_500_INTERNAL_SERVER_ERROR,
    )


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/v1/") or request.path == "/v1"


def json_or_html(code: str, message: str, status_code: int, template: str):  # type: ignore[no-untyped-def]
    """Django-level handlers: JSON for the API, a console page otherwise."""

    def handler(request: HttpRequest, exception: Exception | None = None):  # type: ignore[no-untyped-def]
        if _is_api(request):
            return JsonResponse(error_body(code, message), status=status_code)
        from django.shortcuts import render

        return render(request, template, {"status": status_code, "message": message}, status=status_code)

    return handler


handler400 = json_or_html("bad_request", "Bad request.", 400, "errors/error.html")
handler403 = json_or_html(
    "permission_denied", "You do not have permission to perform this action.", 403, "errors/error.html"
)
handler404 = json_or_html("not_found", "Not found.", 404, "errors/error.html")


def handler500(request: HttpRequest):  # type: ignore[no-untyped-def]
    return json_or_html(
        "server_error", "The server failed to handle this request.", 500, "errors/error.html"
    )(request)
