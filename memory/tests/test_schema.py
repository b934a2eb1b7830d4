"""Every memory route is in the OpenAPI schema, described without generator warnings."""

from __future__ import annotations

import io
import json
import re

from django.core.management import call_command

from fedmem_site.tests.test_schema import api_routes


def _memory_routes() -> set[str]:
    return {route for route in api_routes() if route.startswith("v1/memory/")}


def test_memory_routes_are_documented_without_warnings(db, capsys):
    out = io.StringIO()
    call_command("spectacular", "--validate", "--format", "openapi-json", stdout=out)
    # Warnings name the source file; ours live under memory/ (and describe memory enums).
    warnings = [
        line
        for line in capsys.readouterr().err.splitlines()
        if re.search(r"(?<![\w-])memory/|Memory|Scope|Kind|Classification", line)
    ]
    assert warnings == []
    schema = json.loads(out.getvalue())
    documented = {re.sub(r"\{[^}]+\}", "{}", path) for path in schema["paths"]}
    routes = _memory_routes()
    assert routes
    for route in routes:
        assert "/" + re.sub(r"<[^>]+>", "{}", route) in documented, route
    recall = schema["paths"]["/v1/memory/agents/{agent_id}/recall"]["post"]
    assert recall["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "RecallResponse"
    )
    export = schema["paths"]["/v1/memory/agents/{agent_id}/memories/export"]["post"]
    assert "application/jsonl" in export["responses"]["200"]["content"]
