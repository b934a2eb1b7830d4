"""The providers app raises the one class of each error code (core.errors), never a
code spelled as a string at the raise site, where a typo would reach the wire."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from core import errors

APP = Path(__file__).resolve().parents[1]


def _sources() -> list[Path]:
    return sorted(path for path in APP.rglob("*.py") if "tests" not in path.relative_to(APP).parts)


def test_no_error_code_is_a_string_literal():
    found = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                for keyword in node.keywords:
                    if keyword.arg == "code" and isinstance(keyword.value, ast.Constant):
                        found.append(f"{path.relative_to(APP)}:{node.lineno} code={keyword.value.value!r}")
    assert found == []


@pytest.mark.parametrize(
    ("klass", "status", "code"),
    [
        (errors.NoTenant, 403, "no_tenant"),
        (errors.EngineExists, 409, "engine_exists"),
        (errors.EngineNotFound, 404, "engine_not_found"),
        (errors.EngineCredentialNotFound, 404, "engine_credential_not_found"),
        (errors.MemoryEngineUnavailable, 502, "memory_engine_unavailable"),
        (errors.MemoryIsolationInsufficient, 422, "memory_isolation_insufficient"),
        (errors.MemoryNoEngines, 422, "memory_no_engines"),
    ],
)
def test_each_class_answers_with_the_status_and_code_the_docs_give(klass, status, code):
    exc = klass("A message.")
    assert (exc.status_code, str(exc.code), exc.message) == (status, code, "A message.")


def test_a_field_error_can_keep_its_own_sentence_as_the_message():
    plain = errors.field_error("base_url", "Bad URL.")
    own = errors.field_error("base_url", "Bad URL.", as_message=True)
    assert plain.message == "Invalid input: base_url."
    assert own.message == "Bad URL."
    assert plain.details == own.details == {"fields": {"base_url": ["Bad URL."]}}
