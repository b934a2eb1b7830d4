"""Cursor pagination shared by every list endpoint: stable under concurrent inserts."""

from rest_framework import pagination

from core.errors import InvalidInput


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
