"""The database is always a real PostgreSQL with pgvector."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
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
