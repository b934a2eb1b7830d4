"""Candidates under /v1/memory/candidates: the review queue of provider records.

A caller sees the candidates of agents they may view; anything else is a 404.
Review is for the owner (the subject, or a tenant admin acting for them);
promotion for the owner or an editor of the agent, and only after approval.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import CandidateNotFound, InvalidInput, NoTenant
from core.fields import BoundedCharField
from core.vocabulary import RecordKind
from governance.models import Candidate
from governance.models.agents import AgentPermission
from governance.permissions import IsUser
from governance.selectors import agents_for, as_uuid
from governance.services.candidates import candidate_review, reviewer_role
from memory.services.promotion import candidate_promote

TAG = ["candidates"]
ERRORS = {
    400: OpenApiResponse(description="Invalid input; `details.fields` names each bad field."),
    401: OpenApiResponse(description="No or an invalid API key."),
    403: OpenApiResponse(description="Not the owner of the record (nor a tenant admin)."),
    404: OpenApiResponse(description="Unknown or foreign candidate."),
    409: OpenApiResponse(description="Not approved, already promoted, or covered by an erasure fence."),
}


class CandidateSerializer(serializers.ModelSerializer):
    reviewed_by = serializers.CharField(source="reviewed_by.username", read_only=True, allow_null=True)

    class Meta:
        model = Candidate
        fields = [
            "id",
            "agent",
            "provider",
            "external_id",
            "record_kind",
            "kind",
            "content",
            "subject",
            "captured_at",
            "status",
            "reviewed_by",
            "reviewed_as",
            "reviewed_at",
            "review_reason",
            "promoted_item_id",
            "promoted_at",
            "created_at",
        ]


class ReviewSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=["approve", "reject"])
    reason = BoundedCharField(max_length=1000)


class PromotedSerializer(serializers.Serializer):
    candidate = CandidateSerializer()
    item_id = serializers.UUIDField()


def _visible(request: Request) -> Any:
    agents = agents_for(request.user, AgentPermission.VIEWER, tenant=request.tenant)
    return Candidate.objects.filter(tenant=request.tenant, agent__in=agents).select_related("reviewed_by")


def _candidate(request: Request, candidate_id: str) -> Candidate:
    pk = as_uuid(candidate_id)
    found = _visible(request).filter(pk=pk).first() if pk else None
    if found is None:
        raise CandidateNotFound("Candidate not found.")
    return found


FILTERS = [
    OpenApiParameter("provider", str, description="engine instance id"),
    OpenApiParameter("kind", str, enum=RecordKind.values, description="record kind"),
    OpenApiParameter("status", str, enum=Candidate.Status.values),
    OpenApiParameter("subject", str, description="the end user the record is about"),
]


class CandidateListView(APIView):
    permission_classes = [IsAuthenticated, IsUser]

    @extend_schema(
        tags=TAG,
        summary="Candidates of agents you may view, newest first",
        parameters=FILTERS,
        responses={200: CandidateSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        if request.tenant is None:
            raise NoTenant("You are not a member of any tenant.")
        qs = _visible(request)
        params = request.query_params
        for param, allowed in (("kind", RecordKind.values), ("status", Candidate.Status.values)):
            if params.get(param) and params[param] not in allowed:
                raise InvalidInput(
                    f"Invalid input: {param}.",
                    details={"fields": {param: ["must be one of " + ", ".join(allowed)]}},
                )
        for param, field in (("provider", "provider"), ("kind", "record_kind"), ("status", "status")):
            if params.get(param):
                qs = qs.filter(**{field: params[param]})
        if params.get("subject"):
            qs = qs.filter(subject=params["subject"])
        return Response(CandidateSerializer(qs[:500], many=True).data)


class CandidateDetailView(APIView):
    permission_classes = [IsAuthenticated, IsUser]

    @extend_schema(tags=TAG, summary="One candidate", responses={200: CandidateSerializer, **ERRORS})
    def get(self, request: Request, candidate_id: str) -> Response:
        return Response(CandidateSerializer(_candidate(request, candidate_id)).data)


class CandidateReviewView(APIView):
    permission_classes = [IsAuthenticated, IsUser]

    @extend_schema(
        tags=TAG,
        summary="Approve or reject (the subject, or a tenant admin acting for them)",
        request=ReviewSerializer,
        responses={200: CandidateSerializer, **ERRORS},
    )
    def post(self, request: Request, candidate_id: str) -> Response:
        candidate = _candidate(request, candidate_id)
        body = ReviewSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        reviewed = candidate_review(candidate=candidate, actor=request.user, **body.validated_data)
        return Response(CandidateSerializer(reviewed).data)


class CandidatePromoteView(APIView):
    permission_classes = [IsAuthenticated, IsUser]

    @extend_schema(
        tags=TAG,
        summary="Copy an approved candidate into builtin memory, with provenance",
        request=None,
        responses={201: PromotedSerializer, **ERRORS},
    )
    def post(self, request: Request, candidate_id: str) -> Response:
        candidate = _candidate(request, candidate_id)
        editor = agents_for(request.user, AgentPermission.EDITOR).filter(pk=candidate.agent_id).exists()
        if not editor:
            reviewer_role(request.user, candidate)  # the owner may promote too; anyone else is a 403
        item = candidate_promote(candidate=candidate, actor=request.user)
        candidate.refresh_from_db()
        return Response(
            {"candidate": CandidateSerializer(candidate).data, "item_id": str(item.pk)}, status=201
        )
