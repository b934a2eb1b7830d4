"""drf-spectacular postprocessing: the one error body on every operation.

Every endpoint can answer the documented error shape (``core.errors``): bad input,
no key, a refused role, an unknown or foreign id, too many requests. Views describe
their own answers; this hook adds the statuses every operation shares and gives each
error response (described or added) the error body, so clients and contract tests
see what the server really sends.
"""

from __future__ import annotations

from typing import Any

ERROR_SCHEMA = {
    "type": "object",
    "description": "Every error answers with this body.",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "Stable machine-readable code."},
                "message": {"type": "string"},
                "details": {"type": "object", "additionalProperties": {}},
            },
            "required": ["code", "message", "details"],
        }
    },
    "required": ["error"],
}
ERROR_REF = {"$ref": "#/components/schemas/Error"}
SHARED = {
    "400": "Invalid input; `details.fields` names each bad field.",
    "401": "No or an invalid API key.",
    "403": "The caller's role or the memory policy refuses this.",
    "404": "Unknown or foreign object.",
    "429": "Too many requests; `Retry-After` says when to retry.",
}
WITH_BODY = {
    "415": "The body is not JSON.",
}
METHODS = ("get", "post", "put", "patch", "delete")


def error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    for item in result.get("paths", {}).values():
        for method, operation in item.items():
            if method not in METHODS:
                continue
            responses = operation.setdefault("responses", {})
            shared = {**SHARED, **(WITH_BODY if "requestBody" in operation else {})}
            for status, description in shared.items():
                responses.setdefault(status, {"description": description})
            for status, response in responses.items():
                if status.startswith(("4", "5")) and not response.get("content"):
                    response["content"] = {"application/json": {"schema": ERROR_REF}}
    return result
