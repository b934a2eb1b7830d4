"""The transactional outbox: a committed change never loses its task, a rollback sends none."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import transaction

from core.models import OutboxMessage
from core.tasks import outbox_relay_run
from governance.models import Job
from governance.services.jobs import self_check_start
from governance.tests.test_worker import wait_for


@contextmanager
def broker_down():
    """Point the Celery app at a port where nothing listens, as during a broker outage."""
    from fedmem_site.celery import app

    original = app.conf.broker_url
    app.conf.broker_url = "redis://127.0.0.1:1/0"
    app._pool = None
    app.amqp._producer_pool = None
    try:
        yield
    finally:
        app.conf.broker_url = original
        app._pool = None
        app.amqp._producer_pool = None


def test_message_is_written_with_the_change_and_sent_after_commit(world, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job = self_check_start(tenant=world.tenant, requested_by=world.admin)
    message = OutboxMessage.objects.get()
    assert (message.task_name, message.args, message.sent_at) == (
        "governance.run_self_check",
        [str(job.pk)],
        None,
    )
    callbacks[0]()
    message.refresh_from_db()
    assert message.sent_at is not None and message.attempts == 1


@pytest.mark.django_db(transaction=True)
def test_rollback_sends_nothing(world):
    with pytest.raises(RuntimeError), transaction.atomic():
        self_check_start(tenant=world.tenant, requested_by=world.admin)
        raise RuntimeError("the request failed after the job was created")
    assert not Job.objects.exists()
    assert not OutboxMessage.objects.exists()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_publish_lost_during_an_outage_is_relayed_and_runs_once(world, worker_factory):
    worker_factory()
    with broker_down():
        job = self_check_start(tenant=world.tenant, requested_by=world.admin)
    message = OutboxMessage.objects.get()
    assert message.sent_at is None and "OperationalError" in message.last_error
    job.refresh_from_db()
    assert job.status == Job.Status.QUEUED

    with broker_down():
        assert outbox_relay_run(grace=timedelta(0))["failed"] == 1
    report = outbox_relay_run(grace=timedelta(0))
    assert report["sent"] == 1
    job = wait_for(job)
    assert job.status == Job.Status.SUCCEEDED and job.attempts == 1
    assert outbox_relay_run(grace=timedelta(0))["sent"] == 0


def test_relay_leaves_young_messages_to_the_on_commit_path(world):
    OutboxMessage.objects.create(task_name="governance.run_self_check", args=["x"])
    assert outbox_relay_run()["sent"] == 0


def test_an_unknown_task_name_fails_in_the_caller_and_writes_nothing(db):
    from core.tasks import enqueue_on_commit

    with pytest.raises(LookupError, match=r"governance\.no_such_task"):
        enqueue_on_commit("governance.no_such_task", "x")
    assert not OutboxMessage.objects.exists()
