"""``manage.py fedmem_sentences``: sentence vectors for items written before them."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from memory.management.selection import add_selection_arguments, selection
from memory.services.backfill import sentence_backfill


class Command(BaseCommand):
    help = (
        "Embed each sentence of the items of several sentences that have no sentence vectors yet "
        "(written before hybrid recall read them). Safe to repeat and to run beside writes."
    )

    def add_arguments(self, parser: Any) -> None:
        add_selection_arguments(parser)
        parser.add_argument("--batch", type=int, default=256, help="items per embedding batch (default 256)")

    def handle(self, *args: Any, **options: Any) -> None:
        agent_id, tenant_id = selection(options)
        if not 1 <= options["batch"] <= 5000:
            raise CommandError("--batch must be between 1 and 5000")

        def progress(read: int, written: int, sentences: int) -> None:
            self.stdout.write(f"  {read} item(s) read, {sentences} sentence vector(s) for {written} written")

        items, sentences = sentence_backfill(
            agent_id=agent_id, tenant_id=tenant_id, batch=options["batch"], progress=progress
        )
        self.stdout.write(f"Wrote {sentences} sentence vector(s) for {items} item(s).")
