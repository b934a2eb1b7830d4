"""The embedding runtime: ONNX equals PyTorch, the micro-batcher shares passes
without mixing up rows, the query cache is a bounded LRU."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from memory.embeddings import (
    MicroBatcher,
    QueryCache,
    configured_model_path,
    ensure_onnx_model,
    load_embedder,
    onnx_model_path,
)

TEXTS = [
    "hello",
    "x",
    "The payments API latency rose after the deploy because the cache was cold.",
    "Alice Smith (alice@example.com, +1 415 555 0100) moved to the Berlin office in 2024.",
    "Der Zahlungsdienst fiel aus, weil die Festplatte voll war. Ça arrive — 支払いが遅れた。",
    # Longer than the model's 256-token window: both runtimes truncate the same way.
    " ".join(f"token{i} follows" for i in range(400)),
]


@pytest.fixture(scope="module")
def torch_embedder():
    return load_embedder("torch")


@pytest.fixture(scope="module")
def onnx_embedder():
    return load_embedder("onnx")


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_onnx_vectors_equal_the_pytorch_vectors(torch_embedder, onnx_embedder):
    reference = torch_embedder.embed(TEXTS)
    batched = onnx_embedder.embed(TEXTS)  # padded to the longest text
    single = np.stack([onnx_embedder.embed([text])[0] for text in TEXTS])  # no padding
    assert batched.shape == reference.shape == (len(TEXTS), 384)
    assert cosines(batched, reference).min() >= 0.999
    assert cosines(single, reference).min() >= 0.999
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-4)  # unit length, like torch's


def test_texts_sorted_by_length_into_passes_come_back_in_the_order_asked(onnx_embedder, settings):
    settings.FEDMEM_EMBEDDING_BATCH_SIZE = 2  # three passes over TEXTS, each of similar lengths
    small = load_embedder("onnx")
    got = small.embed(TEXTS)
    single = np.stack([onnx_embedder.embed([text])[0] for text in TEXTS])
    assert cosines(got, single).min() >= 0.9999


def test_the_export_is_made_once_and_reused(onnx_embedder, settings):
    model_dir = configured_model_path()
    path = ensure_onnx_model(model_dir, int8=False)
    assert path == onnx_embedder.path
    assert path.parent == settings.DATA_DIR / "models"
    stamp = path.stat().st_mtime_ns
    assert ensure_onnx_model(model_dir, int8=False).stat().st_mtime_ns == stamp
    assert onnx_model_path(model_dir, int8=True) != path  # int8 is a separate file


def test_a_model_folder_without_a_fast_tokenizer_is_refused_for_onnx(tmp_path, settings):
    settings.FEDMEM_EMBEDDING_MODEL = str(tmp_path)
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "modules.json").write_text(
        '[{"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]'
    )
    (tmp_path / "1_Pooling" / "config.json").write_text('{"word_embedding_dimension": 384}')
    with pytest.raises(ImproperlyConfigured, match="FEDMEM_EMBEDDING_RUNTIME=torch"):
        load_embedder("onnx")


def test_int8_vectors_stay_close_to_the_full_precision_ones(torch_embedder):
    int8 = load_embedder("onnx-int8")
    assert int8.path.name.endswith("-int8.onnx")
    # Quantized weights move vectors a little (docs/performance.md carries the
    # measured retrieval delta); they must still point the same way.
    assert cosines(int8.embed(TEXTS), torch_embedder.embed(TEXTS)).min() >= 0.9


class GatedEmbedder:
    """The real model behind a gate: the first pass waits until the test has queued
    every request, which makes "queued meanwhile" deterministic."""

    def __init__(self, inner, gate: threading.Event, fail_on: str | None = None) -> None:
        self.inner = inner
        self.dimension = inner.dimension
        self.gate = gate
        self.fail_on = fail_on
        self.batches: list[list[str]] = []
        self.entered = threading.Event()

    def embed(self, texts):
        self.entered.set()
        self.gate.wait(timeout=30)
        self.batches.append(list(texts))
        if self.fail_on is not None and self.fail_on in texts:
            raise RuntimeError("model failed")
        return self.inner.embed(texts)


def _concurrently(batcher: MicroBatcher, requests: list[list[str]], gated: GatedEmbedder, gate):
    results: dict[int, object] = {}

    def call(index: int) -> None:
        try:
            results[index] = batcher.embed(requests[index])
        except Exception as exc:  # the assertion reads it
            results[index] = exc

    # The first request occupies the model; the others queue behind it.
    first = threading.Thread(target=call, args=(0,))
    first.start()
    assert gated.entered.wait(timeout=30)
    threads = [threading.Thread(target=call, args=(i,)) for i in range(1, len(requests))]
    for thread in threads:
        thread.start()
    pieces = sum(-(-len(texts) // batcher.batch_size) for texts in requests[1:])
    while batcher.pending() < pieces:  # every request is waiting
        threading.Event().wait(0.01)
    gate.set()
    for thread in [first, *threads]:
        thread.join(timeout=60)
    return results


def test_concurrent_requests_share_forward_passes_and_get_their_own_rows(onnx_embedder):
    gate = threading.Event()
    gated = GatedEmbedder(onnx_embedder, gate)
    batcher = MicroBatcher(gated, batch_size=64)
    requests = [[f"query number {i} about the {'cache' if i % 2 else 'disk'}"] for i in range(12)]
    requests.append(["a bulk text one", "a much longer bulk text number two, with more words"])
    results = _concurrently(batcher, requests, gated, gate)
    # One pass for the first request, one for the twelve queued behind it.
    assert len(gated.batches) == 2
    assert sorted(len(b) for b in gated.batches) == [1, 13]
    for index, texts in enumerate(requests):
        expected = onnx_embedder.embed(texts)
        assert results[index].shape == expected.shape
        assert cosines(results[index], expected).min() >= 0.9999


def test_queries_go_before_queued_bulk_work_and_bulk_is_cut_into_batches(onnx_embedder):
    gate = threading.Event()
    gated = GatedEmbedder(onnx_embedder, gate)
    batcher = MicroBatcher(gated, batch_size=4)
    bulk = [f"bulk text {i}" for i in range(10)]
    results = _concurrently(batcher, [["first"], bulk, ["late query"]], gated, gate)
    # The query queued after the bulk request still joins the first bulk pass's
    # room before the rest of the bulk: priority, then arrival.
    assert gated.batches[0] == ["first"]
    assert "late query" in gated.batches[1]
    assert all(len(batch) <= 4 for batch in gated.batches)
    assert results[1].shape == (10, 384)
    assert cosines(results[1], onnx_embedder.embed(bulk)).min() >= 0.9999


class ThreadRecordingEmbedder:
    def __init__(self, inner) -> None:
        self.inner = inner
        self.dimension = inner.dimension
        self.threads: list[threading.Thread] = []

    def embed(self, texts):
        self.threads.append(threading.current_thread())
        return self.inner.embed(texts)


def test_a_request_on_an_idle_batcher_runs_in_the_callers_thread(onnx_embedder):
    recording = ThreadRecordingEmbedder(onnx_embedder)
    batcher = MicroBatcher(recording, batch_size=4)
    vector = batcher.embed(["what happened to checkout?"])
    # No hand-off to the batcher thread and back for a lone query.
    assert recording.threads == [threading.current_thread()]
    assert cosines(vector, onnx_embedder.embed(["what happened to checkout?"])).min() >= 0.9999
    # More than one pass's worth still goes through the batcher thread, in pieces.
    batcher.embed([f"bulk text {i}" for i in range(6)])
    assert len(recording.threads) == 3
    assert all(thread.name == "fedmem-embedder" for thread in recording.threads[1:])
    assert batcher.passes == 3


def test_a_failed_pass_fails_its_callers_and_the_batcher_keeps_serving(onnx_embedder):
    gate = threading.Event()
    gated = GatedEmbedder(onnx_embedder, gate, fail_on="poison")
    batcher = MicroBatcher(gated, batch_size=64)
    results = _concurrently(batcher, [["fine"], ["poison"], ["neighbour"]], gated, gate)
    assert results[0].shape == (1, 384)
    assert isinstance(results[1], RuntimeError)
    assert isinstance(results[2], RuntimeError)  # shared the failed pass
    assert batcher.embed(["after"]).shape == (1, 384)


def test_the_query_cache_keeps_the_most_recent_and_returns_read_only_vectors():
    cache = QueryCache(2)
    a = cache.put("a", np.ones(3, dtype=np.float32))
    cache.put("b", np.zeros(3, dtype=np.float32))
    assert cache.get("a") is a  # touching "a" makes "b" the oldest
    cache.put("c", np.full(3, 2, dtype=np.float32))
    assert cache.get("b") is None
    assert cache.get("c") is not None and cache.get("a") is not None
    assert (cache.hits, cache.misses) == (3, 1)
    with pytest.raises(ValueError):
        a[0] = 5
    assert QueryCache(0).put("x", np.ones(3)).shape == (3,)
    off = QueryCache(0)
    off.put("x", np.ones(3))
    assert off.get("x") is None
    big = QueryCache(4)
    big.put("q" * (QueryCache.MAX_TEXT + 1), np.ones(3))
    assert big.get("q" * (QueryCache.MAX_TEXT + 1)) is None


def test_a_repeated_query_is_served_from_the_cache(settings):
    from memory import embeddings

    embeddings.get_embedder()
    passes = embeddings.get_embedder().passes
    first = embeddings.embed_query("a question asked twice, about the cache")
    second = embeddings.embed_query("a question asked twice, about the cache")
    assert second is first
    assert embeddings.get_embedder().passes == passes + 1
