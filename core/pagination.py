"""Cursor pagination shared by every list endpoint: stable under concurrent inserts."""

from rest_framework import pagination


class CursorPagination(pagination.CursorPagination):
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200
    ordering = "-created_at"
