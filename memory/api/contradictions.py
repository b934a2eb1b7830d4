"""Contradiction decisions under /v1/memory/agents/{agent_id}/contradictions: what the
resolver retired on write, with its reason, for an operator to review and undo.

Editors of the agent (users) only: someone who may merely view the agent gets a
403, anyone else (or another tenant) the gate's 404.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import Forbidden, InvalidInput, NotFound
from core.pagination import CursorPagination
from governance.models import Agent
from governance.models.agents import AgentPermission
from governance.permissions import IsUser
from governance.policy import MemoryPolicy
from governance.selectors import access_agent, memory_policy_for
from memory.enforcement import Actor, MemoryAccess
from memory.models import ContradictionDecision
from memory.services.contradictions import contradiction_undo, contradictions_for

TAG = ["memory graph"]
ERRORS = {
    400: OpenApiResponse(description="Invalid input; `details.fields` names each bad field."),
    401: OpenApiResponse(description="No or an invalid API key."),
    403: OpenApiResponse(description="You may view the agent but are not its editor."),
    404: OpenApiResponse(description="Unknown or foreign agent or decision."),
    409: OpenApiResponse(description="The decision was already undone (`contradiction_undone`)."),
}


class ContradictionSerializer(serializers.ModelSerializer):
    new_item_id = serializers.UUIDField(read_only=True)
    old_item_id = serializers.UUIDField(read_only=True)
    new_content = serializers.CharField(source="new_item.content", read_only=True)
    old_content = serializers.CharField(source="old_item.content", read_only=True)

    class Meta:
        model = ContradictionDecision
        fields = [
            "id",
            "new_item_id",
            "old_item_id",
            "new_content",
            "old_content",
            "resolver",
            "reason",
            "details",
            "status",
            "actor",
            "created_at",
            "undone_at",
            "undone_by",
        ]
        read_only_fields = fields


def _editor_agent(request: Request, agent_id: str) -> Agent:
    try:
        return access_agent(request.user, agent_id, AgentPermission.EDITOR)
    except NotFound:
        access_agent(request.user, agent_id, AgentPermission.VIEWER)  # 404 for everyone else
        raise Forbidden("Reviewing contradictions needs the editor role.") from None


class ContradictionListView(generics.GenericAPIView):
    permission_classes = [IsAuthenticated, IsUser]
    queryset = ContradictionDecision.objects.none()  # for the schema
    serializer_class = ContradictionSerializer
    pagination_class = CursorPagination

    @extend_schema(
        tags=TAG,
        summary="Contradiction decisions of the agent's writes, newest first",
        parameters=[
            OpenApiParameter("status", str, enum=ContradictionDecision.Status.values),
            OpenApiParameter("limit", int, description="page size (1-200, default 50)"),
        ],
        responses={200: ContradictionSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = _editor_agent(request, agent_id)
        qs = contradictions_for(agent)
        wanted = request.query_params.get("status")
        if wanted is not None:
            if wanted not in ContradictionDecision.Status.values:
                raise InvalidInput(
                    "Invalid input: status.",
                    details={
                        "fields": {"status": [f"One of {', '.join(ContradictionDecision.Status.values)}."]}
                    },
                )
            qs = qs.filter(status=wanted)
        page = self.paginate_queryset(qs)
        return self.get_paginated_response(ContradictionSerializer(page, many=True).data)


class ContradictionUndoView(APIView):
    permission_classes = [IsAuthenticated, IsUser]

    @extend_schema(
        tags=TAG,
        summary="Undo a decision: the retired fact is current again (the new one stays); audited",
        request=None,
        responses={200: ContradictionSerializer, **ERRORS},
    )
    def post(self, request: Request, agent_id: str, decision_id: str) -> Response:
        agent = _editor_agent(request, agent_id)
        user = request.user
        policy: MemoryPolicy = memory_policy_for(agent)
        access = MemoryAccess(
            agent=agent, policy=policy, actor=Actor("user", str(user.pk), user.get_username())
        )
        decision = contradiction_undo(access=access, decision_id=decision_id, user=user)
        decision = ContradictionDecision.objects.select_related("new_item", "old_item").get(pk=decision.pk)
        return Response(ContradictionSerializer(decision).data)
