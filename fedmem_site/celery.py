"""The Celery app. Configuration comes from Django settings (CELERY_* names)."""

import os

from celery import Celery
from celery.signals import worker_process_init

from fedmem_site.pool import robust_blocking_pool

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")

# Before the worker builds its pool: a SIGKILLed child must not stall its replacement.
robust_blocking_pool()

app = Celery("fedmem")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_process_init.connect
def _warm_provider_sdks(**kwargs: object) -> None:
    from providers.apps import start_warmup

    start_warmup()
