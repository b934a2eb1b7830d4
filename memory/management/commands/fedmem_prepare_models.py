"""``manage.py fedmem_prepare_models``: make what the embedding runtime loads.

With the ONNX runtime that is the local export of the packaged weights (first start
only); ``fedmem_run`` calls it before starting the web and worker processes, which
would otherwise all wait on whichever of them made the export.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from memory.embeddings import prepare_embedding_runtime


class Command(BaseCommand):
    help = "Prepare the configured embedding runtime (the ONNX export of the packaged model)."

    def handle(self, *args: Any, **options: Any) -> None:
        prepare_embedding_runtime()
