"""Graph endpoints under /v1/memory/agents/{agent_id}/: discover, trace, causal_chain,
what_if, and supersede / revive / history of one memory. Thin: parse, call one
operation of memory.operations.graph, render its result."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory import graph_serializers as g
from memory.api.views import ERRORS, AgentMemoryMixin, _parse
from memory.operations import graph

TAG = ["memory graph"]


class DiscoverView(AgentMemoryMixin, APIView):
    @extend_schema(
        tags=TAG,
        summary="Facts connected to a query: seeds by hybrid recall, then entity and causal hops",
        request=g.DiscoverSerializer,
        responses={200: g.DiscoverResponseSerializer, **ERRORS},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = self.memory_access()
        return Response(
            graph.discover(access, _parse(g.DiscoverSerializer, request.data).to_request()).body()
        )


class TraceView(AgentMemoryMixin, APIView):
    @extend_schema(
        tags=TAG,
        summary="Follow causal links from a fact or text to its effects or its (root) causes",
        request=g.TraceSerializer,
        responses={200: g.TraceResponseSerializer, **ERRORS},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = self.memory_access()
        return Response(graph.trace(access, _parse(g.TraceSerializer, request.data).to_request()).body())


class CausalChainView(AgentMemoryMixin, APIView):
    @extend_schema(
        tags=TAG,
        summary="The shortest chain of asserted causal links from one event to another (null if none)",
        request=g.CausalChainSerializer,
        responses={200: g.CausalChainResponseSerializer, **ERRORS},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = self.memory_access()
        parsed = _parse(g.CausalChainSerializer, request.data)
        return Response(graph.causal_chain(access, parsed.to_request()).body())


class WhatIfView(AgentMemoryMixin, APIView):
    @extend_schema(
        tags=TAG,
        summary="What collapses if one fact were removed (hypothetical; nothing changes)",
        request=g.WhatIfSerializer,
        responses={200: g.WhatIfResponseSerializer, **ERRORS},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        access = self.memory_access()
        return Response(graph.what_if(access, _parse(g.WhatIfSerializer, request.data).to_request()).body())


class SupersedeView(AgentMemoryMixin, APIView):
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
        access = self.memory_access()
        parsed = _parse(g.SupersedeSerializer, request.data)
        return Response(
            graph.supersede(access, parsed.to_request(item_id)).body(), status=status.HTTP_201_CREATED
        )


class ReviveView(AgentMemoryMixin, APIView):
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
        return Response(graph.revive(self.memory_access(), item_id).body(), status=status.HTTP_201_CREATED)


class HistoryView(AgentMemoryMixin, APIView):
    @extend_schema(
        tags=TAG,
        summary="A memory's supersession links and every recorded mutation",
        responses={200: g.HistoryResponseSerializer, **ERRORS},
    )
    def get(self, request: Request, agent_id: str, item_id: str) -> Response:
        return Response(graph.history(self.memory_access(), item_id).body())
