"""API fuzzing: Schemathesis in-process against the drf-spectacular schema.

Every operation of the schema is fuzzed through the WSGI app (no network) with
positive and negative data, authenticated as the role the authorization matrix says
succeeds on it, with the path ids of real objects from the matrix's probe world, so
the cases reach real data. Each case runs in a savepoint that is rolled back.

``FEDMEM_FUZZ_EXAMPLES`` (default 3) bounds the examples per operation and mode so
the run fits the CI budget; raise it for a deeper manual run.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter

import pytest
from django.core.cache import caches
from django.db import transaction
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable

from conftest import rolled_back
from fedmem_site.tests.test_authz_matrix import (  # noqa: F401  (fixtures)
    ROLES,
    engine_server,
    load_matrix,
    path_params,
    probe,
)

EXAMPLES = int(os.environ.get("FEDMEM_FUZZ_EXAMPLES", "3"))
# The caller to fuzz each operation as: the first role (in this order) the matrix says
# succeeds on its own object.
PREFERENCE = ("agent", "developer", "tenant_admin", "security_officer", "auditor", "platform_admin")


# Checks left out for one operation, each with its reason.
EXEMPT = {
    # A batch validates each item on its own and answers each item's error in a 200/201
    # body (documented): a malformed item is reported, not a rejected batch.
    "POST /v1/memory/agents/{agent_id}/memories/batch": {"negative_data_rejection"},
    # Known leniency, to tighten: DRF's CharField turns a JSON number into its text and
    # django-filter's BooleanFilter reads 1/0; an empty user_id filter means "no filter".
    "POST /v1/agents": {"negative_data_rejection"},
    "GET /v1/memory/legal-holds": {"negative_data_rejection"},
    "GET /v1/memory/agents/{agent_id}/memories": {"negative_data_rejection"},
    # django-filter's ChoiceFilter reads an empty ``?status=`` as "no filter" too.
    "GET /v1/memory/candidates": {"negative_data_rejection"},
}


def _checks():
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        ignored_auth,
        negative_data_rejection,
        response_schema_conformance,
        status_code_conformance,
        use_after_free,
    )

    return [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
        negative_data_rejection,
        ignored_auth,
        use_after_free,
    ]


def _caller(row: dict) -> str | None:
    for role in PREFERENCE:
        if 200 <= row["own"][role] < 300:
            return role
    # Nobody succeeds on the probe's object (a 409 state, say): fuzz past the role gate.
    return next((role for role in PREFERENCE if row["own"][role] not in (401, 403, 404)), "tenant_admin")


@pytest.fixture
def keep_connection():
    """The WSGI handler closes the database connection after each request; the test
    transaction lives on it (Django's test client unhooks the same signal)."""
    from django.core import signals
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def test_fuzz_every_operation(probe, keep_connection, capsys):  # noqa: F811
    import schemathesis
    from django.core.wsgi import get_wsgi_application
    from schemathesis import GenerationMode

    schema = schemathesis.openapi.from_wsgi("/v1/schema", get_wsgi_application())
    matrix = load_matrix()
    checks = _checks()
    tokens = {
        role: c._credentials["HTTP_AUTHORIZATION"] for role, c in probe.clients.items() if role != "anonymous"
    }

    covered: list[str] = []
    cases = 0
    reached_2xx: set[str] = set()
    failures: dict[str, str] = {}
    statuses: Counter[int] = Counter()
    for result in schema.get_all_operations():
        operation = result.ok()
        name = f"{operation.method.upper()} {operation.path}"
        row = matrix.get(name)
        role = _caller(row) if row else None
        if role is None:
            continue
        covered.append(name)
        ids = {}
        for param in path_params(name):
            if param == "key_id" and operation.path.startswith("/v1/me/"):
                ids[param] = probe.my_keys[role]["own"]
            else:
                ids[param] = probe.ids[param]["own"]
        headers = {"Authorization": tokens[role]}
        op_checks = [check for check in checks if check.__name__ not in EXEMPT.get(name, set())]

        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            strategy = operation.as_strategy(generation_mode=mode, path_parameters=ids)

            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                derandomize=True,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            # Called right away, in this iteration: the closure sees this operation's values.
            @given(case=strategy)
            def run(case):
                nonlocal cases
                cases += 1
                # Each case starts with fresh counters: the ignored_auth check sends
                # wrong keys on purpose, and the lockout they earn would otherwise
                # turn every later case into a 429 and fuzz nothing.
                caches["counters"].clear()
                with rolled_back():
                    try:
                        response = case.call_and_validate(headers=headers, checks=op_checks)
                    except (Exception, BaseExceptionGroup) as exc:
                        failures.setdefault(name, f"{case.method} {case.formatted_path}: {exc}"[:1500])
                        response = None
                    finally:
                        transaction.set_rollback(True)
                if response is not None:
                    statuses[response.status_code] += 1
                    if 200 <= response.status_code < 300:
                        reached_2xx.add(name)

            with contextlib.suppress(Unsatisfiable):  # no negative form of an empty request
                run()

    with capsys.disabled():
        print(
            f"\nfuzzing: {len(covered)} operations covered, {cases} cases, {len(failures)} failures, "
            f"{len(reached_2xx)} operations reached a 2xx; statuses {dict(sorted(statuses.items()))}"
        )
    assert not failures, "\n\n".join(f"{name}\n{message}" for name, message in sorted(failures.items()))
    # A throttled case tests the throttle, not the operation.
    assert statuses[429] == 0, f"{statuses[429]} cases were throttled"
    assert len(covered) == len(matrix)
