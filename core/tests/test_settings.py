"""Bad or missing configuration stops fedmem at start-up with a message naming the variable."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def start(**env: str) -> subprocess.CompletedProcess:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("FEDMEM_", "DATABASE_URL"))}
    full = {**inherited, "DJANGO_SETTINGS_MODULE": "fedmem_site.settings.base", **env}
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FEDMEM_ENV": "staging"}, "FEDMEM_ENV='staging' must be one of"),
        ({"FEDMEM_DEBUG": "perhaps"}, "FEDMEM_DEBUG='perhaps' is not a boolean"),
        ({"FEDMEM_DB_POOL_SIZE": "0", "FEDMEM_DB_CONN_MAX_AGE": "-1"}, "FEDMEM_DB_CONN_MAX_AGE=-1 is below"),
        (
            {"FEDMEM_AUTH_FAILURES_PER_ACCOUNT": "ten"},
            "FEDMEM_AUTH_FAILURES_PER_ACCOUNT='ten' must look like",
        ),
        ({"FEDMEM_SESSION_SECONDS": "5"}, "FEDMEM_SESSION_SECONDS=5 is below the minimum"),
        ({"FEDMEM_DB_POOL_SIZE": "many"}, "FEDMEM_DB_POOL_SIZE='many'"),
        ({"FEDMEM_ENV": "production"}, "FEDMEM_SECRET_KEY (or FEDMEM_SECRET_KEY_FILE) must be set"),
        (
            {"FEDMEM_ENV": "production", "FEDMEM_SECRET_KEY": "x" * 60},
            "FEDMEM_AUDIT_KEY (or FEDMEM_AUDIT_KEY_FILE)",
        ),
        (
            {"FEDMEM_ENV": "production", "FEDMEM_SECRET_KEY": "x" * 60, "FEDMEM_AUDIT_KEY": "a" * 40},
            "FEDMEM_ALLOWED_HOSTS must list",
        ),
        ({"FEDMEM_AUDIT_KEY": "short"}, "FEDMEM_AUDIT_KEY must be at least 32 characters"),
        ({"FEDMEM_ENV": "production", "FEDMEM_SECRET_KEY": "short"}, "at least 50 characters"),
        ({"DATABASE_URL": "sqlite:///db.sqlite3"}, "DATABASE_URL must be a postgres"),
        ({"FEDMEM_BROKER_POLL_SECONDS": "0"}, "FEDMEM_BROKER_POLL_SECONDS=0.0 is below the minimum"),
    ],
)
def test_bad_configuration_fails_loudly(env, message):
    result = start(**env)
    assert result.returncode != 0
    assert message in result.stderr


def test_production_settings_load_with_what_they_require():
    result = start(
        FEDMEM_ENV="production",
        FEDMEM_SECRET_KEY="k" * 64,
        FEDMEM_AUDIT_KEY="a" * 48,
        FEDMEM_ALLOWED_HOSTS="fedmem.example",
        DATABASE_URL="postgres://nobody@127.0.0.1:1/none",  # never connected to by setup()
    )
    assert result.returncode == 0, result.stderr


def _database_settings(**extra: str) -> list[str]:
    """The pool's largest size and CONN_MAX_AGE under these variables."""
    return _printed(
        "d = s.DATABASES['default']; print(d.get('OPTIONS', {}).get('pool', {}).get('max_size', 'off'), "
        "d['CONN_MAX_AGE'])",
        **extra,
    )


def _printed(statement: str, **extra: str) -> list[str]:
    """What ``statement`` prints (``s`` the settings) in a process started with these
    variables and no others of fedmem's."""
    code = f"import django; django.setup(); from django.conf import settings as s; {statement}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FEDMEM_", "DATABASE_URL"))}
    env.update(
        DJANGO_SETTINGS_MODULE="fedmem_site.settings.base",
        DATABASE_URL="postgres://nobody@127.0.0.1:1/none",
        **extra,
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_a_pool_size_turns_on_psycopg_pooling_without_persistent_connections():
    assert _database_settings(FEDMEM_DB_POOL_SIZE="12") == ["12", "0"]


def test_by_default_connections_come_from_a_pool_and_none_is_kept_per_request():
    # Under ASGI a kept connection is never reused by the next request; it leaks.
    assert _database_settings() == ["8", "0"]
    assert _database_settings(FEDMEM_DB_POOL_SIZE="0") == ["off", "0"]


def _binding(**extra: str) -> list[str]:
    return _printed(
        "o = s.DATABASES['default'].get('OPTIONS', {}); "
        "print(o.get('server_side_binding', 'client'), o.get('prepare_threshold', 'never'))",
        **extra,
    )


def test_statements_run_again_are_prepared_on_the_server_unless_turned_off():
    assert _binding() == ["True", "5"]
    assert _binding(FEDMEM_DB_PREPARE_THRESHOLD="2") == ["True", "2"]
    # Behind a transaction-pooling proxy: parameters bound in the client, nothing prepared.
    assert _binding(FEDMEM_DB_PREPARE_THRESHOLD="0") == ["client", "never"]


def test_check_deploy_is_clean_with_production_settings():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FEDMEM_", "DATABASE_URL"))}
    env.update(
        DJANGO_SETTINGS_MODULE="fedmem_site.settings.base",
        FEDMEM_ENV="production",
        FEDMEM_SECRET_KEY=secrets.token_urlsafe(64),
        FEDMEM_AUDIT_KEY=secrets.token_urlsafe(48),
        FEDMEM_ALLOWED_HOSTS="fedmem.example",
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert "no issues" in result.stdout


def test_redis_url_switches_channels_and_cache_and_broker_url_switches_celery():
    code = (
        "import django; django.setup(); from django.conf import settings as s;"
        "print(s.CHANNEL_LAYERS['default']['BACKEND']); print(s.CACHES['default']['BACKEND']);"
        "from fedmem_site.celery import app; print(app.conf.broker_url)"
    )
    inherited = {
        k: v for k, v in os.environ.items() if not k.startswith(("FEDMEM_", "DATABASE_URL", "CELERY_"))
    }
    env = {
        **inherited,
        "DJANGO_SETTINGS_MODULE": "fedmem_site.settings.base",
        "REDIS_URL": "redis://127.0.0.1:6379/3",
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/4",
        "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none",
    }
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "channels_redis.core.RedisChannelLayer",
        "django.core.cache.backends.redis.RedisCache",
        "redis://127.0.0.1:6379/4",
    ]


@pytest.mark.parametrize(("given", "expected"), [(None, 1), ("2", 2)])
def test_openblas_runs_one_thread_per_process_unless_the_operator_says_otherwise(given, expected):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    probe = (
        "import fedmem_site, numpy, threadpoolctl; "
        "pools = [p for p in threadpoolctl.threadpool_info() if p['internal_api'] == 'openblas']; "
        "print(max(p['num_threads'] for p in pools))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) == expected
