"""Request parsing of the federated recall, shared by the REST view and the MCP
tool (which takes its arguments from the same serializer). Validation only."""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

from core.fields import BoundedCharField
from providers.models import Isolation


class FederatedRecallRequestSerializer(serializers.Serializer):
    query = BoundedCharField(max_length=4000, trim_whitespace=True)
    engines = serializers.ListField(
        child=BoundedCharField(max_length=63),
        required=False,
        allow_empty=False,
        max_length=64,
        help_text="Engine ids; default: the agent policy's engines",
    )
    top_k = serializers.IntegerField(min_value=1, max_value=50, default=10)
    timeout_ms = serializers.IntegerField(min_value=10, max_value=60000, required=False)
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
    isolation = serializers.ChoiceField(
        choices=Isolation.choices,
        required=False,
        help_text="Require at least this isolation (on top of the policy's)",
    )

    def validate_timeout_ms(self, value: int) -> int:
        return value or settings.FEDMEM_FEDERATION_DEFAULT_TIMEOUT_MS
