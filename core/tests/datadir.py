"""A data folder for a server that a test starts on its own (``manage.py fedmem_run``)."""

from __future__ import annotations

import shutil
from pathlib import Path


def with_onnx_export(data_dir: Path) -> Path:
    """``data_dir`` holding the ONNX export of the packaged model, as a second start finds
    it: a started server then does not spend the test's time on the one-time export,
    which ``memory/tests/test_embeddings.py`` covers."""
    from memory.embeddings import configured_model_path, ensure_onnx_model

    export = ensure_onnx_model(configured_model_path(), int8=False)
    (data_dir / "models").mkdir(parents=True, exist_ok=True)
    for path in (export, export.with_suffix(".json")):
        shutil.copy(path, data_dir / "models" / path.name)
    return data_dir
