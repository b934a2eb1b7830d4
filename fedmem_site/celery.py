"""The Celery app. Configuration comes from Django settings (CELERY_* names)."""

import contextlib
import os

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_process_init, worker_process_shutdown
from kombu.transport import TRANSPORT_ALIASES

from fedmem_site.pool import robust_blocking_pool

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")

# filesystem:// is served by core.broker, whose message files appear whole: the stock
# transport lets a polling worker read a file before it is written and exit on it.
# An alias, not broker_transport, so a connection made for another URL keeps its own.
TRANSPORT_ALIASES["filesystem"] = "core.broker:Transport"

# Before the worker builds its pool: a SIGKILLed child must not stall its replacement.
robust_blocking_pool()

app = Celery("fedmem")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_process_init.connect
def _warm_up(**kwargs: object) -> None:
    from providers.apps import start_warmup

    start_warmup(models="worker")


@task_prerun.connect
@task_postrun.connect
def _release_connections(sender: object = None, **kwargs: object) -> None:
    """Each connection back to this process's pool (closed, without a pool) at a task's
    start and end, as Django does at a request's: a connection broken or left in a
    transaction by one task is not the next one's. The pool itself stays open across
    tasks (settings.CELERY_DB_REUSE_MAX keeps Celery's fixup from closing it)."""
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return  # run inline by the caller, inside the caller's own connection handling
    from django.db import close_old_connections

    close_old_connections()


@worker_process_shutdown.connect
def _close_pools(**kwargs: object) -> None:
    """The child's pooled connections closed when it exits, not left to the server to
    notice."""
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        with contextlib.suppress(Exception):
            conn.close()
            if hasattr(conn, "close_pool"):
                conn.close_pool()
