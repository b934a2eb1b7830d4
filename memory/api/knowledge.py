"""Answers and knowledge datasets under /v1/memory/agents/{agent_id}/. Thin: parse,
call one operation of memory.operations.knowledge, render its result."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.pagination import CursorPagination
from memory.api.views import ERRORS, AgentMemoryMixin, _parse, trace_parent
from memory.knowledge_serializers import (
    AnswerResponseSerializer,
    AnswerSerializer,
    DatasetQuerySerializer,
    DatasetSerializer,
    DeleteResponseSerializer,
    GraphSerializer,
    IngestResponseSerializer,
    IngestSerializer,
    JobRefSerializer,
    KnowledgeSearchResponseSerializer,
    KnowledgeSearchSerializer,
    RelationsQuerySerializer,
    RelationsResponseSerializer,
)
from memory.models import Dataset
from memory.operations import knowledge as ops
from memory.rendering import dataset_json

TAG = ["memory knowledge"]


# --- views -----------------------------------------------------------------------------


class AnswerView(AgentMemoryMixin, APIView):
    @extend_schema(
        tags=TAG,
        summary="Answer a question from memory: the facts and paths used, and a cited answer",
        request=AnswerSerializer,
        responses={
            200: AnswerResponseSerializer,
            502: OpenApiResponse(description="The configured synthesizer engine is unavailable."),
            **ERRORS,
        },
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = self.memory_access()
        return Response(ops.answer(access, _parse(AnswerSerializer, request.data).to_request()).body())


class DatasetPagination(CursorPagination):
    ordering = ("-created_at", "-id")


class KnowledgeView(AgentMemoryMixin, APIView):
    @extend_schema(
        tags=TAG,
        summary="Ingest 1 to 50 texts into a dataset (chunks become document memories)",
        request=IngestSerializer,
        responses={
            201: IngestResponseSerializer,
            409: OpenApiResponse(description="The dataset id belongs to another agent or engine."),
            502: OpenApiResponse(description="The policy's knowledge engine is unavailable."),
            **ERRORS,
        },
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = self.memory_access()
        parsed = _parse(IngestSerializer, request.data)
        written = ops.ingest_knowledge(
            access, parsed.to_request(trace_parent=trace_parent(request)), requested_by=request.user
        )
        return Response(written.body(), status=status.HTTP_201_CREATED)


class DatasetListView(AgentMemoryMixin, generics.GenericAPIView):
    queryset = Dataset.objects.none()  # for the schema; reads go through the knowledge selectors
    serializer_class = DatasetSerializer
    pagination_class = DatasetPagination

    @extend_schema(
        tags=TAG,
        summary="Knowledge datasets the agent may read (cursor-paginated, newest first)",
        parameters=[
            DatasetQuerySerializer,
            OpenApiParameter("limit", OpenApiTypes.INT, description="Page size, 1 to 200 (default 50)."),
            OpenApiParameter("cursor", OpenApiTypes.STR),
        ],
        responses={200: DatasetSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        access = self.memory_access()
        query = _parse(DatasetQuerySerializer, request.query_params).validated_data
        page = self.paginate_queryset(ops.datasets(access, scope=query.get("scope")))
        return self.get_paginated_response([dataset_json(dataset) for dataset in page])


class KnowledgeGraphView(AgentMemoryMixin, APIView):
    @extend_schema(
        tags=TAG,
        summary="Build the graph of datasets (a job; follow it at /v1/jobs/{id})",
        request=GraphSerializer,
        responses={202: JobRefSerializer, **ERRORS},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = self.memory_access()
        data = _parse(GraphSerializer, request.data).validated_data
        built = ops.graph_build(access, data["dataset_ids"], requested_by=request.user)
        return Response(built.body(), status=status.HTTP_202_ACCEPTED)


class KnowledgeSearchView(AgentMemoryMixin, APIView):
    @extend_schema(
        tags=TAG,
        summary="Search datasets: chunks, lexical chunks, summaries, or a completion with its context",
        request=KnowledgeSearchSerializer,
        responses={
            200: KnowledgeSearchResponseSerializer,
            502: OpenApiResponse(description="Engine down."),
            **ERRORS,
        },
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = self.memory_access()
        parsed = _parse(KnowledgeSearchSerializer, request.data)
        return Response(
            ops.knowledge_search(access, parsed.to_request(trace_parent=trace_parent(request))).body()
        )


class DatasetRelationsView(AgentMemoryMixin, APIView):
    @extend_schema(
        tags=TAG,
        summary="A dataset's graph: entities its chunks mention, the causal links they assert",
        parameters=[RelationsQuerySerializer],
        responses={200: RelationsResponseSerializer, **ERRORS},
    )
    def get(self, request: Request, agent_id: str, dataset_id: str) -> Response:
        access = self.memory_access()
        query = _parse(RelationsQuerySerializer, request.query_params).validated_data
        found = ops.dataset_relations(
            access, dataset_id, limit=query["limit"], trace_parent=trace_parent(request)
        )
        return Response(found.body())


class DatasetDetailView(AgentMemoryMixin, APIView):
    @extend_schema(
        tags=TAG,
        summary="Delete a dataset and everything derived from it (refused under legal hold)",
        request=None,
        responses={
            200: DeleteResponseSerializer,
            409: OpenApiResponse(description="Under legal hold."),
            **ERRORS,
        },
    )
    def delete(self, request: Request, agent_id: str, dataset_id: str) -> Response:
        access = self.memory_access()
        return Response(ops.dataset_delete(access, dataset_id, trace_parent=trace_parent(request)).body())
