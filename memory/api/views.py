"""The agent memory API under /v1/memory/agents/{agent_id}/. Thin: parse, call one
service or selector, render. Access is the agent's own key or a user holding
can_invoke on the agent (see memory.enforcement.memory_access)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import ApiError, Forbidden, InvalidInput, NotFound
from core.pagination import CursorPagination
from governance.models.agents import AgentPermission
from governance.selectors import access_agent
from memory.api import serializers as s
from memory.enforcement import Keys, MemoryAccess, memory_access, read_scopes, visible_q
from memory.models import MemoryItem, SessionMessage
from memory.retrieval.framing import frame, new_nonce
from memory.retrieval.hybrid import Hit, RecallQuery, retrieve
from memory.selectors import (
    memory_export_rows,
    memory_item_get,
    memory_items_visible,
    session_messages_visible,
)
from memory.services import items as item_services
from memory.services.sessions import session_message_append

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


def agent_memory_access(principal: Any, agent_id: Any) -> MemoryAccess:
    """The caller's access to an agent's memory, for the REST views and the MCP tools."""
    try:
        return memory_access(principal, agent_id)
    except NotFound:
        # Someone who may see the agent learns nothing new from a 403; everyone else
        # gets the gate's 404, so foreign ids stay unprobeable.
        try:
            access_agent(principal, agent_id, AgentPermission.VIEWER)
        except NotFound:
            raise
        raise Forbidden(
            "You may view this agent but not use its memory (needs can_invoke).", code="permission_denied"
        ) from None


def _access(request: Request, agent_id: str) -> MemoryAccess:
    return agent_memory_access(request.user, agent_id)


def _idempotency_key(request: Request) -> str | None:
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not _IDEMPOTENCY_KEY.fullmatch(key):
        raise InvalidInput(
            "Invalid input: Idempotency-Key.",
            details={"fields": {"Idempotency-Key": ["1 to 255 printable ASCII characters, no spaces."]}},
        )
    return key


def _parse(serializer_class: type[Any], data: Any) -> Any:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer


def written_json(outcome: item_services.WriteOutcome) -> dict[str, Any]:
    data = s.item_json(outcome.item)
    data["deduplicated"] = outcome.deduplicated
    if outcome.contradictions is not None:
        data["contradictions"] = [
            {"id": d.pk, "old_item_id": str(d.old_item_id), "reason": d.reason}
            for d in outcome.contradictions
        ]
    return data


# split=true answers with the batch shape, one result per sentence; a write routed to
# Mem0 answers with the engine's record.
WRITTEN_OR_SPLIT = PolymorphicProxySerializer(
    component_name="WrittenOrSplit",
    serializers=[s.WrittenItemSerializer, s.BatchResponseSerializer, s.RoutedWriteSerializer],
    resource_type_field_name=None,
)


@dataclass(frozen=True)
class Remembered:
    body: dict[str, Any]
    status: int
    replayed: bool = False


def remember_written(
    access: MemoryAccess,
    parsed: s.RememberSerializer,
    *,
    idempotency_key: str | None,
    trace_parent: str | None,
) -> Remembered:
    """One remember, REST's POST …/memories and MCP's remember tool alike: under a
    mem0 / hybrid policy the engine takes the write (queued is 202, never settled);
    otherwise the builtin store, one memory or one per sentence with split."""
    draft = parsed.to_draft()
    if not parsed.validated_data["split"]:
        routed = item_services.memory_remember_routed(access=access, draft=draft, trace_parent=trace_parent)
        if routed is not None:
            code = status.HTTP_202_ACCEPTED if routed["status"] == "queued" else status.HTTP_201_CREATED
            return Remembered({"engine": routed}, code)
    else:
        routed_batch = item_services.memory_remember_batch_routed(
            access=access, drafts=list(item_services.split_drafts(draft)), trace_parent=trace_parent
        )
        if routed_batch is not None:
            return routed_batch_written(routed_batch)
        results = item_services.memory_remember_split(
            access=access, draft=draft, idempotency_key=idempotency_key
        )
        return Remembered(batch_body(results), item_services.batch_status(results))
    outcome = item_services.memory_remember(access=access, draft=draft, idempotency_key=idempotency_key)
    code = status.HTTP_201_CREATED if outcome.created else status.HTTP_200_OK
    return Remembered(written_json(outcome), code, outcome.replayed)


class RememberView(generics.GenericAPIView):
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
        access = _access(request, agent_id)
        key = _idempotency_key(request)
        parsed = _parse(s.RememberSerializer, request.data)
        written = remember_written(
            access, parsed, idempotency_key=key, trace_parent=request.headers.get("traceparent")
        )
        headers = {"Idempotent-Replayed": "true"} if written.replayed else {}
        return Response(written.body, status=written.status, headers=headers)

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
        access = _access(request, agent_id)
        query = _parse(s.ListQuerySerializer, request.query_params).validated_data
        items = memory_items_visible(
            access,
            scopes=[query["scope"]] if query.get("scope") else None,
            kind=query.get("kind"),
            session_id=query.get("session_id"),
            user_id=query.get("user_id"),
            include_content=query["include_content"],
        )
        page = self.paginate_queryset(items)
        include = query["include_content"]
        return self.get_paginated_response([s.item_json(item, include_content=include) for item in page])


class BatchView(APIView):
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
        access = _access(request, agent_id)
        key = _idempotency_key(request)
        raw_items = _parse(s.BatchSerializer, request.data).validated_data["items"]
        drafts: list[item_services.MemoryDraft | ApiError] = []
        for raw in raw_items:
            item = s.RememberSerializer(data=raw)
            if item.is_valid() and item.validated_data["split"]:
                # Splitting turns one item into several: only the single-write route does it.
                drafts.append(
                    InvalidInput(
                        "Invalid input: split.", details={"fields": {"split": ["Not available in a batch."]}}
                    )
                )
            elif item.is_valid():
                drafts.append(item.to_draft())
            else:
                fields = ", ".join(sorted(item.errors))
                drafts.append(InvalidInput(f"Invalid input: {fields}.", details={"fields": item.errors}))
        routed = item_services.memory_remember_batch_routed(
            access=access, drafts=drafts, trace_parent=request.headers.get("traceparent")
        )
        if routed is not None:
            written = routed_batch_written(routed)
            return Response(written.body, status=written.status)
        results = item_services.memory_remember_batch(access=access, drafts=drafts, idempotency_key=key)
        return Response(batch_body(results), status=item_services.batch_status(results))


def routed_batch_written(results: list[item_services.RoutedResult]) -> Remembered:
    """Under a mem0 / hybrid policy: Mem0's answer per write (queued is never settled)."""
    entries = []
    for result in results:
        entry: dict[str, Any] = {"index": result.index, "status": result.status}
        if result.error is not None:
            entry["error"] = {
                "code": result.error.code,
                "message": result.error.message,
                "details": result.error.details,
            }
        elif result.engine is not None:
            entry["engine"] = result.engine
        else:
            assert result.outcome is not None
            entry["item"] = s.item_json(result.outcome.item)
        entries.append(entry)
    counts = {
        name: sum(1 for r in results if r.status == name)
        for name in ("created", "deduplicated", "queued", "settled")
    }
    body = {**counts, "failed": sum(1 for r in results if r.status == "error"), "results": entries}
    if counts["queued"]:
        code = status.HTTP_202_ACCEPTED
    elif counts["created"] or counts["settled"]:
        code = status.HTTP_201_CREATED
    else:
        code = status.HTTP_200_OK
    return Remembered(body, code)


def batch_body(results: list[item_services.BatchResult]) -> dict[str, Any]:
    body_results = []
    for result in results:
        entry: dict[str, Any] = {"index": result.index, "status": result.status}
        if result.error is not None:
            entry["error"] = {
                "code": result.error.code,
                "message": result.error.message,
                "details": result.error.details,
            }
        else:
            assert result.outcome is not None
            entry["item"] = s.item_json(result.outcome.item)
        body_results.append(entry)
    return {
        "created": sum(1 for r in results if r.status == "created"),
        "deduplicated": sum(1 for r in results if r.status == "deduplicated"),
        "failed": sum(1 for r in results if r.status == "error"),
        "results": body_results,
    }


class ItemView(APIView):
    @extend_schema(tags=TAG, summary="One memory", responses={200: s.MemoryItemSerializer, **ERRORS})
    def get(self, request: Request, agent_id: str, item_id: str) -> Response:
        access = _access(request, agent_id)
        return Response(s.item_json(memory_item_get(access, item_id)))

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
        access = _access(request, agent_id)
        content = _parse(s.UpdateSerializer, request.data).validated_data["content"]
        item = item_services.memory_update(access=access, item_id=item_id, content=content)
        return Response(s.item_json(item))

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
        access = _access(request, agent_id)
        item_services.memory_forget(access=access, item_id=item_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


def _recall_query(access: MemoryAccess, data: dict[str, Any], *, search: bool) -> RecallQuery:
    scopes = read_scopes(access, data.get("scopes"))
    user_id = data.get("user_id") or access.default_user_id or None
    return RecallQuery(
        query=data["query"],
        scopes=scopes,
        keys=Keys(
            user_id=user_id,
            session_id=data.get("session_id"),
            team=data.get("team"),
            project=data.get("project"),
            narrow=True,
        ),
        top_k=data.get("top_k") or access.policy.recall_top_k,
        mode=data["search_mode"],
        min_score=data.get("min_score"),
        recency_weight=data.get("recency_weight"),
        kinds=tuple(data.get("kinds", ())) if search else (),
        record_kinds=tuple(data.get("record_kinds", ())) if search else (),
        created_after=data.get("created_after") if search else None,
        created_before=data.get("created_before") if search else None,
        as_of=data.get("as_of"),
        include_superseded=data.get("include_superseded", False),
    )


def _recall_result(hit: Hit) -> dict[str, Any]:
    item = hit.item
    return {
        "id": str(item.pk),
        "content": item.content,
        "score": hit.score,
        "similarity": hit.similarity,
        "vector_rank": hit.vector_rank,
        "keyword_rank": hit.keyword_rank,
        "scope": item.scope,
        "scopes": list(item.scopes),
        "kind": item.kind,
        "record_kind": item.record_kind,
        "created_at": item.created_at.isoformat(),
        "provenance": item.provenance,
        "trust": "untrusted",
    }


class RecallView(APIView):
    @extend_schema(
        tags=TAG,
        summary="Recall memories framed as untrusted data",
        request=s.RecallModeSerializer,
        responses={200: s.RecallResponseSerializer, **ERRORS},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = _access(request, agent_id)
        data = _parse(s.RecallModeSerializer, request.data).validated_data
        return Response(recall_body(access, data, trace_parent=request.headers.get("traceparent")))


def recall_body(
    access: MemoryAccess, data: dict[str, Any], *, trace_parent: str | None = None
) -> dict[str, Any]:
    """A recall answer (REST and MCP): the results and the same results framed as
    untrusted data under a fresh nonce. Under a mem0 / cognee / hybrid policy a hybrid
    recall also asks the policy's engines and merges."""
    rq = _recall_query(access, data, search=False)
    if data["mode"] == "hybrid":
        from memory import engines

        plan = engines.plan_for(access)
        router = engines.router()
        if plan.federated_recall and router is not None:
            return _routed_recall(trace_parent, access, plan, router, data, rq)
    if data["mode"] == "graph":
        results = graph_recall(access, rq, hops=data["hops"])
    else:
        results = [_recall_result(hit) for hit in retrieve(access, rq)]
    nonce = new_nonce()
    framed = [{k: r[k] for k in ("id", "scope", "kind", "created_at", "score", "content")} for r in results]
    return {
        "results": results,
        "context": frame(framed, nonce),
        "nonce": nonce,
        "search_mode": rq.mode,
        "mode": data["mode"],
        "scopes": list(rq.scopes),
    }


def _routed_recall(
    trace_parent: str | None, access: MemoryAccess, plan: Any, router: Any, data: Any, rq: RecallQuery
) -> dict[str, Any]:
    """A mem0 / cognee / hybrid policy: builtin and the policy's engines, merged by
    content with every source's match kept (see providers.routing)."""
    merged = router.recall(
        access,
        plan,
        query=rq.query,
        top_k=rq.top_k,
        user_id=rq.keys.user_id,
        session_id=rq.keys.session_id,
        trace_parent=trace_parent,
    )
    results = []
    for group in merged["results"]:
        own = next((m for m in group["matches"] if m["engine_id"] == "builtin"), None)
        first = own or group["matches"][0]
        results.append(
            {
                "id": first["external_id"],
                "content": group["text"],
                "score": group["rrf_score"],
                "kind": group["kind"],
                "kinds": group["kinds"],
                "scope": (own or {}).get("metadata", {}).get("scope", ""),
                "created_at": first["created_at"],
                "engines": list(dict.fromkeys(m["engine_id"] for m in group["matches"])),
                "matches": group["matches"],
                "conflict": group["conflict"],
                "trust": "untrusted",
            }
        )
    nonce = new_nonce()
    framed = [{k: r[k] for k in ("id", "scope", "kind", "created_at", "score", "content")} for r in results]
    return {
        "results": results,
        "context": frame(framed, nonce),
        "nonce": nonce,
        "search_mode": "federated",
        "mode": data["mode"],
        "scopes": list(rq.scopes),
        "engine": plan.engine,
        "status": merged["status"],
        "sources": merged["sources"],
    }


def graph_recall(access: MemoryAccess, rq: RecallQuery, *, hops: int) -> list[dict[str, Any]]:
    """Graph mode: the graph-aware ranking (memory.retrieval.graphrank) in the policy's
    readable scopes (or only the requested ones under strict isolation), top_k in all."""
    from memory.reasoning import graph
    from memory.retrieval import graphrank

    strict = access.policy.required_isolation == "strict"
    covered = rq.scopes if strict else read_scopes(access, None)
    view = graph.View(
        access, visible_q(access, covered, at=rq.as_of, include_superseded=rq.include_superseded)
    )
    results = []
    for f in graphrank.rank(access, rq, view, hops=hops, limit=rq.top_k, max_visited=max(200, rq.top_k * 10)):
        hit = Hit(f.item, f.score, f.similarity, f.vector_rank, f.keyword_rank)
        entry = _recall_result(hit)
        entry["graph"] = {
            "kind": f.kind, "hop": f.hop, "seed_id": str(f.seed_id), "path": f.path, "why": f.why(),
        }  # fmt: skip
        results.append(entry)
    return results


class SearchView(APIView):
    @extend_schema(
        tags=TAG,
        summary="Search memories: a plain ranked list with filters",
        request=s.SearchSerializer,
        responses={200: s.SearchResponseSerializer, **ERRORS},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = _access(request, agent_id)
        data = _parse(s.SearchSerializer, request.data).validated_data
        return Response(search_body(access, data))


def search_body(access: MemoryAccess, data: dict[str, Any]) -> dict[str, Any]:
    rq = _recall_query(access, data, search=True)
    results = [
        {
            **s.item_json(hit.item),
            "score": hit.score,
            "similarity": hit.similarity,
            "vector_rank": hit.vector_rank,
            "keyword_rank": hit.keyword_rank,
        }
        for hit in retrieve(access, rq)
    ]
    return {"results": results, "search_mode": rq.mode, "scopes": list(rq.scopes)}


class PurgeView(APIView):
    @extend_schema(
        tags=TAG,
        summary="Delete every memory of the agent in one scope (needs confirm=true)",
        request=s.PurgeSerializer,
        responses={200: s.PurgeReportSerializer, **ERRORS},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = _access(request, agent_id)
        data = _parse(s.PurgeSerializer, request.data).validated_data
        report = item_services.memory_purge(access=access, **data)
        return Response(s.PurgeReportSerializer(report).data)


def _export_lines(rows: Iterator[tuple[str, Any]]) -> Iterator[bytes]:
    for kind, row in rows:
        data = s.item_json(row) if kind == "memory" else s.message_json(row)
        data["type"] = kind
        yield (json.dumps(data, ensure_ascii=False, default=str) + "\n").encode("utf-8")


class ExportView(APIView):
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
        access = _access(request, agent_id)
        data = _parse(s.ExportSerializer, request.data).validated_data
        rows = memory_export_rows(access, data.get("scopes"))  # validates scopes before streaming starts
        first = next(rows, None)

        def lines() -> Iterator[bytes]:
            if first is not None:
                yield from _export_lines(iter([first]))
                yield from _export_lines(rows)

        response = StreamingHttpResponse(lines(), content_type="application/jsonl; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="memory-{access.agent.pk}.jsonl"'
        return response


class SessionMessagePagination(CursorPagination):
    ordering = "id"


class SessionMessagesView(generics.GenericAPIView):
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
        access = _access(request, agent_id)
        data = _parse(s.SessionMessageCreateSerializer, request.data).validated_data
        message = session_message_append(access=access, session_id=self._session(session_id), **data)
        return Response(s.message_json(message), status=status.HTTP_201_CREATED)

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
        access = _access(request, agent_id)
        messages = session_messages_visible(access, self._session(session_id))
        page = self.paginate_queryset(messages)
        return self.get_paginated_response([s.message_json(message) for message in page])
