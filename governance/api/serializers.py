from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.fields import BoundedCharField
from governance.job_serializers import JobSerializer as JobSerializer  # the REST and MCP shape
from governance.models import (
    Agent,
    AgentPolicyVersion,
    ApiKey,
    AuditEvent,
    ErasureRequest,
    LegalHold,
    Tenant,
)
from governance.models.agents import AgentPermission
from governance.services.erasure import DATASET_NAME_MAX, MAX_DATASETS


class TenantSerializer(serializers.ModelSerializer):
    class Meta:
        model = Tenant
        fields = ["id", "slug", "name"]


class AgentSerializer(serializers.ModelSerializer):
    tenant = TenantSerializer(read_only=True)

    class Meta:
        model = Agent
        fields = ["id", "tenant", "name", "description", "is_active", "created_at"]
        read_only_fields = ["id", "tenant", "created_at"]


class AgentCreateSerializer(serializers.Serializer):
    name = BoundedCharField(max_length=100)
    description = BoundedCharField(max_length=2000, required=False, allow_blank=True, default="")


class AgentUpdateSerializer(serializers.Serializer):
    name = BoundedCharField(max_length=100, required=False)
    description = BoundedCharField(max_length=2000, required=False, allow_blank=True)
    is_active = serializers.BooleanField(required=False)


class ApiKeySerializer(serializers.ModelSerializer):
    display_prefix = serializers.SerializerMethodField()
    owner = serializers.SerializerMethodField()
    is_active = serializers.BooleanField(read_only=True)

    class Meta:
        model = ApiKey
        fields = [
            "id",
            "name",
            "display_prefix",
            "owner",
            "is_active",
            "created_at",
            "last_used_at",
            "revoked_at",
        ]

    def get_display_prefix(self, key: ApiKey) -> str:
        return f"fm_{key.prefix}"

    def get_owner(self, key: ApiKey) -> dict[str, Any]:
        if key.agent_id:
            return {"type": "agent", "id": str(key.agent_id)}
        return {"type": "user", "id": str(key.user_id)}


class ApiKeyCreatedSerializer(ApiKeySerializer):
    secret = serializers.CharField(read_only=True, help_text="Shown once; store it now.")

    class Meta(ApiKeySerializer.Meta):
        fields = [*ApiKeySerializer.Meta.fields, "secret"]


class ApiKeyCreateSerializer(serializers.Serializer):
    name = BoundedCharField(max_length=100)


class GrantSerializer(serializers.Serializer):
    user_id = serializers.IntegerField()
    username = serializers.CharField(read_only=True)
    permissions = serializers.ListField(
        child=serializers.ChoiceField(choices=AgentPermission.choices), allow_empty=True, max_length=3
    )


class PrincipalSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["user", "agent"])
    id = serializers.CharField()
    name = serializers.CharField()


class MeSerializer(serializers.Serializer):
    principal = PrincipalSerializer()
    tenant = TenantSerializer(allow_null=True)
    roles = serializers.ListField(child=serializers.CharField())
    tenants = TenantSerializer(many=True)


class AuditEventSerializer(serializers.ModelSerializer):
    actor = serializers.SerializerMethodField()
    target = serializers.SerializerMethodField()

    class Meta:
        model = AuditEvent
        fields = ["seq", "action", "actor", "target", "data", "created_at", "prev_hash", "hash"]

    def get_actor(self, event: AuditEvent) -> dict[str, str]:
        return {"type": event.actor_type, "id": event.actor_id, "label": event.actor_label}

    def get_target(self, event: AuditEvent) -> dict[str, str]:
        return {"type": event.target_type, "id": event.target_id}


class AuditVerificationSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    chain = serializers.CharField()
    checked = serializers.IntegerField()
    broken_at = serializers.IntegerField(allow_null=True, help_text="sequence number of the first bad event")
    reason = serializers.CharField(allow_blank=True)


class PolicyVersionSerializer(serializers.Serializer):
    """One version of an agent's memory policy; ``version`` 0 is the documented default."""

    agent = serializers.UUIDField()
    version = serializers.IntegerField()
    engine = serializers.CharField()
    mem0_instance = serializers.CharField()
    cognee_instance = serializers.CharField()
    policy = serializers.DictField()
    note = serializers.CharField()
    created_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField(allow_null=True)


class PolicyUpdateSerializer(serializers.Serializer):
    """The whole policy document; keys left out take the documented defaults."""

    engine = serializers.ChoiceField(choices=AgentPolicyVersion.Engine.choices, default="builtin")
    mem0_instance = BoundedCharField(max_length=63, required=False, allow_blank=True, default="")
    cognee_instance = BoundedCharField(max_length=63, required=False, allow_blank=True, default="")
    policy = serializers.DictField(required=False, default=dict)
    note = BoundedCharField(max_length=500, required=False, allow_blank=True, default="")


class PolicyRestoreSerializer(serializers.Serializer):
    version = serializers.IntegerField(min_value=1)
    note = BoundedCharField(max_length=500, required=False, allow_blank=True, default="")


class LegalHoldSerializer(serializers.ModelSerializer):
    placed_by = serializers.CharField(source="placed_by.username", read_only=True)
    released_by = serializers.CharField(source="released_by.username", read_only=True, allow_null=True)
    is_active = serializers.BooleanField(read_only=True)
    # The hold stores only the subject's keyed hash (as the audit trail names it).
    subject_hash = serializers.CharField(source="subject", read_only=True)

    class Meta:
        model = LegalHold
        fields = [
            "id",
            "target",
            "subject_hash",
            "agent",
            "scope",
            "dataset",
            "item_id",
            "reason",
            "is_active",
            "placed_by",
            "placed_at",
            "released_by",
            "released_at",
            "release_reason",
        ]


class LegalHoldCreateSerializer(serializers.Serializer):
    target = serializers.ChoiceField(choices=LegalHold.Target.choices)
    subject = BoundedCharField(max_length=128, required=False, allow_blank=True, default="")
    agent = serializers.UUIDField(required=False, allow_null=True, default=None)
    scope = BoundedCharField(max_length=16, required=False, allow_blank=True, default="")
    dataset = BoundedCharField(max_length=200, required=False, allow_blank=True, default="")
    item = serializers.UUIDField(required=False, allow_null=True, default=None)
    reason = BoundedCharField(max_length=1000)


class LegalHoldReleaseSerializer(serializers.Serializer):
    reason = BoundedCharField(max_length=1000)


class ErasureRequestSerializer(serializers.ModelSerializer):
    """An erasure request; the subject is shown only as its hash (empty when the
    request names only datasets)."""

    requested_by = serializers.CharField(source="requested_by.username", read_only=True)
    progress = serializers.IntegerField(source="job.progress", read_only=True)
    total = serializers.IntegerField(source="job.total", read_only=True)
    job = serializers.UUIDField(source="job_id", read_only=True)

    class Meta:
        model = ErasureRequest
        fields = [
            "id",
            "subject_hash",
            "datasets",
            "scope",
            "agent",
            "reason",
            "status",
            "progress",
            "total",
            "job",
            "requested_by",
            "created_at",
            "completed_at",
        ]


class ErasureRequestCreateSerializer(serializers.Serializer):
    """A subject, datasets, or both; neither is 400 ``erasure_target_required``."""

    subject = BoundedCharField(
        max_length=128,
        required=False,
        allow_blank=True,
        default="",
        help_text="The data subject (user_id) whose memory goes. Optional when `datasets` is given.",
    )
    datasets = serializers.ListField(
        child=BoundedCharField(max_length=DATASET_NAME_MAX, trim_whitespace=False),
        required=False,
        default=list,
        max_length=MAX_DATASETS,
        help_text=(
            "Knowledge datasets (names) whose chunks go too, whoever they were written for "
            "(in scope `agent`: the agent's own datasets). Distinct names, at most 50; a name "
            "the tenant does not have is a 400 naming it."
        ),
    )
    scope = serializers.ChoiceField(choices=ErasureRequest.Scope.choices, default="tenant")
    agent = serializers.UUIDField(required=False, allow_null=True, default=None)
    reason = BoundedCharField(max_length=1000)
