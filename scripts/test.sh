#!/usr/bin/env bash
# Every check CI runs, in order: services, lint, import contracts, types, migrations, Django checks, tests.
set -euo pipefail
cd "$(dirname "$0")/.."

# Redis serves the production-path tests (Celery broker, Channels layer).
if command -v redis-server >/dev/null 2>&1 && ! (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; then
  mkdir -p var/redis
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir "$PWD/var/redis" --logfile "$PWD/var/redis/redis.log"
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null && break; sleep 0.1; done
fi

# The browser tests drive Debian's Chromium (Playwright never downloads a browser).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "== installing Debian's chromium for the browser tests"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

echo "== ruff"
ruff check .
ruff format --check .
echo "== import contracts (layers, api/ imports) and import rules (private names, cycles)"
lint-imports
python scripts/check_imports.py
echo "== mypy"
mypy
echo "== migrations"
DJANGO_SETTINGS_MODULE=fedmem_site.settings.test python manage.py makemigrations --check --dry-run
echo "== django checks"
DJANGO_SETTINGS_MODULE=fedmem_site.settings.test python manage.py check --fail-level WARNING
echo "== tests"
# Two processes (pytest-xdist), one test database each on the one embedded server; a
# file's tests stay in one process, so module fixtures (Chromium) start once.
# FEDMEM_TEST_WORKERS=0 runs in this process alone; arguments after it still win.
python -m pytest -n "${FEDMEM_TEST_WORKERS:-2}" --dist loadfile "$@"
