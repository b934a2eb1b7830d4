"""The default server (what `make run` starts) under sustained sequential use.

A shorter run of ``bench/reliability.py`` (which does 10,000 requests): no request
fails, the database connections stay flat, and extraction interrupted by a restart
is re-queued by the sweep until nothing is left pending.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from core.tests.datadir import with_onnx_export

ROOT = Path(__file__).resolve().parents[2]
REQUESTS = int(os.environ.get("FEDMEM_RELIABILITY_REQUESTS", "300"))


def _harness():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_reliability", ROOT / "bench" / "reliability.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # type: ignore[union-attr]  # dataclasses look it up
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@pytest.mark.worker
def test_default_server_keeps_connections_flat_and_settles_interrupted_extraction(tmp_path):
    bench = _harness()
    sweep = {"FEDMEM_EXTRACTION_SWEEP_SECONDS": "15", "FEDMEM_EXTRACTION_STALE_SECONDS": "10"}
    # One data folder (one embedded PostgreSQL, one demo seed): the drill first, on a
    # fresh server, so its backlog is its own; its restart leaves a server with nothing
    # pending, which the load then measures.
    server = bench.Server(with_onnx_export(tmp_path), bench.free_port(), sweep)
    key = bench.demo_key(server.start())
    try:
        drill = bench.restart_drill(server, key, items=20, timeout=300)
        print(drill)
        assert drill["pending_before_restart"] > 0
        assert drill["pending_after_restart"] == 0, drill
        figures = bench.sequential(server, key, REQUESTS)
        print(figures)
        assert figures["errors"] == 0, figures["error_kinds"]
        # What a healthy server may open after its first request (bench/reliability.py).
        slack = bench.connection_slack()
        assert figures["connections_peak"] <= figures["connections_before"] + slack, figures
        assert figures["connections_after"] <= figures["connections_before"] + slack, figures
    finally:
        server.stop()
