"""The Celery app. Configuration comes from Django settings (CELERY_* names)."""

import os

from celery import Celery
from celery.signals import worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")

app = Celery("fedmem")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_process_init.connect
def _warm_provider_sdks(**kwargs: object) -> None:
    from providers.apps import start_warmup

    start_warmup()
