"""Request and response shapes of the graph endpoints (discover, trace, causal_chain,
what_if, supersede, history), shared by the REST views and the MCP tools. Validation
only."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.vocabulary import Scope
from memory.operations.graph import (
    CausalChainRequest,
    DiscoverRequest,
    SupersedeRequest,
    TraceRequest,
    WhatIfRequest,
    Window,
)
from memory.serializers import MAX_QUERY_CHARS, MemoryItemSerializer, Text

MAX_DEPTH = 10
MAX_VISITED = 500
MAX_HOPS = 4


def _bounded(default: int, maximum: int, **kwargs: Any) -> serializers.IntegerField:
    return serializers.IntegerField(min_value=1, max_value=maximum, default=default, **kwargs)


class _Time(serializers.Serializer):
    as_of = serializers.DateTimeField(
        required=False, allow_null=True, help_text="Answer with what was current at this moment."
    )
    include_superseded = serializers.BooleanField(default=False, help_text="Also traverse retired facts.")

    def window(self) -> Window:
        data = self.validated_data
        return Window(as_of=data.get("as_of"), include_superseded=data.get("include_superseded", False))


class DiscoverSerializer(_Time):
    query = Text(max_length=MAX_QUERY_CHARS)
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=Scope.choices), required=False, allow_empty=False
    )
    user_id = Text(max_length=128, required=False)
    session_id = Text(max_length=128, required=False)
    top_k = _bounded(5, 50, help_text="How many hybrid-recall seeds.")
    hops = _bounded(2, MAX_HOPS)
    max_results = _bounded(20, 200)
    max_visited = _bounded(200, MAX_VISITED)
    isolate = serializers.BooleanField(
        default=False, help_text="Confine traversal (not only the seeds) to the requested scopes."
    )

    def to_request(self) -> DiscoverRequest:
        data = self.validated_data
        return DiscoverRequest(
            query=data["query"],
            scopes=tuple(data["scopes"]) if data.get("scopes") is not None else None,
            user_id=data.get("user_id"),
            session_id=data.get("session_id"),
            top_k=data["top_k"],
            hops=data["hops"],
            max_results=data["max_results"],
            max_visited=data["max_visited"],
            isolate=data["isolate"],
            window=self.window(),
        )


class TraceSerializer(_Time):
    item_id = serializers.UUIDField(required=False)
    content = Text(max_length=MAX_QUERY_CHARS, required=False)
    direction = serializers.ChoiceField(choices=["effects", "causes"])
    max_depth = _bounded(5, MAX_DEPTH)
    max_visited = _bounded(100, MAX_VISITED)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("item_id" in attrs) == ("content" in attrs):
            raise serializers.ValidationError({"item_id": ["Give exactly one of item_id and content."]})
        return attrs

    def to_request(self) -> TraceRequest:
        data = self.validated_data
        return TraceRequest(
            direction=data["direction"],
            item_id=data.get("item_id"),
            content=data.get("content"),
            max_depth=data["max_depth"],
            max_visited=data["max_visited"],
            window=self.window(),
        )


class CausalChainSerializer(_Time):
    # "from" is a Python keyword: declared through the class namespace.
    vars()["from"] = Text(max_length=MAX_QUERY_CHARS, help_text="The cause to start from.")
    to = Text(max_length=MAX_QUERY_CHARS, help_text="The effect to reach.")
    max_depth = _bounded(5, MAX_DEPTH)
    max_visited = _bounded(100, MAX_VISITED)

    def to_request(self) -> CausalChainRequest:
        data = self.validated_data
        return CausalChainRequest(
            source=data["from"],
            target=data["to"],
            max_depth=data["max_depth"],
            max_visited=data["max_visited"],
            window=self.window(),
        )


class WhatIfSerializer(_Time):
    item_id = serializers.UUIDField(help_text="The fact to remove hypothetically.")
    origin = Text(max_length=MAX_QUERY_CHARS, help_text="Where the causal paths start (effects) or end.")
    direction = serializers.ChoiceField(choices=["effects", "causes"], default="effects")
    max_depth = _bounded(5, MAX_DEPTH)
    max_visited = _bounded(100, MAX_VISITED)

    def to_request(self) -> WhatIfRequest:
        data = self.validated_data
        return WhatIfRequest(
            item_id=data["item_id"],
            origin=data["origin"],
            direction=data["direction"],
            max_depth=data["max_depth"],
            max_visited=data["max_visited"],
            window=self.window(),
        )


class HopSerializer(serializers.Serializer):
    edge_id = serializers.IntegerField()
    cause = serializers.CharField()
    effect = serializers.CharField()
    cue = serializers.CharField()
    item_id = serializers.UUIDField(help_text="The fact asserting this hop.")
    depth = serializers.IntegerField()
    from_edge = serializers.IntegerField(allow_null=True)


class TerminalSerializer(serializers.Serializer):
    span = serializers.CharField()
    item_id = serializers.UUIDField()
    edge_id = serializers.IntegerField()


class TraceResponseSerializer(serializers.Serializer):
    origin = serializers.DictField()
    direction = serializers.CharField()
    chain = HopSerializer(many=True)
    terminals = TerminalSerializer(many=True)
    root_causes = TerminalSerializer(many=True, help_text="The terminals of direction=causes.")
    visited = serializers.IntegerField()
    truncated = serializers.BooleanField(help_text="A bound (max_depth or max_visited) cut the walk short.")


class CausalChainResponseSerializer(serializers.Serializer):
    chain = HopSerializer(many=True, allow_null=True, help_text="Null when no chain exists.")


class SpanSerializer(serializers.Serializer):
    span = serializers.CharField()
    item_id = serializers.UUIDField()
    supported_by = serializers.ListField(child=serializers.UUIDField(), required=False)


class WhatIfResponseSerializer(serializers.Serializer):
    item_id = serializers.UUIDField()
    origin = serializers.CharField()
    direction = serializers.CharField()
    pruned_edges = HopSerializer(many=True)
    collapsed = SpanSerializer(many=True, help_text="Spans that lose every causal path.")
    survived = SpanSerializer(many=True, help_text="Spans another path still supports.")


class StepSerializer(serializers.Serializer):
    from_item = serializers.UUIDField()
    to_item = serializers.UUIDField()
    bridge = serializers.ChoiceField(choices=["terms", "entity", "causal", "session"])
    entity = serializers.CharField(required=False)
    weight = serializers.FloatField(required=False, help_text="The entity's specificity (entity bridges).")
    link = serializers.DictField(required=False)


class ChainPlaceSerializer(serializers.Serializer):
    position = serializers.IntegerField(help_text="1: the nearest cause of the best match, 2: the next.")
    link = serializers.FloatField(help_text="The score of its link to the fact after it on the chain.")
    basis = serializers.ChoiceField(
        choices=["asserted", "entity", "session", "words"],
        help_text="What joins it to the fact after it: a stored span link, a specific entity or synonym "
        "span, one session, or only shared word stems. Only an asserted link may lift it above the best "
        "direct match left.",
    )


class WhySerializer(serializers.Serializer):
    score = serializers.FloatField(help_text="relevance + graph weight x graph score: the rank order.")
    relevance = serializers.FloatField(help_text="dense weight x similarity + (1 - dense weight) x lexical.")
    similarity = serializers.FloatField(help_text="Cosine similarity to the query.")
    lexical = serializers.FloatField(help_text="BM25 coverage of the query's words (0 when not a seed).")
    graph = serializers.FloatField(
        help_text="PageRank support from the other seeds (its own echo left out), 1 = the best fact."
    )
    chain = ChainPlaceSerializer(
        allow_null=True,
        help_text="Its place on the causal chain walked back from the best match (null: not on it).",
    )
    reached_by = serializers.ChoiceField(choices=["seed", "terms", "causal", "entity", "session"])
    bridges = StepSerializer(many=True, help_text="The entity / session steps that reached it (last 3).")
    links = StepSerializer(many=True, help_text="The causal links that reached it (last 3).")


class RelationSerializer(serializers.Serializer):
    cause = serializers.CharField()
    effect = serializers.CharField()
    cue = serializers.CharField()


# How a discovered fact was reached: a seed of the search, shared rare terms, a causal
# link, a shared entity, or a neighbouring turn of its session.
DISCOVERY_KINDS = ["seed", "terms", "causal", "entity", "session"]


class DiscoveredSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    content = serializers.CharField()
    session_id = serializers.CharField()
    kind = serializers.ChoiceField(choices=DISCOVERY_KINDS, help_text="How the fact was reached.")
    hop = serializers.IntegerField()
    seed_id = serializers.UUIDField()
    cross_session = serializers.BooleanField()
    score = serializers.FloatField(help_text="The fused rank score (see why).")
    why = WhySerializer(help_text="Why the fact ranked where it did.")
    path = StepSerializer(many=True)
    relations = RelationSerializer(many=True)
    trust = serializers.CharField()


class DiscoverResponseSerializer(serializers.Serializer):
    results = DiscoveredSerializer(many=True)
    scopes = serializers.ListField(child=serializers.CharField())


class SupersedeSerializer(serializers.Serializer):
    content = Text(allow_blank=True, trim_whitespace=False)
    reason = Text(max_length=200, default="", allow_blank=True)

    def to_request(self, item_id: Any) -> SupersedeRequest:
        data = self.validated_data
        return SupersedeRequest(item_id=item_id, content=data["content"], reason=data["reason"])


class SupersedeResponseSerializer(serializers.Serializer):
    old = MemoryItemSerializer()
    new = MemoryItemSerializer()


class SupersessionRecordSerializer(serializers.Serializer):
    item_id = serializers.UUIDField()
    reason = serializers.CharField()
    at = serializers.DateTimeField()
    reverted_at = serializers.DateTimeField(allow_null=True)


class HistoryEventSerializer(serializers.Serializer):
    event = serializers.CharField()
    actor_type = serializers.CharField()
    actor_id = serializers.CharField()
    old_content = serializers.CharField()
    new_content = serializers.CharField()
    details = serializers.DictField()
    at = serializers.DateTimeField()


class HistoryResponseSerializer(serializers.Serializer):
    item = MemoryItemSerializer()
    supersedes = SupersessionRecordSerializer(many=True)
    superseded_by = SupersessionRecordSerializer(many=True)
    events = HistoryEventSerializer(many=True)
