"""The provider contract as a JSON Schema file, and validators for its parts."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

SCHEMA_PATH = Path(__file__).resolve().parent / "v1" / "memory-provider.schema.json"


@cache
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@cache
def validator(definition: str) -> Draft202012Validator:
    """A validator for one part: capability_announcement, operation_context or hit."""
    root = schema()
    if definition not in root["$defs"]:
        raise KeyError(definition)
    # Keep $defs alongside the chosen part so its internal $refs resolve.
    return Draft202012Validator({"$defs": root["$defs"], "$ref": f"#/$defs/{definition}"})


def errors(definition: str, instance: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
        for e in validator(definition).iter_errors(instance)
    ]
