"""Export a local sentence-transformers folder to ONNX (and optionally int8).

Run as its own process (``python -m memory.embedding_export MODEL_DIR OUT.onnx``)
by :mod:`memory.embeddings`, so a serving process never imports torch: the export
needs torch, the ONNX runtime does not. Reads only the local folder; nothing is
fetched. Beside the model it writes ``OUT.json`` with what inference needs
(input names, truncation length, padding token) and the fingerprint of the
weights it came from.

No Django here: the module is also run before settings exist.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

# Bumped when the exported graph changes, so an old export is not reused.
EXPORT_VERSION = 1
OPSET = 17


def fingerprint(model_dir: Path) -> str:
    """What the export depends on: every file of the folder by path, size and
    modification time (cheap at every start; a reinstalled package changes it)."""
    digest = hashlib.sha256(f"v{EXPORT_VERSION}:{model_dir.resolve()}".encode())
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        stat = path.stat()
        digest.update(f"{path.relative_to(model_dir)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def export(model_dir: Path, out: Path, *, int8: bool) -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(
        str(model_dir),
        device="cpu",
        local_files_only=True,
        # The eager attention traces into plain ops; SDPA's Python-side shape
        # checks would be frozen into the graph by the tracer.
        model_kwargs={"attn_implementation": "eager"},
    ).eval()
    tokenizer = model.tokenizer
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in tokenizer.model_input_names]

    class Sentence(torch.nn.Module):
        """Token ids -> the unit-length sentence embedding, pooling included."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            features = self.model(dict(zip(names, inputs, strict=True)))
            return torch.nn.functional.normalize(features["sentence_embedding"], p=2, dim=1)

    sample = tokenizer(
        ["a short one", "and a somewhat longer second sentence"], padding=True, return_tensors="pt"
    )
    tmp = out.with_suffix(".tmp.onnx")
    with torch.no_grad():
        torch.onnx.export(
            Sentence(),
            tuple(sample[n] for n in names),
            str(tmp),
            input_names=names,
            output_names=["embedding"],
            dynamic_axes={**{n: {0: "batch", 1: "tokens"} for n in names}, "embedding": {0: "batch"}},
            opset_version=OPSET,
            dynamo=False,
        )
    if int8:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantized = out.with_suffix(".int8.tmp.onnx")
        quantize_dynamic(str(tmp), str(quantized), weight_type=QuantType.QInt8)
        tmp.unlink()
        tmp = quantized
    meta = {
        "fingerprint": fingerprint(model_dir),
        "inputs": names,
        "max_seq_length": int(model.max_seq_length),
        "pad_token": tokenizer.pad_token,
        "pad_id": int(tokenizer.pad_token_id),
        "dimension": int(model.get_embedding_dimension()),
        "int8": int8,
    }
    meta_tmp = out.with_suffix(".tmp.json")
    meta_tmp.write_text(json.dumps(meta, indent=2), encoding="utf-8")
    # Model first, metadata last: a reader that sees the metadata sees a whole model.
    os.replace(tmp, out)
    os.replace(meta_tmp, out.with_suffix(".json"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--int8", action="store_true", help="dynamic int8 quantization of the weights")
    args = parser.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    export(args.model_dir, args.out, int8=args.int8)
    return 0


if __name__ == "__main__":
    sys.exit(main())
