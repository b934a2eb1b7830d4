"""The database is always a real PostgreSQL with pgvector."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from core.database import parse_database_url

ROOT = Path(__file__).resolve().parents[2]


def test_parse_database_url():
    parsed = parse_database_url("postgres://u%40x:p%2Fw@db.example:6543/fedmem?sslmode=require")
    assert parsed["USER"] == "u@x" and parsed["PASSWORD"] == "p/w"
    assert parsed["HOST"] == "db.example" and parsed["PORT"] == "6543"
    assert parsed["NAME"] == "fedmem" and parsed["OPTIONS"] == {"sslmode": "require"}
    socket_dir = parse_database_url("postgresql://postgres@/fedmem?host=/run/pg")
    assert socket_dir["HOST"] == "/run/pg" and socket_dir["OPTIONS"] == {}


@pytest.mark.parametrize(
    "url", ["sqlite:///db.sqlite3", "mysql://x/y", "postgres://host", "postgres://h:notaport/db"]
)
def test_parse_database_url_rejects(url):
    with pytest.raises(ImproperlyConfigured):
        parse_database_url(url)


@pytest.mark.django_db
def test_tests_run_on_postgres_with_pgvector():
    assert connection.vendor == "postgresql"
    assert settings.EMBEDDED_DATABASE is True
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        assert cursor.fetchone() is not None
        cursor.execute("SELECT '[1,0,0]'::vector <=> '[0,1,0]'::vector")
        assert cursor.fetchone()[0] == pytest.approx(1.0)


def _machine_postgres() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=1):
            return True
    except OSError:
        return False


@pytest.mark.skipif(not _machine_postgres(), reason="no PostgreSQL without pgvector on 127.0.0.1:5432")
def test_server_without_pgvector_stops_with_the_fix():
    """The machine's own PostgreSQL has no pgvector: fedmem must refuse it clearly."""
    env = {
        **os.environ,
        "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/postgres",
        "DJANGO_SETTINGS_MODULE": "fedmem_site.settings.base",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--plan"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if (
        "vector" in (result.stdout + result.stderr)
        and "available" in result.stderr
        and result.returncode == 0
    ):
        pytest.skip("this PostgreSQL has pgvector")
    assert result.returncode != 0
    assert "has no pgvector extension" in result.stderr
    assert "Fix:" in result.stderr and "DATABASE_URL" in result.stderr


def test_embedded_server_is_reused_across_processes():
    """A second process attaches to the running server instead of starting another."""
    code = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='fedmem_site.settings.test'; django.setup();"
        "from django.conf import settings; print(settings.DATABASES['default']['HOST'])"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == settings.DATABASES["default"]["HOST"]


def test_a_statement_run_again_is_prepared_once_on_the_server(db):
    """A statement run on a connection more often than FEDMEM_DB_PREPARE_THRESHOLD is
    prepared there; its parameters are bound on the server, never made statement text."""
    sql = "SELECT count(*) FROM memory_item WHERE tenant_id = %s AND content = %s"
    threshold = settings.DATABASES["default"]["OPTIONS"]["prepare_threshold"]
    with connection.cursor() as cursor:
        for n in range(threshold + 1):
            cursor.execute(sql, [uuid.uuid4(), f"it's {n}'; DROP TABLE memory_item; --"])
            assert cursor.fetchone() == (0,)
        cursor.execute(
            "SELECT parameter_types::text[], generic_plans + custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE %s",
            ["%FROM memory_item WHERE tenant_id = $1 AND content = $2%"],
        )
        [(types, runs)] = cursor.fetchall()
        assert types == ["uuid", "text"] and runs >= 1


def test_the_app_connects_as_a_role_that_is_not_superuser(db):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_user, rolsuper, rolcreatedb, rolcreaterole, rolbypassrls "
            "FROM pg_roles WHERE rolname = current_user"
        )
        assert cursor.fetchone() == ("fedmem", False, True, False, False)
        # Test databases are created by that role from template1, which has pgvector.
        cursor.execute("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()")
        assert cursor.fetchone() == ("fedmem",)


def test_a_database_made_as_postgres_moves_to_the_app_role_on_start(db):
    """A ``var/`` database from before the app role: every object owned by the
    superuser. Provisioning (run by every process at start) gives the database and
    its objects to the app role, and the audit table stays the superuser's."""
    import importlib
    import uuid

    from psycopg import sql

    from core.database import provision, superuser_connection

    trigger = importlib.import_module("governance.migrations.0003_audit_append_only").FORWARD

    params = connection.settings_dict
    name = f"legacy_{uuid.uuid4().hex[:12]}"
    with superuser_connection({**params, "NAME": "postgres"}) as su:
        su.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        with superuser_connection({**params, "NAME": name}) as su:
            su.execute("CREATE TABLE memory_x (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY)")
            su.execute("CREATE SEQUENCE loose_seq")
            su.execute("CREATE VIEW memory_v AS SELECT id FROM memory_x")
            su.execute("CREATE TABLE governance_auditevent (id bigint PRIMARY KEY, data text)")
            su.execute(trigger)
        provision(params["HOST"], name)
        with superuser_connection({**params, "NAME": name}) as su:
            owners = dict(
                su.execute(
                    "SELECT relname, pg_get_userbyid(relowner) FROM pg_class "
                    "WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'v', 'S')"
                ).fetchall()
            )
            function = su.execute(
                "SELECT pg_get_userbyid(proowner) FROM pg_proc WHERE proname = 'fedmem_audit_refuse_change'"
            ).fetchone()
            database = su.execute(
                "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s", [name]
            ).fetchone()
            vector = su.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
        assert owners == {
            "memory_x": "fedmem",
            "memory_x_id_seq": "fedmem",
            "loose_seq": "fedmem",
            "memory_v": "fedmem",
            "governance_auditevent": "postgres",
        }
        assert function == ("postgres",) and database == ("fedmem",) and vector == (1,)
        provision(params["HOST"], name)  # idempotent: a second start changes nothing
    finally:
        with superuser_connection({**params, "NAME": "postgres"}) as su:
            su.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
