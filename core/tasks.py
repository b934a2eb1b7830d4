"""Enqueue Celery work through a transactional outbox.

A task enqueued inside a transaction that later rolls back would run against rows
that never existed; a task published after commit by a process that dies first
would be lost. So the task is written as an ``OutboxMessage`` row in the same
transaction, published right after commit, and re-published by
:func:`outbox_relay` (a beat task) if that publish never happened. Delivery is
therefore at-least-once: every task must be idempotent.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from celery import Task, current_app, shared_task
from django.db import transaction
from django.utils import timezone

from core.models import OutboxMessage

logger = logging.getLogger(__name__)

# A message younger than this may still be on its way through the on-commit path.
RELAY_GRACE = timedelta(seconds=10)
KEEP_SENT = timedelta(days=7)


def enqueue_on_commit(task: Task | str, *args: Any, **kwargs: Any) -> OutboxMessage:
    """Queue ``task`` (a task or its registered name) to run after the caller's commit.

    Services pass the name: importing the tasks module would tie the service to its
    own entry point (tasks import services), a cycle. An unknown name fails here,
    in the caller's transaction, rather than in a worker that cannot route it.
    """
    name = task if isinstance(task, str) else task.name
    if name not in current_app.tasks:
        # Outside a worker the apps' tasks modules load on first need (autodiscovery).
        current_app.loader.import_default_modules()
        if name not in current_app.tasks:
            raise LookupError(f"no Celery task is registered as {name!r}")
    message = OutboxMessage.objects.create(task_name=name, args=list(args), kwargs=kwargs)
    transaction.on_commit(lambda: publish(message))
    return message


def publish(message: OutboxMessage) -> bool:
    """Send one message; never raises (the relay retries what failed)."""
    # current_app is the project's app (fedmem_site.celery creates it first and it
    # becomes current); core names no module above itself.
    try:
        current_app.send_task(
            message.task_name, args=message.args, kwargs=message.kwargs, task_id=str(message.pk), retry=False
        )
    except Exception as exc:  # broker unreachable: keep the row for the relay
        logger.warning("could not publish %s (%s); the outbox relay will retry", message.task_name, exc)
        OutboxMessage.objects.filter(pk=message.pk).update(
            attempts=message.attempts + 1, last_error=f"{exc.__class__.__name__}: {exc}"[:500]
        )
        return False
    OutboxMessage.objects.filter(pk=message.pk).update(sent_at=timezone.now(), attempts=message.attempts + 1)
    return True


def outbox_relay_run(*, batch: int = 500, grace: timedelta = RELAY_GRACE) -> dict[str, int]:
    """Publish messages whose after-commit publish did not happen; prune old sent ones."""
    sent = failed = 0
    cutoff = timezone.now() - grace
    with transaction.atomic():
        # SKIP LOCKED: two relays (two beat instances by mistake) never send the same row.
        pending = list(
            OutboxMessage.objects.select_for_update(skip_locked=True)
            .filter(sent_at__isnull=True, created_at__lt=cutoff)
            .order_by("created_at")[:batch]
        )
        for message in pending:
            if publish(message):
                sent += 1
            else:
                failed += 1
    pruned, _ = OutboxMessage.objects.filter(sent_at__lt=timezone.now() - KEEP_SENT).delete()
    return {"sent": sent, "failed": failed, "pruned": pruned}


@shared_task(name="core.outbox_relay", ignore_result=True)
def outbox_relay() -> dict[str, int]:
    return outbox_relay_run()
