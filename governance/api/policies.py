"""Agent memory policy API under /v1/memory/agents/{agent_id}/policy.

Viewers read, editors write; someone who may view the agent but not edit it gets
a 403, anyone else the gate's 404 so foreign ids stay unprobeable.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import Forbidden, NotFound
from governance.api import serializers as s
from governance.models import Agent, AgentPolicyVersion
from governance.models.agents import AgentPermission
from governance.policy import DEFAULT_POLICY
from governance.selectors import access_agent, current_policy_version, policy_versions
from governance.services import policies as policy_services

TAG = ["policy"]
ERRORS = {
    400: OpenApiResponse(description="Invalid input; `details.fields` names each bad field."),
    401: OpenApiResponse(description="No or an invalid API key."),
    403: OpenApiResponse(description="You may view this agent but not edit it."),
    404: OpenApiResponse(description="Unknown or foreign agent (or policy version)."),
}


def _editable(request: Request, agent_id: str) -> Agent:
    try:
        return access_agent(request.user, agent_id, AgentPermission.EDITOR)
    except NotFound:
        access_agent(request.user, agent_id, AgentPermission.VIEWER)
        raise Forbidden("Changing the memory policy needs editor on the agent.") from None


def _render(agent: Agent, row: AgentPolicyVersion | None) -> dict[str, Any]:
    if row is None:
        return {
            "agent": agent.pk,
            "version": 0,
            "engine": AgentPolicyVersion.Engine.BUILTIN.value,
            "mem0_instance": "",
            "cognee_instance": "",
            "policy": DEFAULT_POLICY.to_json(),
            "note": "default",
            "created_by": None,
            "created_at": None,
        }
    return {
        "agent": row.agent_id,
        "version": row.version,
        "engine": row.engine,
        "mem0_instance": row.mem0_instance,
        "cognee_instance": row.cognee_instance,
        "policy": row.policy,
        "note": row.note,
        "created_by": row.created_by.get_username() if row.created_by else None,
        "created_at": row.created_at,
    }


def _out(agent: Agent, row: AgentPolicyVersion | None) -> dict[str, Any]:
    return s.PolicyVersionSerializer(_render(agent, row)).data


class PolicyView(APIView):
    @extend_schema(
        tags=TAG, summary="The memory policy in force", responses={200: s.PolicyVersionSerializer, **ERRORS}
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = access_agent(request.user, agent_id, AgentPermission.VIEWER)
        return Response(_out(agent, current_policy_version(agent)))

    @extend_schema(
        tags=TAG,
        summary="Replace the memory policy (a new immutable version)",
        request=s.PolicyUpdateSerializer,
        responses={200: s.PolicyVersionSerializer, **ERRORS},
    )
    def put(self, request: Request, agent_id: str) -> Response:
        agent = _editable(request, agent_id)
        body = s.PolicyUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        row = policy_services.policy_version_create(
            agent=agent,
            policy=data["policy"],
            engine=data["engine"],
            mem0_instance=data["mem0_instance"],
            cognee_instance=data["cognee_instance"],
            created_by=request.user,
            note=data["note"],
        )
        return Response(_out(agent, row))


class PolicyVersionsView(APIView):
    @extend_schema(
        tags=TAG,
        summary="Every version of the memory policy, newest first",
        responses={200: s.PolicyVersionSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = access_agent(request.user, agent_id, AgentPermission.VIEWER)
        return Response([_out(agent, row) for row in policy_versions(agent)])


class PolicyRestoreView(APIView):
    @extend_schema(
        tags=TAG,
        summary="Restore an old version (as a new version equal to it)",
        request=s.PolicyRestoreSerializer,
        responses={201: s.PolicyVersionSerializer, **ERRORS},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = _editable(request, agent_id)
        body = s.PolicyRestoreSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        row = policy_services.policy_version_restore(
            agent=agent,
            version=body.validated_data["version"],
            actor=request.user,
            note=body.validated_data["note"],
        )
        return Response(_out(agent, row), status=status.HTTP_201_CREATED)
