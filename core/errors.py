"""One error body for every 4xx/5xx answer of the API.

``{"error": {"code": "...", "message": "...", "details": {...}}}`` — validation
errors included. Every code is a member of :class:`ErrorCode`; services raise the
one exception class of their code (``MemoryNotFound``, ``AgentInactive``, ...),
each a subclass of the status it answers with. DRF's own exceptions and Django's
404 are mapped here, and anything unexpected becomes a 500 with no internals in
the body.
"""

from __future__ import annotations

import logging
from enum import StrEnum
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

logger = logging.getLogger(__name__)


class ErrorCode(StrEnum):
    """Every machine-readable code an error body can carry (``error.code``)."""

    BAD_REQUEST = "bad_request"
    VALIDATION_ERROR = "validation_error"
    PARSE_ERROR = "parse_error"
    AUTHENTICATION_FAILED = "authentication_failed"
    NOT_AUTHENTICATED = "not_authenticated"
    PERMISSION_DENIED = "permission_denied"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    NOT_ACCEPTABLE = "not_acceptable"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    RATE_LIMITED = "rate_limited"
    CONFLICT = "conflict"
    UNPROCESSABLE = "unprocessable"
    BAD_GATEWAY = "bad_gateway"
    SERVER_ERROR = "server_error"
    ERROR = "error"
    AGENT_EXISTS = "agent_exists"
    AGENT_INACTIVE = "agent_inactive"
    AGENT_NOT_FOUND = "agent_not_found"
    API_KEY_NOT_FOUND = "api_key_not_found"
    CANDIDATE_NOT_APPROVED = "candidate_not_approved"
    CANDIDATE_NOT_FOUND = "candidate_not_found"
    CANDIDATE_PROMOTED = "candidate_promoted"
    CANDIDATE_REFUSED = "candidate_refused"
    CHECKPOINT_REFUSED = "checkpoint_refused"
    CONFIRMATION_REQUIRED = "confirmation_required"
    CONTRADICTION_NOT_FOUND = "contradiction_not_found"
    CONTRADICTION_UNDONE = "contradiction_undone"
    ENGINE_CREDENTIAL_NOT_FOUND = "engine_credential_not_found"
    ENGINE_EXISTS = "engine_exists"
    ENGINE_NOT_FOUND = "engine_not_found"
    ENTITY_NOT_FOUND = "entity_not_found"
    ERASURE_FENCED = "erasure_fenced"
    ERASURE_NOT_COMPLETED = "erasure_not_completed"
    ERASURE_COMPLETED = "erasure_completed"
    ERASURE_REQUEST_NOT_FOUND = "erasure_request_not_found"
    ERASURE_TARGET_REQUIRED = "erasure_target_required"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    JOB_NOT_FOUND = "job_not_found"
    KNOWLEDGE_DATASET_ENGINE_CHANGED = "knowledge_dataset_engine_changed"
    KNOWLEDGE_DATASET_EXISTS = "knowledge_dataset_exists"
    KNOWLEDGE_DATASET_NOT_FOUND = "knowledge_dataset_not_found"
    LEGAL_HOLD_NOT_FOUND = "legal_hold_not_found"
    LEGAL_HOLD_RELEASED = "legal_hold_released"
    MEMORY_CAPABILITY_UNSUPPORTED = "memory_capability_unsupported"
    MEMORY_CREDENTIAL_INVALID = "memory_credential_invalid"
    MEMORY_CREDENTIAL_UNAVAILABLE = "memory_credential_unavailable"
    MEMORY_ENGINE_BUILTIN = "memory_engine_builtin"
    MEMORY_ENGINE_CREDENTIAL_MISSING = "memory_engine_credential_missing"
    MEMORY_ENGINE_MISSING = "memory_engine_missing"
    MEMORY_ENGINE_NO_CREDENTIAL = "memory_engine_no_credential"
    MEMORY_ENGINE_REFUSED = "memory_engine_refused"
    MEMORY_ENGINE_UNAVAILABLE = "memory_engine_unavailable"
    MEMORY_ISOLATION_INSUFFICIENT = "memory_isolation_insufficient"
    MEMORY_LEGAL_HOLD = "memory_legal_hold"
    MEMORY_NO_ENGINES = "memory_no_engines"
    MEMORY_NOT_FOUND = "memory_not_found"
    MEMORY_NOT_SUPERSEDED = "memory_not_superseded"
    MEMORY_SUPERSEDED = "memory_superseded"
    MEMORY_POLICY_VIOLATION = "memory_policy_violation"
    NO_TENANT = "no_tenant"
    NOT_A_MEMBER = "not_a_member"
    NOT_CANDIDATE_OWNER = "not_candidate_owner"
    POLICY_VERSION_NOT_FOUND = "policy_version_not_found"
    PROVIDER_WRITE_NOT_FOUND = "provider_write_not_found"
    SYNTHESIZER_NOT_FOUND = "synthesizer_not_found"
    TOO_MANY_KEYS = "too_many_keys"
    TWO_PERSON_RULE = "two_person_rule"
    INVALID_CURSOR = "invalid_cursor"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    URI_TOO_LONG = "uri_too_long"  # fedmem_site.serve before Django, core.middleware in it
    HEADERS_TOO_LARGE = "headers_too_large"  # likewise


class ApiError(Exception):
    """A failure with a stable machine-readable code, raised by services."""

    status_code = status.HTTP_400_BAD_REQUEST
    code: str = ErrorCode.BAD_REQUEST
    message = "The request cannot be served."

    def __init__(
        self,
        message: str | None = None,
        *,
        details: dict[str, Any] | None = None,
        code: ErrorCode | str | None = None,
    ) -> None:
        self.message = message or self.message
        self.details = details or {}
        if code:
            self.code = code
        super().__init__(self.message)


class InvalidInput(ApiError):
    status_code = status.HTTP_400_BAD_REQUEST
    code = ErrorCode.VALIDATION_ERROR
    message = "Invalid input."


class NotFound(ApiError):
    status_code = status.HTTP_404_NOT_FOUND
    code = ErrorCode.NOT_FOUND
    message = "Not found."


class Forbidden(ApiError):
    status_code = status.HTTP_403_FORBIDDEN
    code = ErrorCode.PERMISSION_DENIED
    message = "You do not have permission to perform this action."


class Conflict(ApiError):
    status_code = status.HTTP_409_CONFLICT
    code = ErrorCode.CONFLICT
    message = "The request conflicts with the current state."


class Unprocessable(ApiError):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    code = ErrorCode.UNPROCESSABLE
    message = "The request is well-formed but cannot be processed."


class BadGateway(ApiError):
    """An upstream (a provider engine, a secret store) could not serve the request."""

    status_code = status.HTTP_502_BAD_GATEWAY
    code = ErrorCode.BAD_GATEWAY
    message = "An upstream service could not serve the request."


def field_error(
    name: str,
    message: str,
    code: ErrorCode | str = ErrorCode.VALIDATION_ERROR,
    *,
    as_message: bool = False,
) -> InvalidInput:
    """The 400 for one bad field, shaped like DRF's validation errors. The body's
    message is ``Invalid input: <name>.``, or with ``as_message`` the field's own
    sentence (the documented answer of the engine endpoints)."""
    summary = message if as_message else f"Invalid input: {name}."
    return InvalidInput(summary, details={"fields": {name: [message]}}, code=code)


# --- one class per code (raise these, never a bare code string) -------------------------


class AgentExists(Conflict):
    code = ErrorCode.AGENT_EXISTS


class AgentInactive(Conflict):
    code = ErrorCode.AGENT_INACTIVE


class AgentNotFound(NotFound):
    code = ErrorCode.AGENT_NOT_FOUND


class ApiKeyNotFound(NotFound):
    code = ErrorCode.API_KEY_NOT_FOUND


class CandidateNotApproved(Conflict):
    code = ErrorCode.CANDIDATE_NOT_APPROVED


class CandidateNotFound(NotFound):
    code = ErrorCode.CANDIDATE_NOT_FOUND


class CandidatePromoted(Conflict):
    code = ErrorCode.CANDIDATE_PROMOTED


class ConfirmationRequired(InvalidInput):
    code = ErrorCode.CONFIRMATION_REQUIRED


class ContradictionNotFound(NotFound):
    code = ErrorCode.CONTRADICTION_NOT_FOUND


class ContradictionUndone(Conflict):
    code = ErrorCode.CONTRADICTION_UNDONE


class EngineCredentialNotFound(NotFound):
    code = ErrorCode.ENGINE_CREDENTIAL_NOT_FOUND


class EngineExists(Conflict):
    code = ErrorCode.ENGINE_EXISTS


class EngineNotFound(NotFound):
    code = ErrorCode.ENGINE_NOT_FOUND


class EntityNotFound(NotFound):
    code = ErrorCode.ENTITY_NOT_FOUND


class ErasureFenced(Conflict):
    code = ErrorCode.ERASURE_FENCED


class ErasureNotCompleted(Conflict):
    code = ErrorCode.ERASURE_NOT_COMPLETED


class ErasureCompleted(Conflict):
    """A retry of an erasure that already completed: there is nothing to redo."""

    code = ErrorCode.ERASURE_COMPLETED


class ErasureRequestNotFound(NotFound):
    code = ErrorCode.ERASURE_REQUEST_NOT_FOUND


class ErasureTargetRequired(InvalidInput):
    """An erasure request named neither a subject nor a dataset."""

    code = ErrorCode.ERASURE_TARGET_REQUIRED
    message = "Name a subject, datasets, or both."


class IdempotencyKeyReused(Unprocessable):
    code = ErrorCode.IDEMPOTENCY_KEY_REUSED


class JobNotFound(NotFound):
    code = ErrorCode.JOB_NOT_FOUND


class KnowledgeDatasetEngineChanged(Conflict):
    code = ErrorCode.KNOWLEDGE_DATASET_ENGINE_CHANGED


class KnowledgeDatasetExists(Conflict):
    code = ErrorCode.KNOWLEDGE_DATASET_EXISTS


class KnowledgeDatasetNotFound(NotFound):
    code = ErrorCode.KNOWLEDGE_DATASET_NOT_FOUND


class LegalHoldNotFound(NotFound):
    code = ErrorCode.LEGAL_HOLD_NOT_FOUND


class LegalHoldReleased(Conflict):
    code = ErrorCode.LEGAL_HOLD_RELEASED


class MemoryCapabilityUnsupported(Unprocessable):
    code = ErrorCode.MEMORY_CAPABILITY_UNSUPPORTED


class MemoryEngineBuiltin(Unprocessable):
    code = ErrorCode.MEMORY_ENGINE_BUILTIN


class MemoryEngineCredentialMissing(Unprocessable):
    code = ErrorCode.MEMORY_ENGINE_CREDENTIAL_MISSING


class MemoryEngineMissing(Unprocessable):
    code = ErrorCode.MEMORY_ENGINE_MISSING


class MemoryEngineNoCredential(Unprocessable):
    code = ErrorCode.MEMORY_ENGINE_NO_CREDENTIAL


class MemoryEngineRefused(Unprocessable):
    code = ErrorCode.MEMORY_ENGINE_REFUSED


class MemoryEngineUnavailable(BadGateway):
    code = ErrorCode.MEMORY_ENGINE_UNAVAILABLE


class MemoryIsolationInsufficient(Unprocessable):
    code = ErrorCode.MEMORY_ISOLATION_INSUFFICIENT


class MemoryNoEngines(Unprocessable):
    code = ErrorCode.MEMORY_NO_ENGINES


class MemoryNotFound(NotFound):
    code = ErrorCode.MEMORY_NOT_FOUND


class MemoryNotSuperseded(Conflict):
    code = ErrorCode.MEMORY_NOT_SUPERSEDED


class MemorySuperseded(Conflict):
    """A concurrent change retired the item while this request waited for its row."""

    code = ErrorCode.MEMORY_SUPERSEDED


class NoTenant(Forbidden):
    code = ErrorCode.NO_TENANT


class InvalidCursor(InvalidInput):
    code = ErrorCode.INVALID_CURSOR
    message = "The cursor is not one this list handed out; start again without it."


class PayloadTooLarge(ApiError):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    code = ErrorCode.PAYLOAD_TOO_LARGE
    message = "The request body is larger than the server accepts."


class NotAMember(InvalidInput):
    code = ErrorCode.NOT_A_MEMBER


class NotCandidateOwner(Forbidden):
    code = ErrorCode.NOT_CANDIDATE_OWNER


class TwoPersonRule(Forbidden):
    code = ErrorCode.TWO_PERSON_RULE


class PolicyVersionNotFound(NotFound):
    code = ErrorCode.POLICY_VERSION_NOT_FOUND


class ProviderWriteNotFound(NotFound):
    code = ErrorCode.PROVIDER_WRITE_NOT_FOUND


class SynthesizerNotFound(NotFound):
    code = ErrorCode.SYNTHESIZER_NOT_FOUND


class TooManyKeys(Conflict):
    code = ErrorCode.TOO_MANY_KEYS


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    # str(): an ErrorCode renders as its plain value wherever the body goes.
    return {"error": {"code": str(code), "message": message, "details": details or {}}}


_DRF_CODES: dict[type[exceptions.APIException], ErrorCode] = {
    exceptions.ValidationError: ErrorCode.VALIDATION_ERROR,
    exceptions.ParseError: ErrorCode.PARSE_ERROR,
    exceptions.AuthenticationFailed: ErrorCode.AUTHENTICATION_FAILED,
    exceptions.NotAuthenticated: ErrorCode.NOT_AUTHENTICATED,
    exceptions.PermissionDenied: ErrorCode.PERMISSION_DENIED,
    exceptions.NotFound: ErrorCode.NOT_FOUND,
    exceptions.MethodNotAllowed: ErrorCode.METHOD_NOT_ALLOWED,
    exceptions.NotAcceptable: ErrorCode.NOT_ACCEPTABLE,
    exceptions.UnsupportedMediaType: ErrorCode.UNSUPPORTED_MEDIA_TYPE,
    exceptions.Throttled: ErrorCode.RATE_LIMITED,
}


def drf_error_code(exc: exceptions.APIException) -> ErrorCode:
    """The code of a DRF exception, for every surface that reports one (REST, MCP)."""
    for klass in type(exc).__mro__:
        if klass in _DRF_CODES:
            return _DRF_CODES[klass]  # type: ignore[index]
    return ErrorCode.ERROR


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    headers: dict[str, str] = {}
    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge()
    elif isinstance(exc, SuspiciousOperation):  # too many fields, a bad header, ...
        exc = ApiError("Bad request.")
    if isinstance(exc, ApiError):
        set_rollback()
        return Response(error_body(exc.code, exc.message, exc.details), status=exc.status_code)
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
        code = drf_error_code(exc)
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
