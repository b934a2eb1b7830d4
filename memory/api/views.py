"""The agent memory API under /v1/memory/agents/{agent_id}/. Thin: parse, call one
operation of memory.operations, render its result. Access is the agent's own key or
a user holding can_invoke on the agent (memory.operations.access, through
AgentMemoryMixin)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import ApiError, InvalidInput, field_error
from core.pagination import CursorPagination
from memory import serializers as s
from memory.enforcement import MemoryAccess
from memory.models import MemoryItem, SessionMessage
from memory.operations import memories, recall
from memory.operations.access import agent_memory_access
from memory.services.items import MemoryDraft

TAG = ["memory"]
_IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")

IDEMPOTENCY_PARAMETER = OpenApiParameter(
    "Idempotency-Key",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="Makes retries safe: the same key and body answer with the same result; "
    "the same key with another body is a 422.",
)
ERRORS = {
    400: OpenApiResponse(description="Invalid input; `details.fields` names each bad field."),
    401: OpenApiResponse(description="No or an invalid API key."),
    403: OpenApiResponse(description="Refused by the memory policy (`memory_policy_violation`) or role."),
    404: OpenApiResponse(description="Unknown or foreign agent or memory."),
    409: OpenApiResponse(description="The agent is deactivated (`agent_inactive`)."),
}


class AgentMemoryMixin:
    """For views under /v1/memory/agents/{agent_id}/: the caller's access to that
    agent's memory, resolved through the one gate (memory.operations.access) before
    any input is parsed, so a foreign agent answers 404 whatever the body."""

    request: Request
    kwargs: dict[str, Any]

    def memory_access(self) -> MemoryAccess:
        return agent_memory_access(self.request.user, self.kwargs["agent_id"])


def trace_parent(request: Request) -> str | None:
    return request.headers.get("traceparent")


def _idempotency_key(request: Request) -> str | None:
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not _IDEMPOTENCY_KEY.fullmatch(key):
        raise field_error("Idempotency-Key", "1 to 255 printable ASCII characters, no spaces.")
    return key


def _parse(serializer_class: type[Any], data: Any) -> Any:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer


# split=true answers with the batch shape, one result per sentence; a write routed to
# Mem0 answers with the engine's record.
WRITTEN_OR_SPLIT = PolymorphicProxySerializer(
    component_name="WrittenOrSplit",
    serializers=[s.WrittenItemSerializer, s.BatchResponseSerializer, s.RoutedWriteSerializer],
    resource_type_field_name=None,
)


class RememberView(AgentMemoryMixin, generics.GenericAPIView):
    queryset = MemoryItem.objects.none()  # for the schema; reads go through memory.selectors
    serializer_class = s.MemoryItemSerializer
    pagination_class = CursorPagination

    @extend_schema(
        tags=TAG,
        summary="Remember one memory",
        request=s.RememberSerializer,
        parameters=[IDEMPOTENCY_PARAMETER],
        responses={
            202: OpenApiResponse(
                s.RoutedWriteSerializer,
                description="The agent's policy sends memory to Mem0 (engine mem0 or hybrid) and Mem0 "
                "queued the write: `engine.status` is queued with Mem0's `event_id`, never settled.",
            ),
            201: OpenApiResponse(
                WRITTEN_OR_SPLIT,
                description="Stored (or, under a mem0/hybrid policy, settled by Mem0: the body is then "
                "`{engine: ...}`). With split=true the body has the batch shape (created, deduplicated, "
                "failed, results: one per sentence).",
            ),
            200: OpenApiResponse(
                WRITTEN_OR_SPLIT,
                description="An exact (or near) duplicate already existed (with split=true: nothing new).",
            ),
            422: OpenApiResponse(description="Idempotency-Key reused with a different body."),
            **ERRORS,
        },
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = self.memory_access()
        key = _idempotency_key(request)
        parsed = _parse(s.RememberSerializer, request.data)
        written = memories.remember(
            access, parsed.to_request(idempotency_key=key, trace_parent=trace_parent(request))
        )
        headers = {"Idempotent-Replayed": "true"} if written.replayed else {}
        return Response(written.body(), status=written.status, headers=headers)

    @extend_schema(
        tags=TAG,
        summary="List memories (cursor-paginated, newest first)",
        parameters=[
            s.ListQuerySerializer,
            OpenApiParameter("limit", OpenApiTypes.INT, description="Page size, 1 to 200 (default 50)."),
            OpenApiParameter("cursor", OpenApiTypes.STR, description="The `next`/`previous` cursor."),
        ],
        responses={200: s.MemoryItemSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        access = self.memory_access()
        query = _parse(s.ListQuerySerializer, request.query_params).to_request()
        page = self.paginate_queryset(memories.memories(access, query))
        return self.get_paginated_response(memories.page_body(page, include_content=query.include_content))


class BatchView(AgentMemoryMixin, APIView):
    @extend_schema(
        tags=TAG,
        summary="Remember 1 to 100 memories; each gets its own result",
        request=s.BatchSchemaSerializer,
        parameters=[IDEMPOTENCY_PARAMETER],
        responses={
            201: s.BatchResponseSerializer,
            200: OpenApiResponse(s.BatchResponseSerializer, description="Nothing new was created."),
            **ERRORS,
        },
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = self.memory_access()
        key = _idempotency_key(request)
        raw_items = _parse(s.BatchSerializer, request.data).validated_data["items"]
        drafts: list[MemoryDraft | ApiError] = []
        for raw in raw_items:
            item = s.RememberSerializer(data=raw)
            if item.is_valid() and item.validated_data["split"]:
                # Splitting turns one item into several: only the single-write route does it.
                drafts.append(field_error("split", "Not available in a batch."))
            elif item.is_valid():
                drafts.append(item.to_draft())
            else:
                fields = ", ".join(sorted(item.errors))
                drafts.append(InvalidInput(f"Invalid input: {fields}.", details={"fields": item.errors}))
        written = memories.remember_batch(
            access,
            memories.BatchRequest(tuple(drafts), idempotency_key=key, trace_parent=trace_parent(request)),
        )
        return Response(written.body(), status=written.status)


class ItemView(AgentMemoryMixin, APIView):
    @extend_schema(tags=TAG, summary="One memory", responses={200: s.MemoryItemSerializer, **ERRORS})
    def get(self, request: Request, agent_id: str, item_id: str) -> Response:
        return Response(memories.memory_get(self.memory_access(), item_id).body())

    @extend_schema(
        tags=TAG,
        summary="Change a memory's content (re-embedded; created_at kept; history written)",
        request=s.UpdateSerializer,
        responses={
            200: s.MemoryItemSerializer,
            **ERRORS,
            409: OpenApiResponse(description="Under legal hold, or the agent is deactivated."),
        },
    )
    def patch(self, request: Request, agent_id: str, item_id: str) -> Response:
        access = self.memory_access()
        content = _parse(s.UpdateSerializer, request.data).validated_data["content"]
        return Response(memories.update(access, item_id, content).body())

    @extend_schema(
        tags=TAG,
        summary="Forget a memory",
        request=None,
        responses={
            204: None,
            **ERRORS,
            409: OpenApiResponse(description="Under legal hold, or the agent is deactivated."),
        },
    )
    def delete(self, request: Request, agent_id: str, item_id: str) -> Response:
        memories.forget(self.memory_access(), item_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class RecallView(AgentMemoryMixin, APIView):
    @extend_schema(
        tags=TAG,
        summary="Recall memories framed as untrusted data",
        request=s.RecallModeSerializer,
        responses={200: s.RecallResponseSerializer, **ERRORS},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = self.memory_access()
        parsed = _parse(s.RecallModeSerializer, request.data)
        return Response(recall.recall(access, parsed.to_request(trace_parent=trace_parent(request))).body())


class SearchView(AgentMemoryMixin, APIView):
    @extend_schema(
        tags=TAG,
        summary="Search memories: a plain ranked list with filters",
        request=s.SearchSerializer,
        responses={200: s.SearchResponseSerializer, **ERRORS},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = self.memory_access()
        return Response(recall.search(access, _parse(s.SearchSerializer, request.data).to_request()).body())


class PurgeView(AgentMemoryMixin, APIView):
    @extend_schema(
        tags=TAG,
        summary="Delete every memory of the agent in one scope (needs confirm=true)",
        request=s.PurgeSerializer,
        responses={200: s.PurgeReportSerializer, **ERRORS},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = self.memory_access()
        report = memories.purge(access, _parse(s.PurgeSerializer, request.data).to_request())
        return Response(s.PurgeReportSerializer(report).data)


def _export_bytes(lines: Iterator[dict[str, Any]]) -> Iterator[bytes]:
    for data in lines:
        yield (json.dumps(data, ensure_ascii=False, default=str) + "\n").encode("utf-8")


class ExportView(AgentMemoryMixin, APIView):
    @extend_schema(
        tags=TAG,
        summary="Export everything the caller may read, streamed as JSON Lines",
        request=s.ExportSerializer,
        responses={
            (200, "application/jsonl"): OpenApiResponse(
                OpenApiTypes.STR, description="One JSON object per line; `type` is memory or session_message."
            ),
            **ERRORS,
        },
    )
    def post(self, request: Request, agent_id: str) -> StreamingHttpResponse:
        access = self.memory_access()
        data = _parse(s.ExportSerializer, request.data).validated_data
        rows = memories.export_lines(access, data.get("scopes"))
        first = next(rows, None)  # validates the scopes before streaming starts

        def lines() -> Iterator[bytes]:
            if first is not None:
                yield from _export_bytes(iter([first]))
                yield from _export_bytes(rows)

        response = StreamingHttpResponse(lines(), content_type="application/jsonl; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="memory-{access.agent.pk}.jsonl"'
        return response


class SessionMessagePagination(CursorPagination):
    ordering = "id"


class SessionMessagesView(AgentMemoryMixin, generics.GenericAPIView):
    queryset = SessionMessage.objects.none()  # for the schema; reads go through memory.selectors
    serializer_class = s.SessionMessageSerializer
    pagination_class = SessionMessagePagination

    def _session(self, session_id: str) -> str:
        if not 1 <= len(session_id) <= 128:
            raise ValidationError({"session_id": ["1 to 128 characters."]})
        return session_id

    @extend_schema(
        tags=TAG,
        summary="Append a message to a session (session memory, builtin only)",
        request=s.SessionMessageCreateSerializer,
        responses={201: s.SessionMessageSerializer, **ERRORS},
    )
    def post(self, request: Request, agent_id: str, session_id: str) -> Response:
        access = self.memory_access()
        parsed = _parse(s.SessionMessageCreateSerializer, request.data)
        written = memories.session_append(access, parsed.to_request(self._session(session_id)))
        return Response(written.body(), status=status.HTTP_201_CREATED)

    @extend_schema(
        tags=TAG,
        summary="A session's messages, oldest first",
        parameters=[
            OpenApiParameter("limit", OpenApiTypes.INT, description="Page size, 1 to 200 (default 50)."),
            OpenApiParameter("cursor", OpenApiTypes.STR),
        ],
        responses={200: s.SessionMessageSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request, agent_id: str, session_id: str) -> Response:
        access = self.memory_access()
        page = self.paginate_queryset(memories.session_messages(access, self._session(session_id)))
        return self.get_paginated_response([s.message_json(message) for message in page])
