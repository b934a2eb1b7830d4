"""The API's JSON parser: DRF's, with a bound on nesting.

Python's decoder recurses once per nesting level; a body of 100,000 brackets raised
RecursionError (a 500), and a few hundred levels would still recurse through the
serializers. No field of the API nests deeper than a handful of levels, so anything
beyond ``MAX_DEPTH`` is a parse error.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_DEPTH = 32


def json_depth(value: Any) -> int:
    """Nesting depth of decoded JSON (a scalar is 0), without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):  # type: ignore[no-untyped-def]
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_DEPTH} levels") from None
        if json_depth(data) > MAX_DEPTH:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_DEPTH} levels")
        return data
