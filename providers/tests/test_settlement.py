"""Settled writes: a queued Mem0 add, Zep add and Cognee cognify run reach ``settled``
(or ``failed`` with the provider's reason) through the reconcile task, run by a real
Celery worker against the local providers, which process writes after answering."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from providers.adapters.base import NewRecord
from providers.models import AccessControl, ProviderWrite
from providers.services import adapter_for, operation_context
from providers.settlement import write_reconcile, write_track, writes_reconcile_due
from providers.tests.engines import declare
from providers.tests.fakes import cognee as cognee_fake
from providers.tests.fakes import mem0 as mem0_fake
from providers.tests.fakes import zep as zep_fake

KEYS = {
    "FEDMEM_CRED_TEST_MEM0": mem0_fake.API_KEY,
    "FEDMEM_CRED_TEST_ZEP": zep_fake.API_KEY,
    "FEDMEM_CRED_TEST_COGNEE": cognee_fake.STATIC_TOKEN,
}


@pytest.fixture
def providers_up(monkeypatch):
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    fakes = {
        "mem0": mem0_fake.Mem0Platform().start(),
        "zep": zep_fake.ZepFake().start(),
        "cognee": cognee_fake.CogneeFake().start(),
    }
    yield fakes
    for fake in fakes.values():
        fake.stop()


def _engines(fakes):
    def one(provider, url, env):
        return declare(
            f"{provider}-main",
            url,
            provider=provider,
            access_control=AccessControl.PLATFORM_KEY,
            credential_ref=f"env://{env}",
        )

    return {
        "mem0": one("mem0", fakes["mem0"].url, "FEDMEM_CRED_TEST_MEM0"),
        "zep": one("zep", fakes["zep"].url, "FEDMEM_CRED_TEST_ZEP"),
        "cognee": one("cognee", fakes["cognee"].url, "FEDMEM_CRED_TEST_COGNEE"),
    }


def _queued_writes(world, engines, *, enqueue=True):
    """One queued write per provider, each tracked in its own committed transaction."""
    writes = {}
    for provider, engine in engines.items():
        adapter = adapter_for(engine, world.tenant)
        operation = "build_graph" if provider == "cognee" else "remember"
        ctx = operation_context(tenant=world.tenant, operation=operation, agent=world.agent, user_id="alice")
        if provider == "cognee":
            adapter.perform(
                "ingest_knowledge",
                ctx.for_operation("ingest_knowledge"),
                dataset="handbook",
                documents=["Alice leads robotics"],
            )
            result = adapter.perform("build_graph", ctx, dataset="handbook")
        else:
            result = adapter.perform("remember", ctx, record=NewRecord("Alice prefers green tea"))
        assert result.status == "queued"
        with transaction.atomic():
            writes[provider] = write_track(
                engine=engine,
                tenant=world.tenant,
                agent=world.agent,
                ctx=ctx,
                operation=operation,
                result=result,
                enqueue=enqueue,
            )
    return writes


def _wait(write, predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        write.refresh_from_db()
        if predicate(write):
            return write
        time.sleep(0.2)
    raise AssertionError(f"{write} did not get there: {write.detail}")


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_queued_writes_settle_through_the_reconcile_task(world, providers_up, worker_factory):
    worker_factory(FEDMEM_ENGINES_ALLOW_HTTP="1", **KEYS)
    writes = _queued_writes(world, _engines(providers_up))
    # The first check (enqueued after commit) finds every provider still at work.
    for write in writes.values():
        _wait(write, lambda w: w.attempts >= 1)
        assert write.status == ProviderWrite.Status.QUEUED
    # The providers' workers run; the zep one fails with its own reason.
    providers_up["zep"].fail_next = "episode rejected by the content policy"
    for fake in providers_up.values():
        fake.process()
    ProviderWrite.objects.update(next_check_at=timezone.now() - timedelta(seconds=1))  # the delay has passed
    from providers.tasks import reconcile_due

    with transaction.atomic():
        from core.tasks import enqueue_on_commit

        enqueue_on_commit(reconcile_due)
    outcome = {p: _wait(w, lambda w: w.status != ProviderWrite.Status.QUEUED) for p, w in writes.items()}
    print({p: (w.status, w.reason or "-") for p, w in outcome.items()})
    assert outcome["mem0"].status == "settled" and len(outcome["mem0"].external_ids) == 1
    assert outcome["mem0"].external_ids[0] in providers_up["mem0"].memories
    assert outcome["cognee"].status == "settled"
    assert (
        outcome["zep"].status == "failed"
        and outcome["zep"].reason == "episode rejected by the content policy"
    )


def test_a_provider_that_is_down_leaves_the_write_queued(world, providers_up):
    engines = _engines(providers_up)
    write = _queued_writes(world, {"mem0": engines["mem0"]}, enqueue=False)["mem0"]
    providers_up["mem0"].server.stop()
    assert write_reconcile(write_id=write.pk) == "queued"
    write.refresh_from_db()
    assert write.attempts == 1 and write.detail["last_error"] == "unreachable"
    assert write.next_check_at > timezone.now()
    assert writes_reconcile_due()["checked"] == 0  # not due yet


def test_a_write_the_provider_never_settles_fails_with_fedmems_reason(world, providers_up, settings):
    settings.FEDMEM_RECONCILE_MAX_ATTEMPTS = 2
    engines = _engines(providers_up)
    write = _queued_writes(world, {"zep": engines["zep"]}, enqueue=False)["zep"]
    assert write_reconcile(write_id=write.pk) == "queued"
    assert write_reconcile(write_id=write.pk) == "failed"
    write.refresh_from_db()
    assert "after 2 checks" in write.reason


def test_a_cognee_build_marks_its_dataset_built_when_cognee_says_so(world, providers_up):
    from memory.models import Dataset

    engines = _engines(providers_up)
    dataset = Dataset.objects.create(
        tenant=world.tenant,
        agent=world.agent,
        name="handbook",
        engine=engines["cognee"].id,
        graph_status=Dataset.Graph.QUEUED,
    )
    write = _queued_writes(world, {"cognee": engines["cognee"]}, enqueue=False)["cognee"]
    providers_up["cognee"].process()
    assert write_reconcile(write_id=write.pk) == "settled"
    dataset.refresh_from_db()
    assert dataset.graph_status == Dataset.Graph.BUILT
    # Another tenant's copy of the handle is never asked as this tenant.
    assert ProviderWrite.objects.get(pk=write.pk).tenant == world.tenant


def test_a_settled_write_is_not_tracked(world, providers_up):
    from providers.adapters.base import WriteResult

    engines = _engines(providers_up)
    ctx = operation_context(tenant=world.tenant, operation="remember", agent=world.agent, user_id="alice")
    done = write_track(
        engine=engines["mem0"],
        tenant=world.tenant,
        agent=world.agent,
        ctx=ctx,
        operation="remember",
        result=WriteResult("settled", ["m1"]),
    )
    assert done is None and not ProviderWrite.objects.exists()
