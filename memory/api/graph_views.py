"""Graph endpoints under /v1/memory/agents/{agent_id}/: discover, trace, causal_chain,
what_if, and supersede / revive / history of one memory. Thin: parse, call one
selector or service in memory.reasoning / memory.services, render."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.api import graph_serializers as g
from memory.api import serializers as s
from memory.api.views import ERRORS, _access, _parse
from memory.enforcement import Keys, MemoryAccess, read_scopes, visible_q
from memory.reasoning import graph
from memory.retrieval import graphrank
from memory.retrieval.hybrid import RecallQuery
from memory.services.supersession import memory_history, memory_revive, memory_supersede

TAG = ["memory graph"]


def _view(access: MemoryAccess, data: dict[str, Any], scopes: tuple[str, ...] | None = None) -> graph.View:
    """What traversal may see: the requested (isolate) or the policy's readable scopes,
    at ``as_of``, optionally with retired facts."""
    covered = scopes if scopes is not None else read_scopes(access, None)
    q = visible_q(
        access, covered, at=data.get("as_of"), include_superseded=data.get("include_superseded", False)
    )
    return graph.View(access, q)


class DiscoverView(APIView):
    @extend_schema(
        tags=TAG,
        summary="Facts connected to a query, ranked by relevance fused with a graph score, with why",
        request=g.DiscoverSerializer,
        responses={200: g.DiscoverResponseSerializer, **ERRORS},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = _access(request, agent_id)
        data = _parse(g.DiscoverSerializer, request.data).validated_data
        results, scopes = discover_facts(access, data)
        return Response({"results": results, "scopes": list(scopes)})


def discover_facts(
    access: MemoryAccess, data: dict[str, Any]
) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    scopes = read_scopes(access, data.get("scopes"))
    # A policy requiring strict isolation confines traversal as isolate=true does.
    isolate = data["isolate"] or access.policy.required_isolation == "strict"
    seeds = RecallQuery(
        query=data["query"],
        scopes=scopes,
        keys=Keys(
            user_id=data.get("user_id") or access.default_user_id or None,
            session_id=data.get("session_id"),
            narrow=True,
        ),
        top_k=data["top_k"],
        as_of=data.get("as_of"),
        include_superseded=data["include_superseded"],
    )
    view = _view(access, data, scopes if isolate else None)
    found = graphrank.rank(
        access, seeds, view, hops=data["hops"], limit=data["max_results"], max_visited=data["max_visited"]
    )
    relations = graph.relations_of([f.item.pk for f in found])
    sessions = {f.item.pk: f.item.session_id for f in found}
    results = [
        {
            "id": str(f.item.pk),
            "content": f.item.content,
            "session_id": f.item.session_id,
            "kind": f.kind,
            "hop": f.hop,
            "seed_id": str(f.seed_id),
            "cross_session": f.item.session_id != sessions.get(f.seed_id, f.item.session_id),
            "score": f.score,
            "why": f.why(),
            "path": f.path,
            "relations": relations[f.item.pk],
            "trust": "untrusted",
        }
        for f in found
    ]
    return results, scopes


class TraceView(APIView):
    @extend_schema(
        tags=TAG,
        summary="Follow causal links from a fact or text to its effects or its (root) causes",
        request=g.TraceSerializer,
        responses={200: g.TraceResponseSerializer, **ERRORS},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = _access(request, agent_id)
        data = _parse(g.TraceSerializer, request.data).validated_data
        return Response(trace_body(access, data))


def trace_body(access: MemoryAccess, data: dict[str, Any]) -> dict[str, Any]:
    return graph.trace(
        _view(access, data),
        direction=data["direction"],
        item_id=data.get("item_id"),
        content=data.get("content"),
        max_depth=data["max_depth"],
        max_visited=data["max_visited"],
    )


class CausalChainView(APIView):
    @extend_schema(
        tags=TAG,
        summary="The shortest chain of asserted causal links from one event to another (null if none)",
        request=g.CausalChainSerializer,
        responses={200: g.CausalChainResponseSerializer, **ERRORS},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = _access(request, agent_id)
        data = _parse(g.CausalChainSerializer, request.data).validated_data
        return Response(causal_chain_body(access, data))


def causal_chain_body(access: MemoryAccess, data: dict[str, Any]) -> dict[str, Any]:
    chain = graph.causal_chain(
        _view(access, data),
        source=data["from"],
        target=data["to"],
        max_depth=data["max_depth"],
        max_visited=data["max_visited"],
    )
    return {"chain": chain}


class WhatIfView(APIView):
    @extend_schema(
        tags=TAG,
        summary="What collapses if one fact were removed (hypothetical; nothing changes)",
        request=g.WhatIfSerializer,
        responses={200: g.WhatIfResponseSerializer, **ERRORS},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = _access(request, agent_id)
        data = _parse(g.WhatIfSerializer, request.data).validated_data
        return Response(what_if_body(access, data))


def what_if_body(access: MemoryAccess, data: dict[str, Any]) -> dict[str, Any]:
    return graph.what_if(
        _view(access, data),
        item_id=data["item_id"],
        origin=data["origin"],
        direction=data["direction"],
        max_depth=data["max_depth"],
        max_visited=data["max_visited"],
    )


class SupersedeView(APIView):
    @extend_schema(
        tags=TAG,
        summary="Replace a fact with a new one; the old one is retired (invalid_at), not deleted",
        request=g.SupersedeSerializer,
        responses={
            201: g.SupersedeResponseSerializer,
            **ERRORS,
            409: OpenApiResponse(description="Under legal hold, or the agent is deactivated."),
        },
    )
    def post(self, request: Request, agent_id: str, item_id: str) -> Response:
        access = _access(request, agent_id)
        data = _parse(g.SupersedeSerializer, request.data).validated_data
        outcome = memory_supersede(
            access=access, item_id=item_id, content=data["content"], reason=data["reason"]
        )
        return Response(
            {"old": s.item_json(outcome.old), "new": s.item_json(outcome.new)}, status=status.HTTP_201_CREATED
        )


class ReviveView(APIView):
    @extend_schema(
        tags=TAG,
        summary="Re-assert a retired fact: it becomes current again and retires its successor",
        request=None,
        responses={
            201: g.SupersedeResponseSerializer,
            **ERRORS,
            409: OpenApiResponse(
                description="Under legal hold, nothing currently supersedes it, or the agent is deactivated."
            ),
        },
    )
    def post(self, request: Request, agent_id: str, item_id: str) -> Response:
        access = _access(request, agent_id)
        outcome = memory_revive(access=access, item_id=item_id)
        return Response(
            {"old": s.item_json(outcome.old), "new": s.item_json(outcome.new)}, status=status.HTTP_201_CREATED
        )


class HistoryView(APIView):
    @extend_schema(
        tags=TAG,
        summary="A memory's supersession links and every recorded mutation",
        responses={200: g.HistoryResponseSerializer, **ERRORS},
    )
    def get(self, request: Request, agent_id: str, item_id: str) -> Response:
        access = _access(request, agent_id)
        return Response(history_body(access, item_id))


def history_body(access: MemoryAccess, item_id: Any) -> dict[str, Any]:
    history = memory_history(access, item_id)
    history["item"] = s.item_json(history["item"])
    return history
