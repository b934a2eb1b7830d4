"""Request parsing and response shapes of /v1/memory, shared by the REST views
and the MCP tools (which take their arguments from the same serializers). Validation
only; no logic."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from rest_framework import serializers

from core.vocabulary import CLASSIFICATION_NAMES, Classification, Kind, RecordKind, Scope
from memory.models import MemoryItem, SessionMessage
from memory.operations.memories import ListRequest, MessageRequest, PurgeRequest, RememberRequest
from memory.operations.recall import RecallRequest, SearchRequest
from memory.rendering import item_json, message_json
from memory.retrieval.hybrid import MODES
from memory.services.items import MAX_BATCH, MAX_RETENTION_DAYS, MemoryDraft

__all__ = ["item_json", "message_json"]  # rendered in memory.rendering, re-exported for the schema tests

MAX_QUERY_CHARS = 4096


def _valid_unicode(value: str) -> None:
    # A JSON "\ud800" escape decodes to a lone surrogate that PostgreSQL cannot store.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise serializers.ValidationError("Not valid Unicode text.") from exc


class Text(serializers.CharField):
    """A CharField that also refuses text PostgreSQL cannot store (NUL is refused by DRF)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators.append(_valid_unicode)


class AwareDateTime(serializers.DateTimeField):
    """An ISO 8601 datetime that must carry its offset: a naive one names no instant."""

    default_error_messages = {"naive": "Must include a time zone offset (e.g. Z or +02:00)."}

    def enforce_timezone(self, value):  # type: ignore[no-untyped-def]
        if timezone.is_naive(value):
            self.fail("naive")
        return super().enforce_timezone(value)


def _key(**kwargs: Any) -> Text:
    return Text(max_length=128, required=False, **kwargs)


class RememberSerializer(serializers.Serializer):
    content = Text(
        allow_blank=True,
        trim_whitespace=False,
        help_text="1 byte to 16 KB of UTF-8 text (not only whitespace).",
    )
    scope = serializers.ChoiceField(
        choices=Scope.choices, required=False, help_text="Default: the policy's default_scope."
    )
    kind = serializers.ChoiceField(choices=Kind.choices, default=Kind.FACT)
    record_kind = serializers.ChoiceField(choices=RecordKind.choices, default=RecordKind.FACT)
    classification = serializers.ChoiceField(
        choices=CLASSIFICATION_NAMES, required=False, help_text="Default: internal."
    )
    user_id = _key(
        help_text="The end user the memory is about (required for scope user; "
        "a user caller defaults to themself)."
    )
    session_id = _key(default="", help_text="Required for scope session.")
    team = _key(default="", help_text="Required for scope team.")
    project = _key(default="", help_text="Required for scope project.")
    retention_days = serializers.IntegerField(
        min_value=1, max_value=MAX_RETENTION_DAYS, required=False, allow_null=True
    )
    legal_hold = serializers.BooleanField(default=False)
    personal_data = serializers.BooleanField(
        default=False, help_text="Declare personal data; detection also sets the flag."
    )
    source = Text(max_length=200, default="", allow_blank=True)
    metadata = serializers.DictField(default=dict, help_text="A JSON object, at most 8 KB.")
    check_contradictions = serializers.BooleanField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Compare with the agent's current facts and retire those this one contradicts "
        "(default: the policy's check_contradictions).",
    )
    occurred_at = AwareDateTime(
        required=False,
        allow_null=True,
        default=None,
        help_text="When the fact happened or was said (ISO 8601 with a time zone offset), e.g. a "
        "conversation turn's session time; recall ranks items inside a time the query names "
        '("in May 2023", "on 8 May") higher. Default: not stated.',
    )
    split = serializers.BooleanField(
        default=False,
        help_text="Store one fact per sentence (shared provenance; metadata.split links them); "
        "the answer then has the batch shape.",
    )

    def to_draft(self) -> MemoryDraft:
        data = self.validated_data
        return MemoryDraft(
            content=data["content"],
            scope=data.get("scope"),
            kind=data["kind"],
            record_kind=data["record_kind"],
            classification=data.get("classification"),
            user_id=data.get("user_id"),
            session_id=data.get("session_id", ""),
            team=data.get("team", ""),
            project=data.get("project", ""),
            retention_days=data.get("retention_days"),
            legal_hold=data["legal_hold"],
            personal_data=data["personal_data"],
            source=data.get("source", ""),
            metadata=data["metadata"],
            check_contradictions=data.get("check_contradictions"),
            occurred_at=data.get("occurred_at"),
        )

    def to_request(self, *, idempotency_key: str | None, trace_parent: str | None) -> RememberRequest:
        return RememberRequest(
            draft=self.to_draft(),
            split=self.validated_data["split"],
            idempotency_key=idempotency_key,
            trace_parent=trace_parent,
        )


class BatchSerializer(serializers.Serializer):
    """Parsed item by item in the view, so one bad item gets its own error."""

    items = serializers.ListField(child=serializers.DictField(), min_length=1, max_length=MAX_BATCH)


class BatchSchemaSerializer(serializers.Serializer):
    items = RememberSerializer(many=True, help_text=f"1 to {MAX_BATCH} memories.")


class MemoryItemSerializer(serializers.ModelSerializer):
    classification = serializers.SerializerMethodField()
    agent_id = serializers.UUIDField(read_only=True)
    content = serializers.CharField(required=False, help_text="Present when include_content=true.")

    class Meta:
        model = MemoryItem
        fields = [
            "id", "agent_id", "content", "scope", "scopes", "kind", "record_kind", "classification",
            "personal_data", "personal_data_types", "user_id", "session_id", "team", "project",
            "source", "provenance", "metadata", "content_hash", "created_at", "updated_at",
            "valid_from", "invalid_at", "occurred_at", "retention_until", "legal_hold", "extraction_status",
            "extraction_error",
        ]  # fmt: skip
        read_only_fields = fields

    def get_classification(self, item: MemoryItem) -> str:
        return str(Classification(item.classification).label)

    def to_representation(self, item: MemoryItem) -> dict[str, Any]:
        data = super().to_representation(item)
        if not self.context.get("include_content", True):
            data.pop("content", None)
        return data


class ContradictionRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    old_item_id = serializers.UUIDField()
    reason = serializers.CharField()


class WrittenItemSerializer(MemoryItemSerializer):
    deduplicated = serializers.BooleanField(read_only=True)
    # Not read_only: the schema marks every read-only field required, and this one is
    # absent when the policy's contradiction check is off (the default).
    contradictions = ContradictionRefSerializer(
        many=True, required=False, help_text="Present when the contradiction check ran."
    )

    class Meta(MemoryItemSerializer.Meta):
        fields = [*MemoryItemSerializer.Meta.fields, "deduplicated", "contradictions"]
        read_only_fields = fields


class ErrorBodySerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.DictField()


class BatchResultSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["created", "deduplicated", "error"])
    item = MemoryItemSerializer(required=False)
    error = ErrorBodySerializer(required=False)


class BatchResponseSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    deduplicated = serializers.IntegerField()
    failed = serializers.IntegerField()
    results = BatchResultSerializer(many=True)


class StrictBoolean(serializers.BooleanField):
    """A query-string boolean that refuses an empty value instead of reading it as false."""

    def to_internal_value(self, data):  # type: ignore[no-untyped-def]
        if data == "":
            self.fail("invalid", input=data)
        return super().to_internal_value(data)


class StrictChoice(serializers.ChoiceField):
    """A query-string choice that refuses an empty value (``?scope=``) instead of
    reading it as absent."""

    def get_value(self, dictionary):  # type: ignore[no-untyped-def]
        if dictionary.get(self.field_name) == "":
            return ""
        return super().get_value(dictionary)


class ListQuerySerializer(serializers.Serializer):
    scope = serializers.ChoiceField(choices=Scope.choices, required=False)
    kind = serializers.ChoiceField(choices=Kind.choices, required=False)
    session_id = _key()
    user_id = _key()
    include_content = StrictBoolean(default=False)

    def to_request(self) -> ListRequest:
        data = self.validated_data
        return ListRequest(
            scope=data.get("scope"),
            kind=data.get("kind"),
            session_id=data.get("session_id"),
            user_id=data.get("user_id"),
            include_content=data["include_content"],
        )


class UpdateSerializer(serializers.Serializer):
    content = Text(allow_blank=True, trim_whitespace=False)


class RecallSerializer(serializers.Serializer):
    query = Text(max_length=MAX_QUERY_CHARS)
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=Scope.choices), required=False, max_length=len(Scope.values),
        help_text="Default: the policy's read_scopes.",
    )  # fmt: skip
    top_k = serializers.IntegerField(
        min_value=1, max_value=100, required=False, help_text="Default: the policy's recall_top_k."
    )
    session_id = _key(help_text="Session memory is searched only when given.")
    user_id = _key(
        help_text="User memory is searched only for this user (a user caller defaults to themself)."
    )
    team = _key()
    project = _key()
    min_score = serializers.FloatField(
        required=False,
        min_value=-1.0,
        max_value=1.0,
        help_text="Floor on cosine similarity (hybrid, vector) or on the text rank (keyword).",
    )
    search_mode = serializers.ChoiceField(choices=MODES, default="hybrid")
    recency_weight = serializers.FloatField(
        required=False, min_value=0.0, max_value=10.0, help_text="Hybrid only; default FEDMEM_RECENCY_WEIGHT."
    )
    as_of = serializers.DateTimeField(
        required=False, allow_null=True, help_text="Answer with what was current at this moment."
    )
    include_superseded = serializers.BooleanField(default=False, help_text="Also return retired facts.")

    def recall_fields(self) -> dict[str, Any]:
        """The fields every recall-shaped request shares, as the request dataclasses name them."""
        data = self.validated_data
        return {
            "query": data["query"],
            "scopes": tuple(data["scopes"]) if data.get("scopes") is not None else None,
            "top_k": data.get("top_k"),
            "session_id": data.get("session_id"),
            "user_id": data.get("user_id"),
            "team": data.get("team"),
            "project": data.get("project"),
            "min_score": data.get("min_score"),
            "search_mode": data["search_mode"],
            "recency_weight": data.get("recency_weight"),
            "as_of": data.get("as_of"),
            "include_superseded": data.get("include_superseded", False),
        }


class RoutedWriteSerializer(serializers.Serializer):
    engine = serializers.DictField(
        help_text="engine_id, provider, status (queued | settled), external_ids, event_id, detail."
    )


class RecallModeSerializer(RecallSerializer):
    mode = serializers.ChoiceField(
        choices=["hybrid", "graph"],
        default="hybrid",
        help_text="graph: hybrid seeds expanded over entity bridges and causal links, then reranked "
        "(seeds, chain continuations, bridge discoveries).",
    )
    hops = serializers.IntegerField(min_value=1, max_value=4, default=2, help_text="Graph mode only.")

    def to_request(self, *, trace_parent: str | None = None) -> RecallRequest:
        data = self.validated_data
        return RecallRequest(
            **self.recall_fields(), mode=data["mode"], hops=data["hops"], trace_parent=trace_parent
        )


class SearchSerializer(RecallSerializer):
    kinds = serializers.ListField(child=serializers.ChoiceField(choices=Kind.choices), required=False)
    record_kinds = serializers.ListField(
        child=serializers.ChoiceField(choices=RecordKind.choices), required=False
    )
    created_after = serializers.DateTimeField(required=False)
    created_before = serializers.DateTimeField(required=False)

    def to_request(self) -> SearchRequest:
        data = self.validated_data
        return SearchRequest(
            **self.recall_fields(),
            kinds=tuple(data.get("kinds", ())),
            record_kinds=tuple(data.get("record_kinds", ())),
            created_after=data.get("created_after"),
            created_before=data.get("created_before"),
        )


class RecallResultSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    content = serializers.CharField()
    score = serializers.FloatField(
        help_text="Local to this engine and search mode; never compare across sources."
    )
    similarity = serializers.FloatField(allow_null=True)
    vector_rank = serializers.IntegerField(allow_null=True)
    keyword_rank = serializers.IntegerField(allow_null=True)
    scope = serializers.CharField()
    scopes = serializers.ListField(child=serializers.CharField())
    kind = serializers.CharField()
    record_kind = serializers.CharField()
    created_at = serializers.DateTimeField()
    provenance = serializers.DictField()
    trust = serializers.ChoiceField(choices=["untrusted"])
    graph = serializers.DictField(
        required=False, help_text="Graph mode: {kind: seed|causal|entity, hop, seed_id, path}."
    )


class RecallResponseSerializer(serializers.Serializer):
    results = RecallResultSerializer(many=True)
    context = serializers.CharField(
        help_text="All results between nonce-carrying markers, as untrusted data."
    )
    nonce = serializers.CharField()
    search_mode = serializers.CharField()
    mode = serializers.ChoiceField(choices=["hybrid", "graph"])
    scopes = serializers.ListField(child=serializers.CharField())


class SearchHitSerializer(MemoryItemSerializer):
    score = serializers.FloatField(read_only=True)
    similarity = serializers.FloatField(read_only=True, allow_null=True)
    vector_rank = serializers.IntegerField(read_only=True, allow_null=True)
    keyword_rank = serializers.IntegerField(read_only=True, allow_null=True)

    class Meta(MemoryItemSerializer.Meta):
        fields = [*MemoryItemSerializer.Meta.fields, "score", "similarity", "vector_rank", "keyword_rank"]
        read_only_fields = fields


class SearchResponseSerializer(serializers.Serializer):
    results = SearchHitSerializer(many=True)
    search_mode = serializers.CharField()
    scopes = serializers.ListField(child=serializers.CharField())


class PurgeSerializer(serializers.Serializer):
    scope = serializers.ChoiceField(choices=Scope.choices)
    confirm = serializers.BooleanField(default=False)
    team = _key(default="")
    project = _key(default="")
    session_id = _key(default="")
    user_id = _key(default="")

    def to_request(self) -> PurgeRequest:
        return PurgeRequest(**self.validated_data)


class PurgeReportSerializer(serializers.Serializer):
    scope = serializers.CharField()
    deleted = serializers.IntegerField(help_text="Items deleted.")
    unscoped = serializers.IntegerField(help_text="Items kept because they are also in another scope.")
    kept_legal_hold = serializers.IntegerField(help_text="Items kept untouched because of a legal hold.")
    session_messages_deleted = serializers.IntegerField()


class ExportSerializer(serializers.Serializer):
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=Scope.choices),
        required=False,
        help_text="Default: read_scopes.",
    )


class SessionMessageCreateSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=SessionMessage.Role.choices)
    content = Text(allow_blank=True, trim_whitespace=False)
    user_id = _key()
    classification = serializers.ChoiceField(choices=CLASSIFICATION_NAMES, required=False)
    metadata = serializers.DictField(default=dict)

    def to_request(self, session_id: str) -> MessageRequest:
        return MessageRequest(session_id=session_id, **self.validated_data)


class SessionMessageSerializer(serializers.ModelSerializer):
    classification = serializers.SerializerMethodField()

    class Meta:
        model = SessionMessage
        fields = [
            "id", "session_id", "user_id", "role", "content", "classification", "personal_data",
            "personal_data_types", "metadata", "created_at",
        ]  # fmt: skip
        read_only_fields = fields

    def get_classification(self, message: SessionMessage) -> str:
        return str(Classification(message.classification).label)
