"""Request and response shapes of the knowledge endpoints (answer, ingest, datasets,
search, relations, delete), shared by the REST views and the MCP tools. Validation
only."""

from __future__ import annotations

from rest_framework import serializers

from core.vocabulary import CLASSIFICATION_NAMES, Classification, Scope
from memory.models import Dataset
from memory.operations import knowledge as ops
from memory.reasoning.synthesis import BUILTIN_SYNTHESIZER
from memory.serializers import MAX_QUERY_CHARS, StrictChoice, Text
from memory.services import knowledge as k

ANSWER_MODES = ["recall", "discover"]


class AnswerSerializer(serializers.Serializer):
    query = Text(max_length=MAX_QUERY_CHARS)
    mode = serializers.ChoiceField(
        choices=ANSWER_MODES,
        default="discover",
        help_text="recall: hybrid recall only; discover: seeds expanded over entities and causal links.",
    )
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=Scope.choices), required=False, allow_empty=False
    )
    top_k = serializers.IntegerField(min_value=1, max_value=50, default=5)
    hops = serializers.IntegerField(min_value=1, max_value=4, default=2, help_text="discover only.")
    as_of = serializers.DateTimeField(required=False, allow_null=True)
    user_id = Text(max_length=128, required=False)
    session_id = Text(max_length=128, required=False)
    synthesizer = Text(
        max_length=63,
        default=BUILTIN_SYNTHESIZER,
        help_text="'builtin' (deterministic, no model) or the id of an openai_compatible engine instance.",
    )

    def to_request(self) -> ops.AnswerRequest:
        data = self.validated_data
        return ops.AnswerRequest(
            query=data["query"],
            mode=data["mode"],
            scopes=tuple(data["scopes"]) if data.get("scopes") is not None else None,
            top_k=data["top_k"],
            hops=data["hops"],
            as_of=data.get("as_of"),
            user_id=data.get("user_id"),
            session_id=data.get("session_id"),
            synthesizer=data["synthesizer"],
        )


class AnswerBodySerializer(serializers.Serializer):
    text = serializers.CharField()
    citations = serializers.ListField(
        child=serializers.CharField(), help_text="Item ids the answer rests on."
    )
    synthesizer = serializers.CharField()
    detail = serializers.DictField()


class AnswerFactSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    content = serializers.CharField()
    kind = serializers.CharField(help_text="seed | causal | entity (discover) or recall.")
    score = serializers.FloatField(allow_null=True)
    why = serializers.DictField(required=False, help_text="discover: why the fact ranked (see discover).")
    path = serializers.ListField(child=serializers.DictField())
    trust = serializers.CharField()


class AnswerResponseSerializer(serializers.Serializer):
    query = serializers.CharField()
    mode = serializers.CharField()
    answer = AnswerBodySerializer()
    facts = AnswerFactSerializer(many=True)
    chain = serializers.ListField(
        child=serializers.DictField(),
        help_text=(
            "Causal hops, root cause first. Each: cause, effect, cue (the cue word, or "
            "'implicit (<scorer>)'), item_id (the fact stating the cause), effect_item_id (the fact "
            "stating the effect), edge_id (the stored causal edge, null for an implicit link). "
            "answer.detail.chain_item_ids lists the chain's facts, root first; root_item_id is the first."
        ),
    )
    entities = serializers.ListField(child=serializers.CharField())
    scopes = serializers.ListField(child=serializers.CharField())


class IngestSerializer(serializers.Serializer):
    texts = serializers.ListField(
        child=Text(trim_whitespace=False, allow_blank=True), min_length=1, max_length=k.MAX_TEXTS
    )
    dataset_id = Text(max_length=100)
    scope = serializers.ChoiceField(choices=list(k.KNOWLEDGE_SCOPES), default=Scope.AGENT)
    team = Text(max_length=128, default="", allow_blank=True)
    project = Text(max_length=128, default="", allow_blank=True)
    classification = serializers.ChoiceField(choices=CLASSIFICATION_NAMES, required=False)
    retention_days = serializers.IntegerField(min_value=1, max_value=36500, required=False, allow_null=True)
    legal_hold = serializers.BooleanField(default=False)
    build_graph = serializers.BooleanField(default=False, help_text="Also queue the graph build (a job).")
    user_id = Text(
        max_length=128,
        required=False,
        allow_blank=True,
        help_text="The subject the knowledge was written for (default: the calling user; none for an "
        "agent key). The chunks carry it: erasing that subject erases them with their graph.",
    )

    def to_request(self, *, trace_parent: str | None) -> ops.IngestRequest:
        data = self.validated_data
        return ops.IngestRequest(
            texts=tuple(data["texts"]),
            dataset_id=data["dataset_id"],
            scope=data["scope"],
            team=data["team"],
            project=data["project"],
            classification=data.get("classification"),
            retention_days=data.get("retention_days"),
            legal_hold=data["legal_hold"],
            build_graph=data["build_graph"],
            trace_parent=trace_parent,
            user_id=data.get("user_id"),
        )


class DatasetSerializer(serializers.Serializer):
    dataset_id = serializers.CharField(source="name")
    agent_id = serializers.UUIDField()
    scope = serializers.CharField()
    team = serializers.CharField()
    project = serializers.CharField()
    classification = serializers.SerializerMethodField()
    legal_hold = serializers.BooleanField()
    engine_id = serializers.CharField(source="engine")
    documents = serializers.IntegerField()
    graph_status = serializers.CharField()
    graph_job = serializers.UUIDField(allow_null=True)
    graph_built_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()

    def get_classification(self, obj: Dataset) -> str:
        return str(Classification(obj.classification).label)


class IngestResponseSerializer(serializers.Serializer):
    queued = serializers.BooleanField(help_text="True: a job stores the chunks (answered 202).")
    dataset = DatasetSerializer()
    created = serializers.BooleanField()
    engine_id = serializers.CharField()
    chunks = serializers.IntegerField()
    stored = serializers.IntegerField()
    deduplicated = serializers.IntegerField()
    failed = serializers.ListField(child=serializers.DictField())
    item_ids = serializers.ListField(child=serializers.UUIDField())
    engine_result = serializers.DictField(allow_null=True)
    job = serializers.DictField(
        allow_null=True, help_text="The ingest's job when queued, else the graph build's job (build_graph)."
    )


class DatasetQuerySerializer(serializers.Serializer):
    scope = StrictChoice(choices=list(k.KNOWLEDGE_SCOPES), required=False)


class GraphSerializer(serializers.Serializer):
    dataset_ids = serializers.ListField(child=Text(max_length=100), min_length=1, max_length=50)


class JobRefSerializer(serializers.Serializer):
    job = serializers.DictField()


class KnowledgeSearchSerializer(serializers.Serializer):
    query = Text(max_length=MAX_QUERY_CHARS)
    dataset_ids = serializers.ListField(
        child=Text(max_length=100), required=False, max_length=50, help_text="Default: every visible dataset."
    )
    top_k = serializers.IntegerField(min_value=1, max_value=50, default=10)
    search_type = serializers.ChoiceField(choices=list(k.SEARCH_TYPES), default="CHUNKS")
    hops = serializers.IntegerField(min_value=1, max_value=4, default=2, help_text="GRAPH_COMPLETION only.")
    synthesizer = Text(max_length=63, default=BUILTIN_SYNTHESIZER, help_text="Completion types only.")

    def to_request(self, *, trace_parent: str | None) -> ops.KnowledgeSearchRequest:
        data = self.validated_data
        return ops.KnowledgeSearchRequest(
            query=data["query"],
            dataset_ids=tuple(data["dataset_ids"]) if data.get("dataset_ids") is not None else None,
            top_k=data["top_k"],
            search_type=data["search_type"],
            hops=data["hops"],
            synthesizer=data["synthesizer"],
            trace_parent=trace_parent,
        )


class KnowledgeSearchResponseSerializer(serializers.Serializer):
    search_type = serializers.CharField()
    datasets = serializers.ListField(child=serializers.CharField())
    results = serializers.ListField(child=serializers.DictField())
    context = serializers.DictField(
        required=False, help_text="Completion types: facts, entities, causal paths."
    )
    answer = AnswerBodySerializer(required=False)
    engine_answers = serializers.ListField(child=serializers.DictField(), required=False)


class RelationsQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=500, default=100)


class RelationsResponseSerializer(serializers.Serializer):
    dataset_id = serializers.CharField()
    engine_id = serializers.CharField()
    entities = serializers.ListField(child=serializers.DictField())
    relations = serializers.ListField(child=serializers.DictField())
    causal_edges = serializers.ListField(child=serializers.DictField())


class DeleteResponseSerializer(serializers.Serializer):
    dataset_id = serializers.CharField()
    deleted = serializers.DictField(child=serializers.IntegerField())
