"""Test settings: the same stack as development, with faster password hashing.

The test run gets a broker folder of its own, so a development worker running on
the same machine never picks up a test's task (and the other way round). Worker
processes started by the tests inherit it through the environment.
"""

import os
import tempfile

os.environ.setdefault("FEDMEM_ENV", "test")
# No background SDK imports in test processes (tests import what they use).
os.environ.setdefault("FEDMEM_ENGINES_PRELOAD", "false")
os.environ.setdefault("FEDMEM_BROKER_DIR", tempfile.mkdtemp(prefix="fedmem-test-broker-"))
# Exported audit anchors of one run stay out of the next (and of development's).
os.environ.setdefault("FEDMEM_AUDIT_ANCHOR_DIR", tempfile.mkdtemp(prefix="fedmem-test-anchors-"))

from .base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING["root"]["level"] = "WARNING"  # noqa: F405

# One test database per run, so two runs on one machine (two worktrees, an editor
# and a terminal) never drop each other's database. conftest.py removes the ones
# whose run died without cleaning up.
DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{os.getpid()}"}  # noqa: F405
# Transactional tests flush every table, the audit trail included (core.database.seal).
AUDIT_TABLE_TRUNCATE_GRANT = True
