"""The authorization matrix: every API operation x every role x five relations.

Operations come from the OpenAPI schema (drf-spectacular walks the URL resolver),
so a new route is picked up by itself; ``authz_matrix.yaml`` holds what each role
must get, and ``test_every_operation_has_a_matrix_row`` names any operation without
a row. Relations, for the object an operation addresses (the last id in its path):

* own: an object of ``world.agent`` (the developer ``owner``'s agent, the agent key's
  own agent); tenant-level objects (erasure requests, holds, jobs) of acme;
* sibling: the same kind of object belonging to ``world.sibling`` (same tenant);
* foreign: the object of tenant globex;
* deleted: an object that existed and was deleted (a forgotten item, a revoked key,
  a deactivated agent, a removed engine, a deleted row);
* nonexistent: an id that never existed.

Nested objects are addressed through the caller's own agent, so the sibling and
foreign relations there are the cross-object (IDOR) probe. Routes without an id
(lists, searches, recall, creates) get the relation's ids in their body/query
placeholders, and every response is scanned for the foreign, sibling and deleted
markers the caller must never see.

A leak is: a foreign, deleted (or, for a caller without access to it, sibling)
object answering differently from a nonexistent id (an existence oracle or
access), or a marker of such an object in a response body. Every request runs in
a savepoint that is rolled back, so one role's delete never changes the next
role's view.

``FEDMEM_AUTHZ_RECORD=1`` rewrites the expectations from what the server answers
(keeping each row's ``request``); review the diff before committing it.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.utils import timezone
from rest_framework.test import APIClient

from conftest import bearer, rolled_back
from governance.models import Candidate, ErasureRequest, Job, LegalHold, Role
from governance.services.agents import agent_update, api_key_create, api_key_revoke
from governance.services.candidates import candidate_import
from governance.services.erasure import erasure_request_create
from governance.services.holds import legal_hold_place
from governance.services.jobs import self_check_start
from governance.tests import factories as f
from memory.enforcement import system_access
from memory.models import ContradictionDecision
from memory.services.items import MemoryDraft, memory_forget, memory_remember
from memory.services.knowledge import knowledge_dataset_delete, knowledge_ingest
from memory.services.sessions import session_message_append
from memory.text import content_hash
from providers.models import EngineInstance, ProviderWrite

MATRIX = Path(__file__).with_name("authz_matrix.yaml")
ROLES = ("anonymous", "platform_admin", "tenant_admin", "developer", "security_officer", "auditor", "agent")
RELATIONS = ("own", "sibling", "foreign", "deleted", "nonexistent")
# Callers that hold no right on world.sibling: for them a sibling object must look nonexistent.
NO_SIBLING_ACCESS = {"developer", "agent"}
# Agents are deactivated, never deleted: a deactivated agent stays visible to everyone who
# may view it (and answers 409 agent_inactive to any use), so for them it is no oracle.
VIEWERS = {"platform_admin", "tenant_admin", "developer", "security_officer", "auditor"}
METHODS = ("get", "post", "put", "patch", "delete")


def api_operations() -> list[str]:
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    return sorted(
        f"{method.upper()} {path}"
        for path, item in schema["paths"].items()
        for method in item
        if method in METHODS
    )


def load_matrix() -> dict[str, dict[str, Any]]:
    return yaml.safe_load(MATRIX.read_text()) or {}


def path_params(operation: str) -> list[str]:
    import re

    return re.findall(r"\{(\w+)\}", operation.split(" ", 1)[1])


def default_expectation(row: dict[str, Any], operation: str, relation: str, role: str) -> int:
    own = row["own"][role]
    if relation == "own" or not path_params(operation):
        return own
    # An object the caller cannot reach answers like one that does not exist; a
    # refusal that comes before the lookup (no key, wrong role) stays what it was.
    return own if own in (401, 403) else 404


def expectation(row: dict[str, Any], operation: str, relation: str, role: str) -> int:
    overrides = row.get(relation) or {}
    if role in overrides:
        return overrides[role]
    return default_expectation(row, operation, relation, role)


# --- the world every probe runs against -------------------------------------------------


@dataclass
class Probe:
    clients: dict[str, APIClient]
    ids: dict[str, dict[str, str]]  # path parameter -> relation -> id
    my_keys: dict[str, dict[str, str]]  # role -> relation -> key id for /v1/me/keys/{key_id}
    placeholders: dict[str, dict[str, str]]  # relation -> {name: value} for bodies and queries
    forbidden: dict[str, set[str]] = field(default_factory=dict)  # role -> markers it must not see


def _item(agent, content: str, **fields) -> str:
    fields.setdefault("user_id", "cust-1")
    outcome = memory_remember(access=system_access(agent), draft=MemoryDraft(content=content, **fields))
    return str(outcome.item.pk)


def _candidate(agent, content: str) -> Candidate:
    return candidate_import(
        agent=agent,
        provider="mem0-shared",
        external_id=f"ext-{uuid.uuid4().hex[:8]}",
        record_kind="fact",
        content=content,
        subject="jane",
        captured_at=timezone.now(),
        content_hash=content_hash(content),
    )


@pytest.fixture
def engine_server():
    from providers.tests.engines import custom_engine
    from providers.tests.servers import LocalServer

    # The matrix runs for a minute or two: outlive the default self-stop.
    server = custom_engine(server=LocalServer(max_seconds=900))
    yield server
    server.stop()


@pytest.fixture
def probe(world, engine_server, settings) -> Probe:
    from providers.tests.engines import declare

    settings.FEDMEM_ENGINES_ALLOW_HTTP = True
    w = world
    padmin = f.member(w.tenant, Role.PLATFORM_ADMIN, username="padmin")
    users = {
        "platform_admin": padmin,
        "tenant_admin": w.admin,
        "developer": w.owner,
        "security_officer": w.officer,
        "auditor": w.auditor,
    }
    clients = {"anonymous": APIClient(), "agent": bearer(f.agent_key(w.agent))}
    clients.update({role: bearer(f.user_key(user, w.tenant)) for role, user in users.items()})

    gone_agent = f.agent(w.tenant, w.owner, name="retired-bot")
    agent_update(agent=gone_agent, actor=w.admin, is_active=False)

    own_item = _item(w.agent, "Acme own marker: the invoice desk opens at nine.")
    sibling_item = _item(w.sibling, "Sibling marker zebra-lantern: ops rotates keys on Fridays.")
    foreign_item = _item(w.foreign_agent, "Foreign marker globex-orchid: Globex ships on Tuesdays.")
    gone_item = _item(w.agent, "Deleted marker quartz-heron: the old vault code was 4411.")
    memory_forget(access=system_access(w.agent), item_id=gone_item)

    for agent, session, text in (
        (w.agent, "s-own", "Own session: customer asked about the invoice desk."),
        (w.sibling, "s-sibling", "Sibling session marker zebra-lantern-chat."),
        (w.foreign_agent, "s-foreign", "Foreign session marker globex-orchid-chat."),
    ):
        session_message_append(access=system_access(agent), session_id=session, role="user", content=text)

    def agent_key_id(agent) -> str:
        key, _ = api_key_create(tenant=agent.tenant, agent=agent, name="probe")
        return str(key.pk)

    revoked_key, _ = api_key_create(tenant=w.tenant, agent=w.agent, name="revoked")
    api_key_revoke(key=revoked_key, actor=w.admin)

    own_candidate = _candidate(w.agent, "Own candidate: prefers email.")
    sibling_candidate = _candidate(w.sibling, "Sibling candidate marker zebra-lantern-cand.")
    foreign_candidate = _candidate(w.foreign_agent, "Foreign candidate marker globex-orchid-cand.")
    gone_candidate = _candidate(w.agent, "Deleted candidate marker quartz-heron-cand.")
    gone_candidate_id = str(gone_candidate.pk)
    Candidate.objects.filter(pk=gone_candidate.pk).delete()

    foreign_officer = f.member(w.other_tenant, Role.SECURITY_OFFICER, username="globex-officer")

    def erasure(tenant, actor, agent=None) -> str:
        request = erasure_request_create(
            tenant=tenant,
            actor=actor,
            subject="subject-" + uuid.uuid4().hex[:6],
            scope="agent" if agent else "tenant",
            agent=agent,
            reason="probe",
        )
        return str(request.pk)

    gone_erasure = erasure(w.tenant, w.officer)
    ErasureRequest.objects.filter(pk=gone_erasure).delete()

    def hold(tenant, actor, agent) -> str:
        return str(
            legal_hold_place(tenant=tenant, actor=actor, target="agent", agent=agent, reason="probe").pk
        )

    gone_hold = hold(w.tenant, w.officer, w.agent)
    LegalHold.objects.filter(pk=gone_hold).delete()

    def dataset(agent, name: str, text: str) -> str:
        knowledge_ingest(access=system_access(agent), texts=[text], dataset_name=name)
        return name

    own_dataset = dataset(w.agent, "own-docs", "Own dataset: the invoice desk handbook.")
    sibling_dataset = dataset(w.sibling, "sibling-docs", "Sibling dataset marker zebra-lantern-docs.")
    foreign_dataset = dataset(w.foreign_agent, "globex-docs", "Foreign dataset marker globex-orchid-docs.")
    gone_dataset = dataset(w.agent, "gone-docs", "Deleted dataset marker quartz-heron-docs.")
    knowledge_dataset_delete(access=system_access(w.agent), name=gone_dataset)

    def decision(agent, subject: str) -> str:
        access = system_access(agent)
        keys = {"user_id": "cust-1"}
        first = MemoryDraft(content=f"The {subject} service runs on MySQL.", **keys)
        memory_remember(access=access, draft=first)
        draft = MemoryDraft(
            content=f"The {subject} service runs on PostgreSQL.", check_contradictions=True, **keys
        )
        out = memory_remember(access=access, draft=draft)
        assert out.contradictions, "the probe's sentence pair must be read as a contradiction"
        return str(out.contradictions[0].pk)

    gone_decision = decision(w.agent, "archive")
    ContradictionDecision.objects.filter(pk=gone_decision).delete()
    # Before the agent holds below: a held fact is never retired, so no decision.
    decisions = {
        "own": decision(w.agent, "billing"),
        "sibling": decision(w.sibling, "ledger"),
        "foreign": decision(w.foreign_agent, "shipping"),
        "deleted": gone_decision,
        "nonexistent": "987654321",
    }

    gone_job = self_check_start(tenant=w.tenant, requested_by=w.owner)
    gone_job_id = str(gone_job.pk)
    Job.objects.filter(pk=gone_job.pk).delete()

    server = engine_server
    declare("acme-custom", server.url, tenant=w.tenant)
    declare("shared-custom", server.url)
    declare("globex-custom", server.url, tenant=w.other_tenant)
    declare("gone-custom", server.url, tenant=w.tenant).delete()

    def provider_write(tenant, agent) -> str:
        engine = EngineInstance.objects.get(pk="shared-custom")
        row = ProviderWrite.objects.create(
            id=uuid.uuid4(), tenant=tenant, agent=agent, engine=engine, operation="remember"
        )
        return str(row.pk)

    gone_write = provider_write(w.tenant, w.agent)
    ProviderWrite.objects.filter(pk=gone_write).delete()

    ids = {
        "agent_id": {
            "own": str(w.agent.pk),
            "sibling": str(w.sibling.pk),
            "foreign": str(w.foreign_agent.pk),
            "deleted": str(gone_agent.pk),
            "nonexistent": str(uuid.uuid4()),
        },
        "item_id": {
            "own": own_item,
            "sibling": sibling_item,
            "foreign": foreign_item,
            "deleted": gone_item,
            "nonexistent": str(uuid.uuid4()),
        },
        "key_id": {
            "own": agent_key_id(w.agent),
            "sibling": agent_key_id(w.sibling),
            "foreign": agent_key_id(w.foreign_agent),
            "deleted": str(revoked_key.pk),
            "nonexistent": str(uuid.uuid4()),
        },
        "session_id": {
            "own": "s-own",
            "sibling": "s-sibling",
            "foreign": "s-foreign",
            "deleted": "s-never-written",
            "nonexistent": "s-" + uuid.uuid4().hex[:8],
        },
        "candidate_id": {
            "own": str(own_candidate.pk),
            "sibling": str(sibling_candidate.pk),
            "foreign": str(foreign_candidate.pk),
            "deleted": gone_candidate_id,
            "nonexistent": str(uuid.uuid4()),
        },
        "request_id": {
            "own": erasure(w.tenant, w.officer, agent=w.agent),
            "sibling": erasure(w.tenant, w.admin, agent=w.sibling),
            "foreign": erasure(w.other_tenant, foreign_officer, agent=w.foreign_agent),
            "deleted": gone_erasure,
            "nonexistent": str(uuid.uuid4()),
        },
        "hold_id": {
            "own": hold(w.tenant, w.officer, w.agent),
            "sibling": hold(w.tenant, w.officer, w.sibling),
            "foreign": hold(w.other_tenant, foreign_officer, w.foreign_agent),
            "deleted": gone_hold,
            "nonexistent": str(uuid.uuid4()),
        },
        "job_id": {
            "own": str(self_check_start(tenant=w.tenant, requested_by=w.owner).pk),
            "sibling": str(self_check_start(tenant=w.tenant, requested_by=w.admin).pk),
            "foreign": str(self_check_start(tenant=w.other_tenant, requested_by=w.outsider).pk),
            "deleted": gone_job_id,
            "nonexistent": str(uuid.uuid4()),
        },
        "dataset_id": {
            "own": own_dataset,
            "sibling": sibling_dataset,
            "foreign": foreign_dataset,
            "deleted": gone_dataset,
            "nonexistent": "no-such-docs",
        },
        "decision_id": decisions,
        "write_id": {
            "own": provider_write(w.tenant, w.agent),
            "sibling": provider_write(w.tenant, w.sibling),
            "foreign": provider_write(w.other_tenant, w.foreign_agent),
            "deleted": gone_write,
            "nonexistent": str(uuid.uuid4()),
        },
        "engine_id": {
            "own": "acme-custom",
            "sibling": "shared-custom",
            "foreign": "globex-custom",
            "deleted": "gone-custom",
            "nonexistent": "no-such-engine",
        },
    }

    # /v1/me/keys/{key_id}: "own" is a second key of the caller itself.
    teammate_key, _ = api_key_create(tenant=w.tenant, user=w.teammate, name="teammate")
    outsider_key, _ = api_key_create(tenant=w.other_tenant, user=w.outsider, name="outsider")
    revoked_user_key, _ = api_key_create(tenant=w.tenant, user=w.owner, name="revoked")
    api_key_revoke(key=revoked_user_key, actor=w.owner)
    my_keys = {}
    for role in ROLES:
        user = users.get(role)
        own = api_key_create(tenant=w.tenant, user=user, name="second")[0].pk if user else revoked_key.pk
        my_keys[role] = {
            "own": str(own),
            "sibling": str(teammate_key.pk),
            "foreign": str(outsider_key.pk),
            "deleted": str(revoked_user_key.pk),
            "nonexistent": str(uuid.uuid4()),
        }

    user_ids = {
        "own": str(w.teammate.pk),
        "sibling": str(w.admin.pk),
        "foreign": str(w.outsider.pk),
        "deleted": str(f.UserFactory(username="gone-user", is_active=False).pk),
        "nonexistent": "987654321",
    }
    placeholders = {
        relation: {
            "agent": ids["agent_id"][relation],
            "item": ids["item_id"][relation],
            "engine": ids["engine_id"][relation],
            "user": user_ids[relation],
        }
        for relation in RELATIONS
    }

    foreign_markers = {
        "globex-orchid",
        str(w.foreign_agent.pk),
        foreign_item,
        str(foreign_candidate.pk),
        ids["request_id"]["foreign"],
        ids["hold_id"]["foreign"],
        ids["job_id"]["foreign"],
        ids["write_id"]["foreign"],
    }
    sibling_markers = {"zebra-lantern", sibling_item, str(sibling_candidate.pk), ids["write_id"]["sibling"]}
    deleted_markers = {"quartz-heron"}
    forbidden = {role: foreign_markers | deleted_markers for role in ROLES}
    for role in NO_SIBLING_ACCESS:
        forbidden[role] |= sibling_markers
    return Probe(clients, ids, my_keys, placeholders, forbidden)


# --- running one probe ---------------------------------------------------------------


def _fill(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        for name, replacement in names.items():
            value = value.replace("{" + name + "}", replacement)
        return value
    if isinstance(value, list):
        return [_fill(v, names) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, names) for k, v in value.items()}
    return value


def _url(operation: str, relation: str, role: str, probe: Probe) -> str:
    path = operation.split(" ", 1)[1]
    params = path_params(operation)
    for index, name in enumerate(params):
        # The last id is the object under test; the ones before it are the caller's own.
        rel = relation if index == len(params) - 1 else "own"
        if name == "key_id" and path.startswith("/v1/me/"):
            value = probe.my_keys[role][rel]
        else:
            if name not in probe.ids:
                raise AssertionError(
                    f"{operation}: no probe ids for path parameter {{{name}}}; "
                    "add them to the probe fixture in fedmem_site/tests/test_authz_matrix.py"
                )
            value = probe.ids[name][rel]
        path = path.replace("{" + name + "}", value)
    return path


def _send(probe: Probe, operation: str, row: dict[str, Any], relation: str, role: str):
    method = operation.split(" ", 1)[0].lower()
    request = _fill(row.get("request") or {}, probe.placeholders[relation])
    url = _url(operation, relation, role, probe)
    client = probe.clients[role]
    kwargs: dict[str, Any] = {}
    if method == "get":
        kwargs["data"] = request.get("query") or {}
    elif "json" in request or method in ("post", "put", "patch"):
        kwargs = {"data": request.get("json", {}), "format": "json"}
    with rolled_back():
        response = getattr(client, method)(url, **kwargs)
    return response


def _body(response) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode(errors="replace")
    return response.content.decode(errors="replace")


def test_every_operation_has_a_matrix_row(db):
    operations = set(api_operations())
    matrix = load_matrix()
    missing = sorted(operations - set(matrix))
    stale = sorted(set(matrix) - operations)
    assert not missing, "operations without a row in fedmem_site/tests/authz_matrix.yaml:\n  " + "\n  ".join(
        missing
    )
    assert not stale, "rows for operations that no longer exist:\n  " + "\n  ".join(stale)
    for operation in sorted(operations):
        row = matrix[operation]
        assert set(row.get("own") or {}) == set(ROLES), f"{operation}: 'own' must name every role {ROLES}"
        for relation in RELATIONS[1:]:
            assert set(row.get(relation) or {}) <= set(ROLES), f"{operation}: unknown role under {relation}"
        assert set(row) <= {"request", "by_design", *RELATIONS}, f"{operation}: unknown keys {set(row)}"
        for relation, roles in (row.get("by_design") or {}).items():
            assert relation in RELATIONS[1:] and set(roles) <= set(ROLES), f"{operation}: bad by_design"


def test_authorization_matrix(probe, capsys):
    matrix = load_matrix()
    operations = [op for op in api_operations() if op in matrix]  # the meta-test names the rest
    if os.environ.get("FEDMEM_AUTHZ_ONLY"):  # while working on some routes: "part|part"
        parts = os.environ["FEDMEM_AUTHZ_ONLY"].split("|")
        operations = [op for op in operations if any(part in op for part in parts)]
    observed: dict[tuple[str, str, str], int] = {}
    mismatches: list[str] = []
    leaks: list[str] = []
    spent: Counter[str] = Counter()
    for operation in operations:
        started = time.monotonic()
        row = matrix[operation] or {}
        has_ids = bool(path_params(operation))
        for role in ROLES:
            statuses = {}
            for relation in RELATIONS:
                response = _send(probe, operation, row, relation, role)
                status = response.status_code
                statuses[relation] = status
                observed[(operation, role, relation)] = status
                body = _body(response)
                if status >= 500:
                    mismatches.append(f"{operation} {role} {relation}: server error {status} {body[:300]}")
                wanted = expectation(row, operation, relation, role) if row.get("own") else None
                if wanted is not None and status != wanted:
                    mismatches.append(f"{operation} {role} {relation}: expected {wanted}, got {status}")
                seen = [marker for marker in probe.forbidden[role] if marker in body]
                if seen:
                    leaks.append(f"{operation} {role} {relation}: body holds {seen}")
            # Existence oracle: what the caller may not reach answers like a missing id.
            hidden = ["foreign", "deleted"] + (["sibling"] if role in NO_SIBLING_ACCESS else [])
            visible = row.get("by_design") or {}
            for relation in hidden:
                if role in (visible.get(relation) or []):
                    continue
                if relation == "deleted" and path_params(operation)[-1:] == ["agent_id"] and role in VIEWERS:
                    continue
                if has_ids and statuses[relation] != statuses["nonexistent"]:
                    leaks.append(
                        f"{operation} {role} {relation}: {statuses[relation]} "
                        f"while a nonexistent id gets {statuses['nonexistent']}"
                    )
                elif not has_ids and 200 <= statuses[relation] < 300 < statuses["nonexistent"]:
                    leaks.append(f"{operation} {role} {relation}: accepted while a nonexistent id is refused")

        spent[operation] = time.monotonic() - started
    if os.environ.get("FEDMEM_AUTHZ_PROFILE"):
        print(spent.most_common(12))
    if os.environ.get("FEDMEM_AUTHZ_RECORD"):
        _record(matrix, operations, observed)

    requests = len(observed)
    with capsys.disabled():
        print(
            f"\nauthorization matrix: {len(operations)} operations × {len(ROLES)} roles × "  # noqa: RUF001
            f"{len(RELATIONS)} relations = {requests} requests, {len(leaks)} leaks, "
            f"{len(mismatches)} mismatches; statuses {dict(sorted(Counter(observed.values()).items()))}"
        )
    assert requests == len(operations) * len(ROLES) * len(RELATIONS)
    assert len(operations) == len(matrix) or os.environ.get("FEDMEM_AUTHZ_ONLY")
    assert not leaks, "\n".join(leaks)
    assert not mismatches, "\n".join(mismatches)


def _record(matrix, operations, observed) -> None:
    """Rewrite the expectations from the observed statuses, only overrides beyond the default."""
    for operation in operations:
        row = {k: v for k, v in (matrix[operation] or {}).items() if k in ("request", "by_design")}
        row["own"] = {role: observed[(operation, role, "own")] for role in ROLES}
        for relation in RELATIONS[1:]:
            overrides = {
                role: observed[(operation, role, relation)]
                for role in ROLES
                if observed[(operation, role, relation)]
                != default_expectation(row, operation, relation, role)
            }
            if overrides:
                row[relation] = overrides
        matrix[operation] = row
    header = []
    for line in MATRIX.read_text().splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    lines = list(header)
    for operation in sorted(matrix):
        lines.append(f"{operation}:")
        for key, value in matrix[operation].items():
            if key in ("request", "by_design"):
                lines.append(f"  {key}: {json.dumps(value)}")
            else:
                flow = ", ".join(f"{role}: {status}" for role, status in value.items())
                lines.append(f"  {key}: {{{flow}}}")
    MATRIX.write_text("\n".join(lines) + "\n")
