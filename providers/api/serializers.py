from __future__ import annotations

from rest_framework import serializers

from core.fields import BoundedCharField
from providers.adapters.registry import provider_kinds
from providers.models import AccessControl, Isolation, ProviderWrite


class EngineSerializer(serializers.Serializer):
    """An engine as the API shows it: never a credential, never a reference."""

    id = serializers.CharField()
    provider = serializers.CharField()
    base_url = serializers.CharField(allow_null=True)
    tenant = serializers.CharField(
        allow_null=True, help_text="Tenant slug of a dedicated instance; null when shared"
    )
    shared = serializers.BooleanField()
    access_control = serializers.CharField(allow_null=True)
    tls_verify = serializers.BooleanField(allow_null=True)
    timeout_seconds = serializers.FloatField(allow_null=True)
    options = serializers.DictField()
    allow_development_hosts = serializers.BooleanField()
    has_platform_credential = serializers.BooleanField()
    tenant_credential_set = serializers.BooleanField()
    created_at = serializers.DateTimeField(allow_null=True)


class EngineCreateSerializer(serializers.Serializer):
    # Lower-case only: the id is also the contract's ``engine_instance`` slug.
    id = serializers.RegexField(r"^[a-z0-9][a-z0-9_-]{0,62}$", max_length=63)
    provider = serializers.ChoiceField(choices=[])
    base_url = BoundedCharField(max_length=500)
    tenant = serializers.SlugField(
        max_length=63,
        required=False,
        allow_null=True,
        default=None,
        help_text="Tenant slug for a dedicated instance; omit for a shared one",
    )
    credential_ref = BoundedCharField(
        max_length=500, required=False, allow_blank=True, default="", write_only=True
    )
    access_control = serializers.ChoiceField(
        choices=AccessControl.choices, default=AccessControl.PLATFORM_KEY
    )
    tls_verify = serializers.BooleanField(default=True)
    timeout_seconds = serializers.FloatField(min_value=0.05, max_value=120.0, default=10.0)
    options = serializers.DictField(required=False, default=dict)
    allow_development_hosts = serializers.BooleanField(default=False)

    def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        # The registry is the source of truth for provider kinds.
        self.fields["provider"].choices = provider_kinds()


class CapabilitiesSerializer(serializers.Serializer):
    schema_version = serializers.CharField()
    provider = serializers.CharField()
    engine_instance = serializers.CharField()
    capabilities = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))
    user_id = serializers.RegexField(
        r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$",
        required=False,
        help_text="The agent's end user: narrows the namespace each engine is asked in",
    )
    session_id = serializers.RegexField(
        r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$",
        required=False,
        help_text="The conversation (session memory engines need it)",
    )
    isolation = serializers.ChoiceField(choices=Isolation.choices)
    session_memory = serializers.BooleanField()
    record_kinds = serializers.ListField(child=serializers.CharField())


class HealthSerializer(serializers.Serializer):
    engine_id = serializers.CharField()
    status = serializers.CharField()
    latency_ms = serializers.IntegerField()
    detail = serializers.DictField()


class CredentialSetSerializer(serializers.Serializer):
    credential_ref = BoundedCharField(
        max_length=500,
        write_only=True,
        help_text="env://NAME or openbao://mount/path#key; never shown back",
    )


class CredentialStateSerializer(serializers.Serializer):
    engine_id = serializers.CharField()
    tenant = serializers.CharField()
    has_credential = serializers.BooleanField()
    scheme = serializers.CharField(allow_null=True)
    updated_at = serializers.DateTimeField(allow_null=True)


class SourceReportSerializer(serializers.Serializer):
    engine_id = serializers.CharField()
    provider_id = serializers.CharField()
    status = serializers.ChoiceField(choices=["ok", "timed_out", "unavailable", "error"])
    error = serializers.DictField(allow_null=True)
    latency_ms = serializers.IntegerField()
    count = serializers.IntegerField()


class HitSerializer(serializers.Serializer):
    provider_id = serializers.CharField()
    engine_id = serializers.CharField()
    external_id = serializers.CharField()
    kind = serializers.CharField()
    text = serializers.CharField()
    provenance = serializers.DictField()
    created_at = serializers.CharField(allow_null=True)
    updated_at = serializers.CharField(allow_null=True)
    metadata = serializers.DictField()
    score = serializers.FloatField(allow_null=True, help_text="Source-local; never compare across providers")
    rank = serializers.IntegerField()


class FederatedGroupSerializer(serializers.Serializer):
    kind = serializers.CharField()
    text = serializers.CharField()
    rrf_score = serializers.FloatField()
    matches = HitSerializer(many=True)
    conflict = serializers.DictField(allow_null=True)


class FederatedRecallSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "partial", "failed"])
    sources = SourceReportSerializer(many=True)
    results = FederatedGroupSerializer(many=True)


class CandidateImportSerializer(serializers.Serializer):
    agent_id = serializers.UUIDField()
    engine_id = BoundedCharField(max_length=63)
    subject = BoundedCharField(max_length=128)
    limit = serializers.IntegerField(min_value=1, max_value=5000, default=500)


class ProviderWriteSerializer(serializers.ModelSerializer):
    """Where a write an engine queued stands: ids and the provider's statuses, never
    the written text, the provider's handle or the scope it was written in."""

    engine_id = serializers.CharField(read_only=True)
    agent_id = serializers.UUIDField(read_only=True, allow_null=True)

    class Meta:
        model = ProviderWrite
        fields = [
            "id",
            "engine_id",
            "agent_id",
            "operation",
            "status",
            "reason",
            "external_ids",
            "attempts",
            "created_at",
            "updated_at",
            "next_check_at",
            "settled_at",
        ]
        read_only_fields = fields
