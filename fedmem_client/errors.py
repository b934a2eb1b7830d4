"""Exceptions carrying the API's error body: ``code``, ``message``, ``details``."""

from __future__ import annotations

from typing import Any


class FedmemError(Exception):
    """Any answer the API gave as an error (or no answer at all: status 0)."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}


class ValidationError(FedmemError):
    """400 / 422: the request was refused; ``details['fields']`` names the fields."""


class NotAuthenticated(FedmemError):
    """401: no key, a bad key or a revoked key."""


class PermissionDenied(FedmemError):
    """403: the role or the memory policy does not allow it."""


class NotFound(FedmemError):
    """404: unknown — or another tenant's, which looks the same."""


class RateLimited(FedmemError):
    """429: wait ``retry_after`` seconds."""

    retry_after: float = 1.0


class ServerError(FedmemError):
    """5xx other than an unavailable engine."""


class EngineUnavailable(ServerError):
    """502: a provider engine could not be reached."""


def error_for(status: int, body: Any, retry_after: str | None = None) -> FedmemError:
    error = body.get("error", {}) if isinstance(body, dict) else {}
    code = str(error.get("code") or f"http_{status}")
    message = str(error.get("message") or "The server answered with an error.")
    details = error.get("details") if isinstance(error.get("details"), dict) else {}
    klass: type[FedmemError] = {
        400: ValidationError,
        401: NotAuthenticated,
        403: PermissionDenied,
        404: NotFound,
        422: ValidationError,
        429: RateLimited,
        502: EngineUnavailable,
    }.get(status, ServerError if status >= 500 else FedmemError)
    exc = klass(status, code, message, details)
    if isinstance(exc, RateLimited):
        try:
            exc.retry_after = max(0.0, float(retry_after or 1))
        except ValueError:
            exc.retry_after = 1.0
    return exc
