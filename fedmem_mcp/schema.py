"""JSON Schema for a tool's arguments, derived from the DRF serializer that parses
them: one description of each input, so what a client is told and what the REST
API accepts cannot drift apart."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


def _choices(field: serializers.ChoiceField) -> list[Any]:
    return [str(key) if not isinstance(key, int | bool) else key for key in field.choices]


def field_schema(field: serializers.Field) -> dict[str, Any]:
    schema: dict[str, Any]
    if isinstance(field, serializers.ChoiceField):
        schema = {"type": "string", "enum": _choices(field)}
    elif isinstance(field, serializers.BooleanField):
        schema = {"type": "boolean"}
    elif isinstance(field, serializers.IntegerField):
        schema = {"type": "integer"}
        if field.min_value is not None:
            schema["minimum"] = field.min_value
        if field.max_value is not None:
            schema["maximum"] = field.max_value
    elif isinstance(field, serializers.FloatField):
        schema = {"type": "number"}
        if field.min_value is not None:
            schema["minimum"] = field.min_value
        if field.max_value is not None:
            schema["maximum"] = field.max_value
    elif isinstance(field, serializers.DateTimeField):
        schema = {"type": "string", "format": "date-time"}
    elif isinstance(field, serializers.UUIDField):
        schema = {"type": "string", "format": "uuid"}
    elif isinstance(field, serializers.ListField):
        schema = {"type": "array", "items": field_schema(field.child)}
        if field.max_length is not None:
            schema["maxItems"] = field.max_length
        if field.min_length is not None:
            schema["minItems"] = field.min_length
        elif not field.allow_empty:
            schema["minItems"] = 1
    elif isinstance(field, serializers.DictField):
        schema = {"type": "object"}
    elif isinstance(field, serializers.CharField):
        schema = {"type": "string"}
        if field.max_length is not None:
            schema["maxLength"] = field.max_length
        if isinstance(field, serializers.RegexField):
            regex = next((v.regex.pattern for v in field.validators if hasattr(v, "regex")), None)
            if regex:
                schema["pattern"] = regex
    else:  # pragma: no cover - a field type no tool uses yet
        raise TypeError(f"no JSON Schema mapping for {type(field).__name__}")
    if getattr(field, "allow_null", False):
        schema = {"anyOf": [schema, {"type": "null"}]}
    if field.help_text:
        schema["description"] = str(field.help_text)
    if field.default is not serializers.empty and not callable(field.default):
        schema["default"] = field.default
    return schema


def serializer_schema(serializer_class: type[serializers.Serializer]) -> dict[str, Any]:
    fields = serializer_class().fields
    properties = {name: field_schema(field) for name, field in fields.items() if not field.read_only}
    required = [name for name, field in fields.items() if field.required and not field.read_only]
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema
