"""Legal holds under /v1/memory/legal-holds: security officers place and release,
auditors and tenant admins read. A foreign or unknown hold is a 404."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import LegalHoldNotFound, NotFound
from governance.api import serializers as s
from governance.models import LegalHold, Role
from governance.models.agents import AgentPermission
from governance.permissions import IsUser, tenant_role
from governance.selectors import access_agent, as_uuid
from governance.services import holds as hold_services

TAG = ["legal holds"]
READERS = (Role.SECURITY_OFFICER, Role.AUDITOR, Role.TENANT_ADMIN)
ERRORS = {
    400: OpenApiResponse(description="Invalid input; `details.fields` names each bad field."),
    401: OpenApiResponse(description="No or an invalid API key."),
    403: OpenApiResponse(description="Your role does not allow this (or the two-person rule)."),
    404: OpenApiResponse(description="Unknown or foreign legal hold."),
}


def _hold(request: Request, hold_id: str) -> LegalHold:
    pk = as_uuid(hold_id)
    hold = LegalHold.objects.filter(pk=pk, tenant=request.tenant).first() if pk else None
    if hold is None:
        raise LegalHoldNotFound("Legal hold not found.")
    return hold


class LegalHoldListView(APIView):
    permission_classes = [IsAuthenticated, IsUser, tenant_role(*READERS)]

    @extend_schema(
        tags=TAG,
        summary="The tenant's legal holds, newest first",
        parameters=[OpenApiParameter("active", bool, description="only active (true) or released (false)")],
        responses={200: s.LegalHoldSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        holds = LegalHold.objects.filter(tenant=request.tenant).select_related("placed_by", "released_by")
        active = request.query_params.get("active")
        if active in ("true", "false"):
            holds = holds.filter(released_at__isnull=active == "true")
        return Response(s.LegalHoldSerializer(holds, many=True).data)

    @extend_schema(
        tags=TAG,
        summary="Place a legal hold (security officer)",
        request=s.LegalHoldCreateSerializer,
        responses={201: s.LegalHoldSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        body = s.LegalHoldCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        agent = None
        if data["agent"] is not None:
            try:
                agent = access_agent(request.user, data["agent"], AgentPermission.VIEWER)
            except NotFound:
                raise hold_services.invalid_field("agent", "no such agent in your tenant") from None
        hold = hold_services.legal_hold_place(
            tenant=request.tenant,
            actor=request.user,
            target=data["target"],
            reason=data["reason"],
            subject=data["subject"],
            agent=agent,
            scope=data["scope"],
            dataset=data["dataset"],
            item_id=data["item"],
        )
        return Response(s.LegalHoldSerializer(hold).data, status=status.HTTP_201_CREATED)


class LegalHoldDetailView(APIView):
    permission_classes = [IsAuthenticated, IsUser, tenant_role(*READERS)]

    @extend_schema(tags=TAG, summary="One legal hold", responses={200: s.LegalHoldSerializer, **ERRORS})
    def get(self, request: Request, hold_id: str) -> Response:
        return Response(s.LegalHoldSerializer(_hold(request, hold_id)).data)


class LegalHoldReleaseView(APIView):
    permission_classes = [IsAuthenticated, IsUser, tenant_role(Role.SECURITY_OFFICER)]

    @extend_schema(
        tags=TAG,
        summary="Release a legal hold (a second security officer)",
        request=s.LegalHoldReleaseSerializer,
        responses={
            200: s.LegalHoldSerializer,
            409: OpenApiResponse(description="Already released."),
            **ERRORS,
        },
    )
    def post(self, request: Request, hold_id: str) -> Response:
        hold = _hold(request, hold_id)
        body = s.LegalHoldReleaseSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        hold = hold_services.legal_hold_release(
            hold=hold, actor=request.user, reason=body.validated_data["reason"]
        )
        return Response(s.LegalHoldSerializer(hold).data)
