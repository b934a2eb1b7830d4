"""Answers and knowledge datasets under /v1/memory/agents/{agent_id}/. Thin: parse,
call one service or selector, render."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.pagination import CursorPagination
from core.vocabulary import CLASSIFICATION_NAMES, Classification, Scope
from memory.api.graph_views import discover_facts
from memory.api.serializers import MAX_QUERY_CHARS, StrictChoice, Text
from memory.api.views import ERRORS, _access, _parse, _recall_query
from memory.enforcement import MemoryAccess
from memory.models import Dataset
from memory.reasoning.answer import answer_from
from memory.reasoning.synthesis import BUILTIN_SYNTHESIZER, synthesizer_for
from memory.retrieval.hybrid import retrieve
from memory.services import knowledge as k

TAG = ["memory knowledge"]
ANSWER_MODES = ["recall", "discover"]


def _trace_parent(request: Request) -> str | None:
    return request.headers.get("traceparent")


# --- serializers -----------------------------------------------------------------------


class AnswerSerializer(serializers.Serializer):
    query = Text(max_length=MAX_QUERY_CHARS)
    mode = serializers.ChoiceField(
        choices=ANSWER_MODES,
        default="discover",
        help_text="recall: hybrid recall only; discover: seeds expanded over entities and causal links.",
    )
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=Scope.choices), required=False, allow_empty=False
    )
    top_k = serializers.IntegerField(min_value=1, max_value=50, default=5)
    hops = serializers.IntegerField(min_value=1, max_value=4, default=2, help_text="discover only.")
    as_of = serializers.DateTimeField(required=False, allow_null=True)
    user_id = Text(max_length=128, required=False)
    session_id = Text(max_length=128, required=False)
    synthesizer = Text(
        max_length=63,
        default=BUILTIN_SYNTHESIZER,
        help_text="'builtin' (deterministic, no model) or the id of an openai_compatible engine instance.",
    )


class AnswerBodySerializer(serializers.Serializer):
    text = serializers.CharField()
    citations = serializers.ListField(
        child=serializers.CharField(), help_text="Item ids the answer rests on."
    )
    synthesizer = serializers.CharField()
    detail = serializers.DictField()


class AnswerFactSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    content = serializers.CharField()
    kind = serializers.CharField(help_text="seed | causal | entity (discover) or recall.")
    score = serializers.FloatField(allow_null=True)
    why = serializers.DictField(required=False, help_text="discover: why the fact ranked (see discover).")
    path = serializers.ListField(child=serializers.DictField())
    trust = serializers.CharField()


class AnswerResponseSerializer(serializers.Serializer):
    query = serializers.CharField()
    mode = serializers.CharField()
    answer = AnswerBodySerializer()
    facts = AnswerFactSerializer(many=True)
    chain = serializers.ListField(child=serializers.DictField(), help_text="Causal hops, root cause first.")
    entities = serializers.ListField(child=serializers.CharField())
    scopes = serializers.ListField(child=serializers.CharField())


class IngestSerializer(serializers.Serializer):
    texts = serializers.ListField(
        child=Text(trim_whitespace=False, allow_blank=True), min_length=1, max_length=k.MAX_TEXTS
    )
    dataset_id = Text(max_length=100)
    scope = serializers.ChoiceField(choices=list(k.KNOWLEDGE_SCOPES), default=Scope.AGENT)
    team = Text(max_length=128, default="", allow_blank=True)
    project = Text(max_length=128, default="", allow_blank=True)
    classification = serializers.ChoiceField(choices=CLASSIFICATION_NAMES, required=False)
    retention_days = serializers.IntegerField(min_value=1, max_value=36500, required=False, allow_null=True)
    legal_hold = serializers.BooleanField(default=False)
    build_graph = serializers.BooleanField(default=False, help_text="Also queue the graph build (a job).")


class DatasetSerializer(serializers.Serializer):
    dataset_id = serializers.CharField(source="name")
    agent_id = serializers.UUIDField()
    scope = serializers.CharField()
    team = serializers.CharField()
    project = serializers.CharField()
    classification = serializers.SerializerMethodField()
    legal_hold = serializers.BooleanField()
    engine_id = serializers.CharField(source="engine")
    documents = serializers.IntegerField()
    graph_status = serializers.CharField()
    graph_job = serializers.UUIDField(allow_null=True)
    graph_built_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()

    def get_classification(self, obj: Dataset) -> str:
        return str(Classification(obj.classification).label)


class IngestResponseSerializer(serializers.Serializer):
    dataset = DatasetSerializer()
    created = serializers.BooleanField()
    engine_id = serializers.CharField()
    chunks = serializers.IntegerField()
    stored = serializers.IntegerField()
    deduplicated = serializers.IntegerField()
    failed = serializers.ListField(child=serializers.DictField())
    item_ids = serializers.ListField(child=serializers.UUIDField())
    engine_result = serializers.DictField(allow_null=True)
    job = serializers.DictField(allow_null=True)


class DatasetQuerySerializer(serializers.Serializer):
    scope = StrictChoice(choices=list(k.KNOWLEDGE_SCOPES), required=False)


class GraphSerializer(serializers.Serializer):
    dataset_ids = serializers.ListField(child=Text(max_length=100), min_length=1, max_length=50)


class JobRefSerializer(serializers.Serializer):
    job = serializers.DictField()


class KnowledgeSearchSerializer(serializers.Serializer):
    query = Text(max_length=MAX_QUERY_CHARS)
    dataset_ids = serializers.ListField(
        child=Text(max_length=100), required=False, max_length=50, help_text="Default: every visible dataset."
    )
    top_k = serializers.IntegerField(min_value=1, max_value=50, default=10)
    search_type = serializers.ChoiceField(choices=list(k.SEARCH_TYPES), default="CHUNKS")
    hops = serializers.IntegerField(min_value=1, max_value=4, default=2, help_text="GRAPH_COMPLETION only.")
    synthesizer = Text(max_length=63, default=BUILTIN_SYNTHESIZER, help_text="Completion types only.")


class KnowledgeSearchResponseSerializer(serializers.Serializer):
    search_type = serializers.CharField()
    datasets = serializers.ListField(child=serializers.CharField())
    results = serializers.ListField(child=serializers.DictField())
    context = serializers.DictField(
        required=False, help_text="Completion types: facts, entities, causal paths."
    )
    answer = AnswerBodySerializer(required=False)
    engine_answers = serializers.ListField(child=serializers.DictField(), required=False)


class RelationsQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=500, default=100)


class RelationsResponseSerializer(serializers.Serializer):
    dataset_id = serializers.CharField()
    engine_id = serializers.CharField()
    entities = serializers.ListField(child=serializers.DictField())
    relations = serializers.ListField(child=serializers.DictField())
    causal_edges = serializers.ListField(child=serializers.DictField())


class DeleteResponseSerializer(serializers.Serializer):
    dataset_id = serializers.CharField()
    deleted = serializers.DictField(child=serializers.IntegerField())


def _job_json(job: Any) -> dict[str, Any]:
    return {"id": str(job.pk), "status": job.status, "url": f"/v1/jobs/{job.pk}"}


# --- views -----------------------------------------------------------------------------


class AnswerView(APIView):
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
        access = _access(request, agent_id)
        data = _parse(AnswerSerializer, request.data).validated_data
        return Response(answer_body(access, data))


def answer_body(access: MemoryAccess, data: dict[str, Any]) -> dict[str, Any]:
    """POST …/answer's body; the MCP answer tool answers the same."""
    synth = synthesizer_for(access.agent, data["synthesizer"])  # unknown engine: 404 before any work
    if data["mode"] == "discover":
        found, scopes = discover_facts(
            access,
            {
                **data,
                "isolate": False,
                "include_superseded": False,
                "max_results": data["top_k"] * 3,
                "max_visited": data["top_k"] * 20,
            },
        )
        facts = [
            {
                "id": f["id"],
                "content": f["content"],
                "kind": f["kind"],
                "score": f["score"],
                "why": f["why"],
                "path": f["path"],
                "trust": "untrusted",
            }
            for f in found
        ]
    else:
        rq = _recall_query(
            access, {**data, "search_mode": "hybrid", "include_superseded": False}, search=False
        )
        scopes = rq.scopes
        facts = [
            {
                "id": str(h.item.pk),
                "content": h.item.content,
                "kind": "recall",
                "score": h.score,
                "path": [],
                "trust": "untrusted",
            }
            for h in retrieve(access, rq)
        ]
    answer, chain, entities = answer_from(
        tenant_id=access.tenant_id, question=data["query"], facts=facts, synthesizer=synth
    )
    return {
        "query": data["query"],
        "mode": data["mode"],
        "answer": answer.to_dict(),
        "facts": facts,
        "chain": chain,
        "entities": entities,
        "scopes": list(scopes),
    }


class DatasetPagination(CursorPagination):
    ordering = ("-created_at", "-id")


class KnowledgeView(APIView):
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
        access = _access(request, agent_id)
        data = _parse(IngestSerializer, request.data).validated_data
        body = ingest_body(access, data, requested_by=request.user, trace_parent=_trace_parent(request))
        return Response(body, status=status.HTTP_201_CREATED)


def ingest_body(
    access: MemoryAccess, data: dict[str, Any], *, requested_by: Any, trace_parent: str | None
) -> dict[str, Any]:
    """POST …/knowledge's body; the MCP ingest_knowledge tool answers the same."""
    outcome = k.knowledge_ingest(
        access=access,
        texts=data["texts"],
        dataset_name=data["dataset_id"],
        scope=data["scope"],
        team=data["team"],
        project=data["project"],
        classification=data.get("classification"),
        retention_days=data.get("retention_days"),
        legal_hold=data["legal_hold"],
        build_graph=data["build_graph"],
        requested_by=requested_by,
        trace_parent=trace_parent,
    )
    return {
        "dataset": DatasetSerializer(outcome.dataset).data,
        "created": outcome.created,
        "engine_id": outcome.engine,
        "chunks": outcome.chunks,
        "stored": outcome.stored,
        "deduplicated": outcome.deduplicated,
        "failed": outcome.failed,
        "item_ids": outcome.item_ids,
        "engine_result": outcome.remote,
        "job": _job_json(outcome.job) if outcome.job else None,
    }


class DatasetListView(generics.GenericAPIView):
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
        access = _access(request, agent_id)
        query = _parse(DatasetQuerySerializer, request.query_params).validated_data
        page = self.paginate_queryset(k.datasets_visible(access, scope=query.get("scope")))
        return self.get_paginated_response(DatasetSerializer(page, many=True).data)


class KnowledgeGraphView(APIView):
    @extend_schema(
        tags=TAG,
        summary="Build the graph of datasets (a job; follow it at /v1/jobs/{id})",
        request=GraphSerializer,
        responses={202: JobRefSerializer, **ERRORS},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = _access(request, agent_id)
        data = _parse(GraphSerializer, request.data).validated_data
        job = k.knowledge_graph_start(
            access=access, dataset_names=data["dataset_ids"], requested_by=request.user
        )
        return Response({"job": _job_json(job)}, status=status.HTTP_202_ACCEPTED)


class KnowledgeSearchView(APIView):
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
        access = _access(request, agent_id)
        data = _parse(KnowledgeSearchSerializer, request.data).validated_data
        return Response(knowledge_search_body(access, data, trace_parent=_trace_parent(request)))


def knowledge_search_body(
    access: MemoryAccess, data: dict[str, Any], *, trace_parent: str | None
) -> dict[str, Any]:
    """POST …/knowledge/search's body; the MCP search_knowledge tool answers the same."""
    return k.knowledge_search(
        access=access,
        query=data["query"],
        dataset_names=data.get("dataset_ids"),
        top_k=data["top_k"],
        search_type=data["search_type"],
        synthesizer=data["synthesizer"],
        hops=data["hops"],
        trace_parent=trace_parent,
    )


class DatasetRelationsView(APIView):
    @extend_schema(
        tags=TAG,
        summary="A dataset's graph: entities its chunks mention, the causal links they assert",
        parameters=[RelationsQuerySerializer],
        responses={200: RelationsResponseSerializer, **ERRORS},
    )
    def get(self, request: Request, agent_id: str, dataset_id: str) -> Response:
        access = _access(request, agent_id)
        query = _parse(RelationsQuerySerializer, request.query_params).validated_data
        return Response(
            k.dataset_relations(
                access=access, name=dataset_id, limit=query["limit"], trace_parent=_trace_parent(request)
            )
        )


class DatasetDetailView(APIView):
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
        access = _access(request, agent_id)
        counts = k.knowledge_dataset_delete(
            access=access, name=dataset_id, trace_parent=_trace_parent(request)
        )
        return Response({"dataset_id": dataset_id, "deleted": counts})
