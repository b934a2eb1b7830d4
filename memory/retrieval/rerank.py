"""The reranker slot: a cross-encoder scoring (query, memory) pairs, off by default.

``FEDMEM_RERANKER_MODEL`` names a local sentence-transformers CrossEncoder folder;
when it is unset, fused ranks are final. Loaded once per process, never fetched.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Protocol

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class Reranker(Protocol):
    def scores(self, query: str, texts: list[str]) -> list[float]: ...


class CrossEncoderReranker:
    def __init__(self, model_dir: Path) -> None:
        if not model_dir.is_dir():
            raise ImproperlyConfigured(
                f"FEDMEM_RERANKER_MODEL={str(model_dir)!r} is not a directory holding a cross-encoder"
            )
        os.environ["HF_HUB_OFFLINE"] = "1"
        from sentence_transformers import CrossEncoder

        self.model = CrossEncoder(str(model_dir), device="cpu", local_files_only=True)
        self._lock = threading.Lock()  # tokenizers are not safe to share between threads

    def scores(self, query: str, texts: list[str]) -> list[float]:
        if not texts:
            return []
        with self._lock:
            raw = self.model.predict([(query, text) for text in texts], show_progress_bar=False)
        return [float(s) for s in raw]


_lock = threading.Lock()
_loaded: dict[str, Reranker] = {}


def get_reranker() -> Reranker | None:
    path = settings.FEDMEM_RERANKER_MODEL
    if not path:
        return None
    if path not in _loaded:
        with _lock:
            if path not in _loaded:
                _loaded[path] = CrossEncoderReranker(Path(path))
    return _loaded[path]
