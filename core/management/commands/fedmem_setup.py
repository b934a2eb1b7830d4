"""Prepare a fedmem data folder: migrations, the ONNX export, the demo tenant.

`fedmem_run` runs this in a child process before it starts the web server and the
worker, so the supervisor that stays up for the server's lifetime never loads a
model (about 1 GB it would otherwise keep). Safe to repeat.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from core.demo import demo_seed


class Command(BaseCommand):
    help = "Migrate, export the embedding model to ONNX (first run) and seed the demo tenant."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--no-demo", action="store_true", help="do not create the demo tenant")
        parser.add_argument("--demo-out", help="write the demo logins and keys here as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        # The ONNX export (first start only) before the server's processes, which
        # would otherwise all wait on one of them making it.
        call_command("fedmem_prepare_models")
        demo = None if options["no_demo"] or settings.PRODUCTION else demo_seed()
        if options["demo_out"]:
            out = Path(options["demo_out"])
            out.write_text(json.dumps(demo))
            out.chmod(0o600)  # the demo passwords and keys
