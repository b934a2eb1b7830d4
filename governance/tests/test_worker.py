"""Real asynchronous work: a separate worker process executes enqueued tasks."""

from __future__ import annotations

import os
import time

import pytest

from governance.models import Job
from governance.services.jobs import self_check_start
from governance.tasks import run_self_check


def wait_for(job: Job, timeout: float = 60) -> Job:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.status in (Job.Status.SUCCEEDED, Job.Status.FAILED):
            return job
        time.sleep(0.1)
    raise AssertionError(f"job still {job.status} after {timeout}s")


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_filesystem_broker_worker_runs_the_task(world, worker_factory, as_user):
    worker = worker_factory()
    response = as_user(world.admin).post("/v1/system/self-check")
    assert response.status_code == 202
    job = wait_for(Job.objects.get(pk=response.json()["id"]))
    assert job.status == Job.Status.SUCCEEDED, job.error
    # Executed by the worker process, not in this process (no eager mode).
    host_pid = job.worker.rsplit(":", 1)[1]
    assert int(host_pid) != os.getpid()
    assert job.result["pgvector"]
    assert worker.poll() is None
    polled = as_user(world.admin).get(f"/v1/jobs/{job.pk}").json()
    assert polled["status"] == "succeeded" and polled["progress"] == 1


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_redis_broker_worker_runs_the_task(world, worker_factory, redis):
    url = redis
    worker_factory(CELERY_BROKER_URL=url)
    job = Job.objects.create(tenant=world.tenant, kind="self_check", total=1)
    from fedmem_site.celery import app

    with app.connection_for_write(url) as conn:
        run_self_check.apply_async(args=[str(job.pk)], connection=conn)
    job = wait_for(job)
    assert job.status == Job.Status.SUCCEEDED
    assert int(job.worker.rsplit(":", 1)[1]) != os.getpid()


def test_task_is_enqueued_only_after_commit(world, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job = self_check_start(tenant=world.tenant, requested_by=world.admin)
    # Nothing was sent while the transaction was open; exactly one send waits for the commit.
    assert len(callbacks) == 1
    job.refresh_from_db()
    assert job.status == Job.Status.QUEUED


def test_redelivered_task_does_not_run_twice(world):
    job = Job.objects.create(tenant=world.tenant, kind="self_check", total=1)
    run_self_check(str(job.pk))
    job.refresh_from_db()
    first = (job.attempts, job.finished_at)
    run_self_check(str(job.pk))  # late-ack redelivery after success
    job.refresh_from_db()
    assert (job.attempts, job.finished_at) == first


def test_self_check_api_roles(world, as_user, as_agent):
    from conftest import assert_error

    assert_error(as_user(world.owner).post("/v1/system/self-check"), 403)
    assert_error(as_user(world.auditor).post("/v1/system/self-check"), 403)
    assert_error(as_agent(world.agent).post("/v1/system/self-check"), 403)
    assert not Job.objects.exists()


def test_jobs_of_another_tenant_are_404(world, as_user):
    from conftest import assert_error

    # The outsider started it: a job is its creator's (and its kind's readers'), not the tenant's.
    job = Job.objects.create(tenant=world.other_tenant, kind="self_check", created_by=world.outsider)
    assert_error(as_user(world.owner).get(f"/v1/jobs/{job.pk}"), 404, "job_not_found")
    assert as_user(world.outsider).get(f"/v1/jobs/{job.pk}").status_code == 200
