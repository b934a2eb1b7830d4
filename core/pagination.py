"""Cursor pagination shared by every list endpoint: stable under concurrent inserts."""

from base64 import b64decode
from typing import Any

from django.core.exceptions import FieldDoesNotExist, ValidationError
from rest_framework import pagination
from rest_framework.exceptions import NotFound

from core.errors import InvalidInput

INVALID_CURSOR = "The cursor is not one this list handed out; start again without it."


def _invalid_cursor() -> InvalidInput:
    return InvalidInput(
        INVALID_CURSOR, code="invalid_cursor", details={"fields": {"cursor": [INVALID_CURSOR]}}
    )


class CursorPagination(pagination.CursorPagination):
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200
    ordering = "-created_at"

    def get_page_size(self, request):  # type: ignore[no-untyped-def]
        raw = request.query_params.get(self.page_size_query_param)
        if raw is not None and not raw.strip().isdigit():
            # A garbled limit is a client bug worth reporting, not a silent default page.
            raise InvalidInput(
                f"Invalid input: {self.page_size_query_param}.",
                details={"fields": {self.page_size_query_param: ["A whole number from 1 to 200."]}},
            )
        return super().get_page_size(request)

    def paginate_queryset(self, queryset, request, view=None):  # type: ignore[no-untyped-def]
        self._model = getattr(queryset, "model", None)
        return super().paginate_queryset(queryset, request, view)

    def decode_cursor(self, request):  # type: ignore[no-untyped-def]
        encoded = request.query_params.get(self.cursor_query_param)
        if encoded is not None:
            # DRF's decoder skips characters outside base64, so "%%%" read as no
            # cursor at all: a garbled cursor silently restarted the list.
            try:
                b64decode(encoded.encode("ascii"), validate=True)
            except (ValueError, UnicodeEncodeError):
                raise _invalid_cursor() from None
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            raise _invalid_cursor() from None
        if cursor is not None and cursor.position is not None:
            self._check_position(cursor.position)
        return cursor

    def _check_position(self, position: str) -> None:
        # A well-formed cursor may still carry a position that is no value of the
        # ordering field ("p=2026" for a timestamp): the query would fail in the
        # database. Parse it as that field does, so it is refused before.
        ordering = self.ordering if isinstance(self.ordering, str) else self.ordering[0]
        name = ordering.lstrip("-")
        field: Any = None
        if self._model is not None and "__" not in name:
            try:
                field = self._model._meta.get_field(name)
            except FieldDoesNotExist:
                field = None
        if field is None:
            return
        try:
            field.to_python(position)
        except (ValidationError, ValueError, TypeError, OverflowError):
            raise _invalid_cursor() from None
        if "\x00" in position:
            raise _invalid_cursor()
