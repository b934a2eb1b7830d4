"""Test settings: the same stack as development, with faster password hashing.

The test run gets a broker folder of its own, so a development worker running on
the same machine never picks up a test's task (and the other way round). Worker
processes started by the tests inherit it through the environment.
"""

import os
import tempfile

os.environ.setdefault("FEDMEM_ENV", "test")
# pytest-xdist workers inherit the controlling process's environment, folders included:
# each worker takes a broker and an anchor folder of its own (so one worker's Celery
# processes never take another's tasks), which the processes it starts inherit in turn.
_xdist_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _xdist_worker and os.environ.get("FEDMEM_TEST_FOLDERS_OF") != _xdist_worker:
    os.environ["FEDMEM_BROKER_DIR"] = tempfile.mkdtemp(prefix=f"fedmem-test-broker-{_xdist_worker}-")
    os.environ["FEDMEM_AUDIT_ANCHOR_DIR"] = tempfile.mkdtemp(prefix=f"fedmem-test-anchors-{_xdist_worker}-")
    os.environ["FEDMEM_TEST_FOLDERS_OF"] = _xdist_worker
# No background SDK imports in test processes (tests import what they use).
os.environ.setdefault("FEDMEM_ENGINES_PRELOAD", "false")
os.environ.setdefault("FEDMEM_BROKER_DIR", tempfile.mkdtemp(prefix="fedmem-test-broker-"))
# Exported audit anchors of one run stay out of the next (and of development's).
os.environ.setdefault("FEDMEM_AUDIT_ANCHOR_DIR", tempfile.mkdtemp(prefix="fedmem-test-anchors-"))

from .base import *  # noqa: E402, F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING["root"]["level"] = "WARNING"  # noqa: F405

# One test database per run, so two runs on one machine (two worktrees, an editor
# and a terminal) never drop each other's database; pytest-django adds ``_gw<N>`` for
# each pytest-xdist worker. conftest.py removes the ones whose run died without
# cleaning up.
DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{os.getpid()}"}  # noqa: F405
# Transactional tests flush every table, the audit trail included (core.database.seal).
AUDIT_TABLE_TRUNCATE_GRANT = True
