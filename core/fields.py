"""Serializer fields shared by every API."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.fields import empty


class BoundedCharField(serializers.CharField):
    """A CharField whose ``max_length`` bounds what the client sent. DRF trims
    whitespace before its length validator runs, so a value over the documented
    ``maxLength`` (a leading space or U+0085) was accepted; the schema promises a 400."""

    def run_validation(self, data: Any = empty) -> Any:
        if isinstance(data, str) and self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().run_validation(data)
