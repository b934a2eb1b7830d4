from typing import Any

from django.core.management.base import BaseCommand

from core.tasks import outbox_relay_run


class Command(BaseCommand):
    help = "Publish outbox messages whose after-commit publish did not happen."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(str(outbox_relay_run()))
