"""Engines, credentials and federated recall under /v1/memory/. Thin: parse, call, render."""

from __future__ import annotations

import time
from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import (
    AgentInactive,
    AgentNotFound,
    Forbidden,
    InvalidInput,
    MemoryEngineBuiltin,
    MemoryEngineNoCredential,
    MemoryEngineUnavailable,
    NoTenant,
    NotFound,
)
from core.health import check_database
from core.pagination import CursorPagination
from governance import authz
from governance.api.serializers import JobSerializer
from governance.authz import Capability
from governance.models import Tenant
from governance.models.agents import AgentPermission
from governance.permissions import IsUser
from governance.selectors import access_agent, agents_for
from providers import selectors, services
from providers.api import serializers as s
from providers.credentials import parse_ref
from providers.imports import candidates_import_start
from providers.models import BUILTIN_ENGINE_ID, EngineInstance, ProviderWrite
from providers.serializers import FederatedRecallRequestSerializer


def _tenant(request: Request) -> Tenant:
    tenant = getattr(request, "tenant", None)
    if tenant is None:
        raise NoTenant("You are not a member of any tenant.")
    return tenant


def _require(request: Request, tenant: Tenant, capability: Capability, what: str) -> None:
    authz.require(request.user, tenant, capability, f"Your role does not allow {what}.")


def _trace_parent(request: Request) -> str | None:
    return request.headers.get("traceparent")


def _builtin_row() -> dict[str, Any]:
    return {
        "id": BUILTIN_ENGINE_ID,
        "provider": services.BUILTIN_PROVIDER,
        "base_url": None,
        "tenant": None,
        "shared": True,
        "access_control": None,
        "tls_verify": None,
        "timeout_seconds": None,
        "options": {},
        "allow_development_hosts": False,
        "has_platform_credential": False,
        "tenant_credential_set": False,
        "created_at": None,
    }


def _engine_row(engine: EngineInstance, with_own_credential: set[str]) -> dict[str, Any]:
    return {
        "id": engine.id,
        "provider": engine.provider,
        "base_url": engine.base_url,
        "tenant": engine.tenant.slug if engine.tenant else None,
        "shared": engine.is_shared,
        "access_control": engine.access_control,
        "tls_verify": engine.tls_verify,
        "timeout_seconds": engine.timeout_seconds,
        "options": engine.options,
        "allow_development_hosts": engine.allow_development_hosts,
        "has_platform_credential": bool(engine.credential_ref),
        "tenant_credential_set": engine.id in with_own_credential,
        "created_at": engine.created_at,
    }


class EngineListView(APIView):
    @extend_schema(
        responses=s.EngineSerializer(many=True),
        summary="The builtin engine and every instance you may see",
    )
    def get(self, request: Request) -> Response:
        tenant = _tenant(request)
        engines = list(selectors.engines_for(request.user, tenant).order_by("id"))
        own = selectors.tenants_with_credentials(engines, tenant)
        rows = [_builtin_row()] + [_engine_row(engine, own) for engine in engines]
        return Response(s.EngineSerializer(rows, many=True).data)

    @extend_schema(
        request=s.EngineCreateSerializer,
        responses={201: s.EngineSerializer},
        summary="Declare an engine instance (platform_admin)",
    )
    def post(self, request: Request) -> Response:
        tenant = _tenant(request)
        _require(request, tenant, Capability.ENGINE_DECLARE, "declaring engines")
        body = s.EngineCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        owner = None
        if data.pop("tenant"):
            owner = Tenant.objects.filter(slug=body.validated_data["tenant"]).first()
            if owner is None:
                raise InvalidInput("Unknown tenant.", details={"fields": {"tenant": ["No such tenant."]}})
        engine = services.engine_create(actor=request.user, engine_id=data.pop("id"), tenant=owner, **data)
        return Response(s.EngineSerializer(_engine_row(engine, set())).data, status=status.HTTP_201_CREATED)


class EngineDetailView(APIView):
    @extend_schema(responses=s.EngineSerializer, summary="One engine")
    def get(self, request: Request, engine_id: str) -> Response:
        tenant = _tenant(request)
        if engine_id == BUILTIN_ENGINE_ID:
            return Response(s.EngineSerializer(_builtin_row()).data)
        engine = selectors.access_engine(request.user, tenant, engine_id)
        own = selectors.tenants_with_credentials([engine], tenant)
        return Response(s.EngineSerializer(_engine_row(engine, own)).data)

    @extend_schema(request=None, responses={204: None}, summary="Remove an engine instance (platform_admin)")
    def delete(self, request: Request, engine_id: str) -> Response:
        tenant = _tenant(request)
        if engine_id == BUILTIN_ENGINE_ID:
            raise MemoryEngineBuiltin("The builtin engine cannot be removed.")
        engine = selectors.access_engine(request.user, tenant, engine_id)
        _require(request, tenant, Capability.ENGINE_DECLARE, "removing engines")
        services.engine_delete(actor=request.user, engine=engine)
        return Response(status=status.HTTP_204_NO_CONTENT)


class EngineCapabilitiesView(APIView):
    @extend_schema(
        responses=s.CapabilitiesSerializer,
        summary="What the engine announces (no credential needed, no call made)",
    )
    def get(self, request: Request, engine_id: str) -> Response:
        tenant = _tenant(request)
        if engine_id == BUILTIN_ENGINE_ID:
            return Response(services.builtin_announcement())
        engine = selectors.access_engine(request.user, tenant, engine_id)
        return Response(services.announcement_for(engine))


class EngineHealthView(APIView):
    @extend_schema(
        responses={200: s.HealthSerializer},
        summary="Ask the engine whether it answers (502 memory_engine_unavailable if not)",
    )
    def get(self, request: Request, engine_id: str) -> Response:
        tenant = _tenant(request)
        if engine_id == BUILTIN_ENGINE_ID:
            _require(request, tenant, Capability.ENGINE_HEALTH, "reading engine health")
            return Response(_builtin_health())
        engine = selectors.access_engine(request.user, tenant, engine_id)
        _require(request, tenant, Capability.ENGINE_HEALTH, "reading engine health")
        report = services.engine_health(engine=engine, tenant=tenant, trace_parent=_trace_parent(request))
        return Response({"engine_id": engine.id, **report.to_dict()})


def _builtin_health() -> dict[str, Any]:
    started = time.perf_counter()
    try:
        outcome = check_database()
    except Exception as exc:  # a health probe reports, it never raises
        outcome = exc.__class__.__name__
    latency = int((time.perf_counter() - started) * 1000)
    if outcome != "ok":
        raise MemoryEngineUnavailable(
            "The builtin engine's database is unavailable.",
            details={"engine_id": BUILTIN_ENGINE_ID, "reason": outcome},
        )
    return {"engine_id": BUILTIN_ENGINE_ID, "status": "ok", "latency_ms": latency, "detail": {}}


class EngineCredentialView(APIView):
    permission_classes = [IsAuthenticated, IsUser]

    def _engine(self, request: Request, engine_id: str) -> tuple[Tenant, EngineInstance]:
        tenant = _tenant(request)
        if engine_id == BUILTIN_ENGINE_ID:
            raise MemoryEngineNoCredential("The builtin engine takes no credential.")
        # A platform admin sees every instance; a tenant credential only goes on one
        # the tenant can use.
        engine = selectors.engine_for_tenant(tenant, engine_id)
        _require(request, tenant, Capability.ENGINE_CREDENTIALS, "managing engine credentials")
        return tenant, engine

    @extend_schema(
        request=s.CredentialSetSerializer,
        responses={
            200: s.CredentialStateSerializer,
            422: OpenApiResponse(description="The engine takes no credential, or the reference is refused."),
        },
        summary="Set or rotate your tenant's credential reference (tenant_admin); never shown back",
    )
    def put(self, request: Request, engine_id: str) -> Response:
        tenant, engine = self._engine(request, engine_id)
        body = s.CredentialSetSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        credential = services.engine_credential_set(
            actor=request.user,
            engine=engine,
            tenant=tenant,
            credential_ref=body.validated_data["credential_ref"],
        )
        return Response(
            s.CredentialStateSerializer(
                {
                    "engine_id": engine.id,
                    "tenant": tenant.slug,
                    "has_credential": True,
                    "scheme": parse_ref(credential.credential_ref).scheme,
                    "updated_at": credential.updated_at,
                }
            ).data
        )

    @extend_schema(
        request=None,
        responses={204: None},
        summary="Remove your tenant's credential (tenant_admin)",
    )
    def delete(self, request: Request, engine_id: str) -> Response:
        tenant, engine = self._engine(request, engine_id)
        services.engine_credential_remove(actor=request.user, engine=engine, tenant=tenant)
        return Response(status=status.HTTP_204_NO_CONTENT)


class FederatedRecallView(APIView):
    @extend_schema(
        request=FederatedRecallRequestSerializer,
        responses=s.FederatedRecallSerializer,
        summary="Recall across engines: per-source status, rank fusion, every match kept",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = access_agent(request.user, agent_id, AgentPermission.CAN_INVOKE)
        body = FederatedRecallRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        result = services.federated_recall(
            agent=agent,
            query=data["query"],
            engine_ids=data.get("engines"),
            top_k=data["top_k"],
            timeout_ms=data.get("timeout_ms"),
            isolation=data.get("isolation"),
            user_id=data.get("user_id"),
            session_id=data.get("session_id"),
            trace_parent=_trace_parent(request),
        )
        return Response(result)


class CandidateImportView(APIView):
    """Queue an import of one engine's records about one subject into the candidate
    queue. Needs editor on the agent; progress is the returned job (GET /v1/jobs/{id})."""

    permission_classes = [IsAuthenticated, IsUser]

    @extend_schema(
        tags=["candidates"],
        summary="Import an engine's records as pending candidates (202 with the job)",
        request=s.CandidateImportSerializer,
        responses={
            202: JobSerializer,
            400: OpenApiResponse(description="Invalid input; `details.fields` names each bad field."),
            401: OpenApiResponse(description="No or an invalid API key."),
            403: OpenApiResponse(description="You may view the agent but not edit it."),
            404: OpenApiResponse(description="Unknown or foreign agent."),
            409: OpenApiResponse(description="The agent is deactivated (`agent_inactive`)."),
        },
    )
    def post(self, request: Request) -> Response:
        tenant = _tenant(request)
        body = s.CandidateImportSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        agent = access_agent(request.user, data["agent_id"], AgentPermission.VIEWER)
        if agent.tenant_id != tenant.pk:
            raise AgentNotFound("Agent not found.")
        if not agents_for(request.user, AgentPermission.EDITOR).filter(pk=agent.pk).exists():
            raise Forbidden("Importing candidates needs editor on the agent.")
        if not agent.is_active:
            # Candidates are promoted into the agent's memory, which nobody may use any more.
            raise AgentInactive("This agent is deactivated; reactivate it to import into it.")
        try:
            job = candidates_import_start(
                tenant=tenant,
                agent=agent,
                engine_id=data["engine_id"],
                subject=data["subject"],
                actor=request.user,
                limit=data["limit"],
            )
        except NotFound:
            raise InvalidInput(
                "Invalid input: engine_id.", details={"fields": {"engine_id": ["no such engine instance"]}}
            ) from None
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


WRITE_STATUSES = ProviderWrite.Status.values


class ProviderWriteListView(generics.GenericAPIView):
    """Writes an engine queued (a routed remember's ``write_id``, a forget, a graph
    build), newest first, as far as the caller may read them (providers.selectors)."""

    permission_classes = [IsAuthenticated]
    queryset = ProviderWrite.objects.none()  # for the schema; get() scopes to the caller
    serializer_class = s.ProviderWriteSerializer
    pagination_class = CursorPagination

    @extend_schema(
        summary="Queued provider writes and where each stands, newest first",
        parameters=[
            OpenApiParameter("status", str, enum=WRITE_STATUSES),
            OpenApiParameter("engine_id", str, description="only this engine's writes"),
            OpenApiParameter("limit", int, description="page size (1-200, default 50)"),
        ],
        responses={200: s.ProviderWriteSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        qs = selectors.provider_writes_for(request.user, _tenant(request))
        wanted = request.query_params.get("status")
        if wanted is not None:
            if wanted not in WRITE_STATUSES:
                raise InvalidInput(
                    "Invalid input: status.",
                    details={"fields": {"status": [f"One of {', '.join(WRITE_STATUSES)}."]}},
                )
            qs = qs.filter(status=wanted)
        engine_id = request.query_params.get("engine_id")
        if engine_id is not None:
            qs = qs.filter(engine_id=engine_id)
        page = self.paginate_queryset(qs)
        return self.get_paginated_response(s.ProviderWriteSerializer(page, many=True).data)


class ProviderWriteDetailView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        responses={200: s.ProviderWriteSerializer},
        summary="Where one queued provider write stands (queued, settled or failed, with the reason)",
    )
    def get(self, request: Request, write_id: str) -> Response:
        write = selectors.access_provider_write(request.user, write_id)
        return Response(s.ProviderWriteSerializer(write).data)
