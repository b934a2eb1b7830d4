"""Start-up warm-up: each kind of process loads the models its own work runs on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A fresh interpreter (this one loaded every model long ago): run the warm-up, then
# report which of the process-wide models are loaded.
PROBE = """
import json, os
os.environ["DJANGO_SETTINGS_MODULE"] = "fedmem_site.settings.test"
import django
django.setup()
from memory import embeddings, pii
from memory.extraction import nlp
from providers.apps import _warm
_warm({kind!r})
print(json.dumps({{
    "embedder": embeddings._embedder is not None,
    "spacy": nlp._nlp is not None,
    "personal_data": pii._analyzer is not None,
}}))
"""


@pytest.mark.parametrize(
    ("kind", "loaded"),
    [
        # A web process writes (recognizers over the parse) and recalls (embedder).
        ("web", {"embedder": True, "spacy": True, "personal_data": True}),
        # A Celery child extracts: the parse and span embeddings, never the recognizers.
        ("worker", {"embedder": True, "spacy": True, "personal_data": False}),
        # Anything else (a management command) loads no model at all.
        (None, {"embedder": False, "spacy": False, "personal_data": False}),
    ],
)
def test_warm_up_loads_the_models_of_the_process_kind(kind, loaded):
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(kind=kind)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == loaded
