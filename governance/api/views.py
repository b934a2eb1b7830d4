"""Identity API: who am I, agents, keys, grants, jobs. Thin: parse, call, render."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import OpenApiResponse, extend_schema
from guardian.shortcuts import get_perms, get_users_with_perms
from rest_framework import generics, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import ApiKeyNotFound, InvalidInput, NoTenant
from core.pagination import CursorPagination
from governance import authz
from governance.api import serializers as s
from governance.authz import Capability, requires
from governance.filtersets import AuditEventFilterSet
from governance.models import Agent, ApiKey, AuditEvent, User
from governance.models.agents import AgentPermission
from governance.permissions import IsUser, is_agent
from governance.selectors import (
    access_agent,
    access_job,
    agents_for,
    as_uuid,
    audit_events,
    keys_for_agent,
    keys_for_user,
    tenants_for_user,
)
from governance.services import agents as agent_services
from governance.services import jobs as job_services
from governance.services.audit import audit_verify


def _tenant_or_403(request: Request) -> Any:
    tenant = getattr(request, "tenant", None)
    if tenant is None:
        raise NoTenant("You are not a member of any tenant.")
    return tenant


class MeView(APIView):
    @extend_schema(responses=s.MeSerializer, summary="The caller, its active tenant and roles")
    def get(self, request: Request) -> Response:
        user = request.user
        if is_agent(user):
            principal = {"type": "agent", "id": str(user.agent.pk), "name": user.agent.name}
            tenants = [user.tenant]
        else:
            principal = {"type": "user", "id": str(user.pk), "name": user.get_username()}
            tenants = list(tenants_for_user(user))
        tenant = getattr(request, "tenant", None)
        data = {
            "principal": principal,
            "tenant": tenant,
            "roles": sorted(authz.roles_in(user, tenant)) if tenant else [],
            "tenants": tenants,
        }
        return Response(s.MeSerializer(data).data)


class AgentListView(APIView):
    @extend_schema(responses=s.AgentSerializer(many=True), summary="Agents the caller may view")
    def get(self, request: Request) -> Response:
        tenant = _tenant_or_403(request)
        agents = agents_for(request.user, AgentPermission.VIEWER, tenant=tenant).order_by("name")
        return Response(s.AgentSerializer(agents, many=True).data)

    @extend_schema(
        request=s.AgentCreateSerializer, responses={201: s.AgentSerializer}, summary="Create an agent"
    )
    def post(self, request: Request) -> Response:
        tenant = _tenant_or_403(request)
        authz.require(
            request.user, tenant, Capability.AGENT_CREATE, "Only admins and developers can create agents."
        )
        body = s.AgentCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        agent = agent_services.agent_create(tenant=tenant, created_by=request.user, **body.validated_data)
        return Response(s.AgentSerializer(agent).data, status=status.HTTP_201_CREATED)


class AgentDetailView(APIView):
    @extend_schema(responses=s.AgentSerializer, summary="One agent")
    def get(self, request: Request, agent_id: str) -> Response:
        return Response(s.AgentSerializer(access_agent(request.user, agent_id)).data)

    @extend_schema(
        request=s.AgentUpdateSerializer,
        responses=s.AgentSerializer,
        summary="Rename, describe, enable or disable an agent",
    )
    def patch(self, request: Request, agent_id: str) -> Response:
        agent = access_agent(request.user, agent_id, AgentPermission.EDITOR)
        body = s.AgentUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        agent = agent_services.agent_update(agent=agent, actor=request.user, **body.validated_data)
        return Response(s.AgentSerializer(agent).data)


class AgentKeysView(APIView):
    permission_classes = [IsAuthenticated, IsUser]

    @extend_schema(responses=s.ApiKeySerializer(many=True), summary="The agent's API keys (prefix only)")
    def get(self, request: Request, agent_id: str) -> Response:
        agent = access_agent(request.user, agent_id, AgentPermission.EDITOR)
        return Response(s.ApiKeySerializer(keys_for_agent(agent), many=True).data)

    @extend_schema(
        request=s.ApiKeyCreateSerializer,
        responses={201: s.ApiKeyCreatedSerializer},
        summary="Create an agent key; the secret is in this answer only",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = access_agent(request.user, agent_id, AgentPermission.EDITOR)
        body = s.ApiKeyCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        key, secret = agent_services.api_key_create(
            tenant=agent.tenant, agent=agent, name=body.validated_data["name"], created_by=request.user
        )
        key.secret = secret  # type: ignore[attr-defined]
        return Response(s.ApiKeyCreatedSerializer(key).data, status=status.HTTP_201_CREATED)


class AgentKeyDetailView(APIView):
    permission_classes = [IsAuthenticated, IsUser]

    @extend_schema(request=None, responses={200: s.ApiKeySerializer}, summary="Revoke an agent key")
    def delete(self, request: Request, agent_id: str, key_id: str) -> Response:
        agent = access_agent(request.user, agent_id, AgentPermission.EDITOR)
        key = _key_or_404(keys_for_agent(agent), key_id)
        return Response(s.ApiKeySerializer(agent_services.api_key_revoke(key=key, actor=request.user)).data)


def _key_or_404(keys: Any, key_id: str) -> ApiKey:
    pk = as_uuid(key_id)
    key = keys.filter(pk=pk).first() if pk else None
    if key is None:
        raise ApiKeyNotFound("API key not found.")
    return key


class AgentGrantsView(APIView):
    permission_classes = [IsAuthenticated, IsUser]

    @extend_schema(responses=s.GrantSerializer(many=True), summary="Who holds which permission on the agent")
    def get(self, request: Request, agent_id: str) -> Response:
        agent = access_agent(request.user, agent_id, AgentPermission.EDITOR)
        return Response(_grants(agent))

    @extend_schema(
        request=s.GrantSerializer,
        responses=s.GrantSerializer(many=True),
        summary="Set a member's permissions on the agent (an empty list removes them)",
    )
    def put(self, request: Request, agent_id: str) -> Response:
        agent = access_agent(request.user, agent_id, AgentPermission.EDITOR)
        authz.require(
            request.user, agent.tenant, Capability.AGENT_SHARE, "Your role does not allow sharing agents."
        )
        body = s.GrantSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        user = User.objects.filter(
            pk=body.validated_data["user_id"], memberships__tenant=agent.tenant
        ).first()
        if user is None:
            raise InvalidInput(
                "No such member in this tenant.", details={"fields": {"user_id": ["Unknown member."]}}
            )
        wanted = set(body.validated_data["permissions"])
        with transaction.atomic():
            for permission in AgentPermission:
                if permission in wanted:
                    agent_services.agent_grant(
                        agent=agent, user=user, permission=permission, actor=request.user
                    )
                else:
                    agent_services.agent_revoke(
                        agent=agent, user=user, permission=permission, actor=request.user
                    )
        return Response(_grants(agent))


def _grants(agent: Agent) -> list[dict[str, Any]]:
    users = get_users_with_perms(agent, with_group_users=False).order_by("username")
    return [
        {
            "user_id": user.pk,
            "username": user.get_username(),
            "permissions": sorted(p for p in get_perms(user, agent) if p in AgentPermission.values),
        }
        for user in users
    ]


class MyKeysView(APIView):
    permission_classes = [IsAuthenticated, IsUser]

    @extend_schema(
        responses=s.ApiKeySerializer(many=True), summary="Your personal API keys in the active tenant"
    )
    def get(self, request: Request) -> Response:
        tenant = _tenant_or_403(request)
        return Response(s.ApiKeySerializer(keys_for_user(request.user, tenant), many=True).data)

    @extend_schema(
        request=s.ApiKeyCreateSerializer,
        responses={201: s.ApiKeyCreatedSerializer},
        summary="Create a personal key; the secret is in this answer only",
    )
    def post(self, request: Request) -> Response:
        tenant = _tenant_or_403(request)
        body = s.ApiKeyCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        key, secret = agent_services.api_key_create(
            tenant=tenant, user=request.user, name=body.validated_data["name"], created_by=request.user
        )
        key.secret = secret  # type: ignore[attr-defined]
        return Response(s.ApiKeyCreatedSerializer(key).data, status=status.HTTP_201_CREATED)


class MyKeyDetailView(APIView):
    permission_classes = [IsAuthenticated, IsUser]

    @extend_schema(request=None, responses={200: s.ApiKeySerializer}, summary="Revoke one of your keys")
    def delete(self, request: Request, key_id: str) -> Response:
        key = _key_or_404(ApiKey.objects.filter(user=request.user), key_id)
        return Response(s.ApiKeySerializer(agent_services.api_key_revoke(key=key, actor=request.user)).data)


class SelfCheckView(APIView):
    permission_classes = [IsAuthenticated, IsUser, requires(Capability.SELF_CHECK_RUN)]

    @extend_schema(
        request=None,
        responses={202: s.JobSerializer},
        summary="Queue a round trip through the worker; poll the job for its outcome",
    )
    def post(self, request: Request) -> Response:
        job = job_services.self_check_start(tenant=request.tenant, requested_by=request.user)
        return Response(s.JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class JobDetailView(APIView):
    # Agent keys too: restrict_jobs gives an agent the ingests and graph builds about itself.
    permission_classes = [IsAuthenticated]

    @extend_schema(
        responses={200: s.JobSerializer, 404: OpenApiResponse(description="No job the caller may follow.")},
        summary="Status and progress of long work",
    )
    def get(self, request: Request, job_id: str) -> Response:
        return Response(s.JobSerializer(access_job(request.user, job_id)).data)


class AuditPagination(CursorPagination):
    ordering = "-seq"


class AuditEventListView(generics.ListAPIView):
    """The tenant's audit trail, newest first (auditors only)."""

    permission_classes = [IsAuthenticated, IsUser, requires(Capability.AUDIT_READ)]
    serializer_class = s.AuditEventSerializer
    filterset_class = AuditEventFilterSet
    pagination_class = AuditPagination
    queryset = AuditEvent.objects.none()  # for the schema; get_queryset scopes to the tenant

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return audit_events(self.request.tenant)


class AuditVerifyView(APIView):
    permission_classes = [IsAuthenticated, IsUser, requires(Capability.AUDIT_READ)]

    @extend_schema(responses=s.AuditVerificationSerializer, summary="Verify the tenant's audit chain")
    def get(self, request: Request) -> Response:
        result = audit_verify(chain=str(request.tenant.pk))
        return Response(s.AuditVerificationSerializer(result).data)
