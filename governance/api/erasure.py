"""Erasure requests under /v1/memory/erasure-requests: security officers and tenant
admins request (202, the worker erases), they and auditors read progress and the
certificate. A foreign or unknown request is a 404."""

from __future__ import annotations

import json

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import ErasureNotCompleted, NotFound
from governance.api import serializers as s
from governance.authz import Capability, requires
from governance.models import ErasureRequest
from governance.models.agents import AgentPermission
from governance.permissions import IsUser
from governance.selectors import access_agent, access_erasure_request, erasure_requests_for
from governance.services import erasure as erasure_services

TAG = ["erasure"]
ERRORS = {
    400: OpenApiResponse(
        description=(
            "Invalid input; `details.fields` names each bad field (`validation_error`), "
            "or neither a subject nor datasets (`erasure_target_required`)."
        )
    ),
    401: OpenApiResponse(description="No or an invalid API key."),
    403: OpenApiResponse(description="Your role does not allow this."),
    404: OpenApiResponse(description="Unknown or foreign erasure request."),
}


class ErasureRequestListView(APIView):
    def get_permissions(self):  # type: ignore[no-untyped-def]
        needed = Capability.ERASURE_REQUEST if self.request.method == "POST" else Capability.ERASURE_READ
        return [IsAuthenticated(), IsUser(), requires(needed)()]

    @extend_schema(
        tags=TAG,
        summary="The tenant's erasure requests",
        responses={200: s.ErasureRequestSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        return Response(s.ErasureRequestSerializer(erasure_requests_for(request.tenant), many=True).data)

    @extend_schema(
        tags=TAG,
        summary="Request the erasure of a subject and/or named datasets (202; a worker does it)",
        request=s.ErasureRequestCreateSerializer,
        responses={202: s.ErasureRequestSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        body = s.ErasureRequestCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        agent = None
        if data["agent"] is not None:
            try:
                agent = access_agent(request.user, data["agent"], AgentPermission.VIEWER)
            except NotFound:
                raise erasure_services.invalid_field("agent", "no such agent in your tenant") from None
        created = erasure_services.erasure_request_create(
            tenant=request.tenant,
            actor=request.user,
            subject=data["subject"],
            datasets=data["datasets"],
            scope=data["scope"],
            reason=data["reason"],
            agent=agent,
        )
        return Response(s.ErasureRequestSerializer(created).data, status=status.HTTP_202_ACCEPTED)


class ErasureRequestDetailView(APIView):
    permission_classes = [IsAuthenticated, IsUser, requires(Capability.ERASURE_READ)]

    @extend_schema(
        tags=TAG,
        summary="One erasure request with progress",
        responses={200: s.ErasureRequestSerializer, **ERRORS},
    )
    def get(self, request: Request, request_id: str) -> Response:
        return Response(s.ErasureRequestSerializer(access_erasure_request(request.tenant, request_id)).data)


class ErasureCertificateView(APIView):
    permission_classes = [IsAuthenticated, IsUser, requires(Capability.ERASURE_READ)]

    @extend_schema(
        tags=TAG,
        summary="The erasure certificate as a JSON download",
        responses={
            (200, "application/json"): OpenApiTypes.OBJECT,
            409: OpenApiResponse(description="The erasure has not completed."),
            **ERRORS,
        },
    )
    def get(self, request: Request, request_id: str) -> HttpResponse:
        found = access_erasure_request(request.tenant, request_id)
        if found.status != ErasureRequest.Status.COMPLETED:
            raise ErasureNotCompleted("The erasure has not completed yet.")
        response = HttpResponse(
            json.dumps(found.certificate, indent=2, sort_keys=True), content_type="application/json"
        )
        response["Content-Disposition"] = f'attachment; filename="erasure-certificate-{found.pk}.json"'
        return response


class ErasureRetryView(APIView):
    permission_classes = [IsAuthenticated, IsUser, requires(Capability.ERASURE_REQUEST)]

    @extend_schema(
        tags=TAG,
        summary="Run a failed erasure again (202; idempotent while it is queued or running)",
        request=None,
        responses={
            202: s.ErasureRequestSerializer,
            409: OpenApiResponse(description="The erasure has completed (`erasure_completed`)."),
            **ERRORS,
        },
    )
    def post(self, request: Request, request_id: str) -> Response:
        found = access_erasure_request(request.tenant, request_id)
        retried = erasure_services.erasure_retry(request=found, actor=request.user)
        return Response(s.ErasureRequestSerializer(retried).data, status=status.HTTP_202_ACCEPTED)
