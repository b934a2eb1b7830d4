"""Liveness (/health: the process answers) and readiness (/ready: it can do work)."""

from __future__ import annotations

from celery import current_app
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from core import warmup


@require_GET
@never_cache
def health(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def check_database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        if cursor.fetchone() is None:
            return "pgvector is not available on the database server"
    return "ok"


def check_broker() -> str:
    with current_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)
    return "ok"


@require_GET
@never_cache
def ready(request: HttpRequest) -> JsonResponse:
    checks: dict[str, str] = {}
    for name, probe in (("database", check_database), ("broker", check_broker)):
        try:
            checks[name] = probe()
        except Exception as exc:  # a readiness probe reports, it never raises
            checks[name] = f"unavailable: {exc.__class__.__name__}"
    # A serving process still loading its models answers slowly: not ready yet.
    models = warmup.state()
    if models is not None:
        checks["models"] = models
    ok = all(value == "ok" for value in checks.values())
    return JsonResponse(
        {"status": "ready" if ok else "not_ready", "checks": checks}, status=200 if ok else 503
    )
