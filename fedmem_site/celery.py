"""The Celery app. Configuration comes from Django settings (CELERY_* names)."""

import os

from celery import Celery
from celery.signals import worker_process_init
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
