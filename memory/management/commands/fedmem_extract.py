from typing import Any

from django.core.management.base import BaseCommand, CommandError

from memory.management.selection import add_selection_arguments, selection
from memory.services.backfill import extraction_backfill


class Command(BaseCommand):
    help = (
        "Enqueue graph extraction (entities, causal edges, span links) for items written before "
        "extraction existed (--all), still pending, or failed. Safe to repeat."
    )

    def add_arguments(self, parser: Any) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--pending", action="store_const", dest="which", const="pending")
        which.add_argument("--failed", action="store_const", dest="which", const="failed")
        which.add_argument("--all", action="store_const", dest="which", const="all")
        add_selection_arguments(parser)
        parser.add_argument("--batch", type=int, default=100, help="items per task (default 100)")

    def handle(self, *args: Any, **options: Any) -> None:
        agent_id, tenant_id = selection(options)
        if not 1 <= options["batch"] <= 1000:
            raise CommandError("--batch must be between 1 and 1000")
        count = extraction_backfill(
            which=options["which"], agent_id=agent_id, tenant_id=tenant_id, batch=options["batch"]
        )
        self.stdout.write(f"Enqueued extraction for {count} item(s) ({options['which']}).")
