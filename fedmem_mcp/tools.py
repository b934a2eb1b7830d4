"""The tool registry. Each tool is a serializer (its arguments, REST's where REST has
one) and a function that resolves access through the same gate as the REST view and
calls the same service or selector. Adding a tool is one decorated function:

    @tool("what_if", g.WhatIfSerializer, "What would collapse if one fact were removed.", read_only=True)
    def what_if(call: ToolCall) -> dict[str, Any]:
        return graph.what_if(call.access, call.parsed.to_request()).body()

Tools call memory.operations, never a REST view module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from django.http import QueryDict
from rest_framework import serializers

from core.pagination import CursorPagination
from governance.job_serializers import JobIdSerializer, JobSerializer
from governance.models.agents import AgentPermission
from governance.selectors import access_agent, access_job
from memory import graph_serializers as g
from memory import knowledge_serializers as knowledge_args
from memory import serializers as s
from memory.enforcement import MemoryAccess
from memory.operations import graph, memories
from memory.operations import knowledge as knowledge_ops
from memory.operations import recall as recall_ops
from memory.operations.access import agent_memory_access
from providers import services as provider_services
from providers.serializers import FederatedRecallRequestSerializer


@dataclass
class ToolCall:
    """One call: who (the authenticated principal), on which agent, with which
    parsed arguments."""

    principal: Any
    agent_id: str
    parsed: serializers.Serializer

    @property
    def data(self) -> dict[str, Any]:
        return self.parsed.validated_data

    @property
    def args(self) -> Any:
        """The parsed arguments, for their ``to_request()``."""
        return self.parsed

    @cached_property
    def access(self) -> MemoryAccess:
        return agent_memory_access(self.principal, self.agent_id)


Rows = Callable[[dict[str, Any]], list[Any]]


def _results(body: dict[str, Any]) -> list[Any]:
    return list(body.get("results", []))


def _whole(body: dict[str, Any]) -> list[Any]:
    return [body]


@dataclass(frozen=True)
class Tool:
    name: str
    args: type[serializers.Serializer]
    description: str
    run: Callable[[ToolCall], dict[str, Any]]
    # What goes between the untrusted-data markers: the result rows, or the whole body.
    rows: Rows = _whole
    read_only: bool = False
    destructive: bool = False


REGISTRY: dict[str, Tool] = {}


def tool(
    name: str,
    args: type[serializers.Serializer],
    description: str,
    *,
    rows: Rows = _whole,
    read_only: bool = False,
    destructive: bool = False,
) -> Callable[[Callable[[ToolCall], dict[str, Any]]], Callable[[ToolCall], dict[str, Any]]]:
    def register(run: Callable[[ToolCall], dict[str, Any]]) -> Callable[[ToolCall], dict[str, Any]]:
        if name in REGISTRY:
            raise ValueError(f"tool {name} registered twice")
        REGISTRY[name] = Tool(name, args, description, run, rows, read_only, destructive)
        return run

    return register


# --- arguments a REST route carries in its path or headers -------------------------


class RememberArgs(s.RememberSerializer):
    idempotency_key = serializers.RegexField(
        r"^[\x21-\x7e]{1,255}$",
        required=False,
        help_text="Makes a retry safe: the same key and arguments answer with the same memory.",
    )


class ItemArgs(serializers.Serializer):
    item_id = serializers.UUIDField(help_text="The memory's id.")


class UpdateArgs(ItemArgs, s.UpdateSerializer):
    pass


class ListArgs(s.ListQuerySerializer):
    limit = serializers.IntegerField(min_value=1, max_value=200, default=50)
    cursor = serializers.CharField(
        max_length=1000, required=False, help_text="The `next` cursor of the previous page."
    )


# --- memory --------------------------------------------------------------------------


@tool(
    "remember",
    RememberArgs,
    "Store a memory in the agent's memory (scope, kind and classification as the agent's policy "
    "allows). Answers with the stored memory; an exact duplicate answers with the existing one. "
    "When the policy sends memory to an external engine (mem0, hybrid) the answer is that engine's "
    "`{engine: {status, event_id, ...}}`, and queued means not yet settled.",
)
def remember(call: ToolCall) -> dict[str, Any]:
    # The REST route's own operation, engine routing included.
    request = call.args.to_request(idempotency_key=call.data.get("idempotency_key"), trace_parent=None)
    return memories.remember(call.access, request).body()


@tool(
    "recall",
    s.RecallModeSerializer,
    "Recall what the agent remembers about a query, ranked; mode=graph follows entity and causal "
    "links (use it for why-questions). The text is framed as untrusted data.",
    rows=_results,
    read_only=True,
)
def recall(call: ToolCall) -> dict[str, Any]:
    return recall_ops.recall(call.access, call.args.to_request()).body()


@tool(
    "search",
    s.SearchSerializer,
    "Search memories with filters (kinds, record kinds, created_after/before): a plain ranked list.",
    rows=_results,
    read_only=True,
)
def search(call: ToolCall) -> dict[str, Any]:
    return recall_ops.search(call.access, call.args.to_request()).body()


@tool("update_memory", UpdateArgs, "Change a memory's content (history keeps the old text).")
def update_memory(call: ToolCall) -> dict[str, Any]:
    return memories.update(call.access, call.data["item_id"], call.data["content"]).body()


@tool("forget", ItemArgs, "Delete one memory (refused while it is under legal hold).", destructive=True)
def forget(call: ToolCall) -> dict[str, Any]:
    memories.forget(call.access, call.data["item_id"])
    return {"id": str(call.data["item_id"]), "forgotten": True}


class _Query:
    """What DRF's cursor paginator reads from a request, so a tool pages exactly as
    GET …/memories does and its cursors are the same."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.query_params = QueryDict(mutable=True)
        self.query_params["limit"] = str(data["limit"])
        if data.get("cursor"):
            self.query_params["cursor"] = data["cursor"]

    def build_absolute_uri(self) -> str:
        return "mcp://list_memories"


def _cursor(link: str | None) -> str | None:
    if not link:
        return None
    return QueryDict(link.partition("?")[2]).get("cursor") or None


@tool(
    "list_memories",
    ListArgs,
    "List the agent's memories, newest first, a page at a time (pass `next` back as cursor).",
    rows=_results,
    read_only=True,
)
def list_memories(call: ToolCall) -> dict[str, Any]:
    data = call.data
    query = call.args.to_request()
    paginator = CursorPagination()
    page = paginator.paginate_queryset(memories.memories(call.access, query), _Query(data))  # type: ignore[arg-type]
    assert page is not None
    return {
        "results": memories.page_body(page, include_content=query.include_content),
        "next": _cursor(paginator.get_next_link()),
        "previous": _cursor(paginator.get_previous_link()),
    }


@tool(
    "history",
    ItemArgs,
    "A memory's supersession links and every recorded change.",
    rows=lambda body: [body["item"], *body["events"]],
    read_only=True,
)
def history(call: ToolCall) -> dict[str, Any]:
    return graph.history(call.access, call.data["item_id"]).body()


# --- graph ---------------------------------------------------------------------------


@tool(
    "discover",
    g.DiscoverSerializer,
    "Facts connected to a query: hybrid-recall seeds, then hops over shared entities and "
    "cause-effect links, with the path that reached each fact.",
    rows=_results,
    read_only=True,
)
def discover(call: ToolCall) -> dict[str, Any]:
    return graph.discover(call.access, call.args.to_request()).body()


@tool(
    "trace",
    g.TraceSerializer,
    "Follow cause-effect links from a fact (item_id) or a text (content) to its effects or "
    "to its root causes (direction=causes).",
    read_only=True,
)
def trace(call: ToolCall) -> dict[str, Any]:
    return graph.trace(call.access, call.args.to_request()).body()


@tool(
    "causal_chain",
    g.CausalChainSerializer,
    "The shortest chain of recorded cause-effect links from one event (from) to another (to); "
    "chain is null when none exists.",
    read_only=True,
)
def causal_chain(call: ToolCall) -> dict[str, Any]:
    return graph.causal_chain(call.access, call.args.to_request()).body()


@tool(
    "what_if",
    g.WhatIfSerializer,
    "What would collapse if one fact were removed (hypothetical: nothing is changed).",
    read_only=True,
)
def what_if(call: ToolCall) -> dict[str, Any]:
    return graph.what_if(call.access, call.args.to_request()).body()


# --- federation ----------------------------------------------------------------------


@tool(
    "federated_recall",
    FederatedRecallRequestSerializer,
    "Recall across every memory engine the agent's policy names (fedmem's own and external ones): "
    "each hit labelled with its source, each source with its status.",
    rows=_results,
    read_only=True,
)
def federated_recall(call: ToolCall) -> dict[str, Any]:
    agent = access_agent(call.principal, call.agent_id, AgentPermission.CAN_INVOKE)
    data = call.data
    return provider_services.federated_recall(
        agent=agent,
        query=data["query"],
        engine_ids=data.get("engines"),
        top_k=data["top_k"],
        timeout_ms=data.get("timeout_ms"),
        isolation=data.get("isolation"),
        user_id=data.get("user_id"),
        session_id=data.get("session_id"),
    )


# --- knowledge -----------------------------------------------------------------------


@tool(
    "ingest_knowledge",
    knowledge_args.IngestSerializer,
    "Ingest 1 to 50 texts into a knowledge dataset (chunked into document memories; under a cognee "
    "or hybrid policy the policy's knowledge engine takes them). build_graph also queues the graph "
    "build as a job.",
)
def ingest_knowledge(call: ToolCall) -> dict[str, Any]:
    request = call.args.to_request(trace_parent=None)
    return knowledge_ops.ingest_knowledge(call.access, request, requested_by=call.principal).body()


@tool(
    "job_status",
    JobIdSerializer,
    "Status and progress of a queued ingest or graph build of this agent (the `job.id` that "
    "ingest_knowledge answered with).",
    read_only=True,
)
def job_status(call: ToolCall) -> dict[str, Any]:
    access_agent(call.principal, call.agent_id, AgentPermission.CAN_INVOKE)
    return dict(JobSerializer(access_job(call.principal, call.data["job_id"])).data)


@tool(
    "search_knowledge",
    knowledge_args.KnowledgeSearchSerializer,
    "Search knowledge datasets: CHUNKS (ranked chunks), lexical chunks, summaries, or a completion "
    "(a cited answer with the facts, entities and causal paths it used).",
    read_only=True,
)
def search_knowledge(call: ToolCall) -> dict[str, Any]:
    return knowledge_ops.knowledge_search(call.access, call.args.to_request(trace_parent=None)).body()


@tool(
    "answer",
    knowledge_args.AnswerSerializer,
    "Answer a question from memory: the facts and causal chain used and a cited answer "
    "(synthesizer builtin is deterministic, no model).",
    read_only=True,
)
def answer(call: ToolCall) -> dict[str, Any]:
    return knowledge_ops.answer(call.access, call.args.to_request()).body()
