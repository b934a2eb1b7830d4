"""fedmem as a LangGraph agent's long-term store.

`FedmemStore` is a `langgraph.store.base.BaseStore` backed by fedmem_client: every
item is one fedmem memory (the value as JSON in the content, the namespace and key
in metadata), so the graph's long-term memory is governed like any other —
policy, retention, legal holds, erasure, audit. Semantic `search(query=...)` is
fedmem's hybrid search; without a query it lists.

    python examples/langgraph_store.py http://127.0.0.1:8000 fm_…
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from fedmem_client import AgentMemory, FedmemClient

SCOPE = "agent"
META = "langgraph"


def _when(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class FedmemStore(BaseStore):
    """LangGraph's store interface over one agent's fedmem memory."""

    def __init__(self, memory: AgentMemory, *, scope: str = SCOPE) -> None:
        self.memory, self.scope = memory, scope

    # -- mapping ----------------------------------------------------------------

    def _rows(self) -> Iterable[dict[str, Any]]:
        for row in self.memory.iter_memories(scope=self.scope, include_content=True, limit=200):
            if META in (row.get("metadata") or {}):
                yield row

    def _find(self, namespace: tuple[str, ...], key: str) -> dict[str, Any] | None:
        for row in self._rows():
            meta = row["metadata"][META]
            if tuple(meta["namespace"]) == namespace and meta["key"] == key:
                return row
        return None

    def _item(self, row: dict[str, Any], score: float | None = None, *, search: bool = False) -> Item:
        meta = row["metadata"][META]
        fields = {
            "value": json.loads(row["content"]),
            "key": meta["key"],
            "namespace": tuple(meta["namespace"]),
            "created_at": _when(row["created_at"]),
            "updated_at": _when(row["updated_at"]),
        }
        return SearchItem(**fields, score=score) if search else Item(**fields)

    # -- operations -------------------------------------------------------------

    def _put(self, op: PutOp) -> None:
        existing = self._find(op.namespace, op.key)
        if op.value is None:
            if existing:
                self.memory.forget(existing["id"])
            return
        content = json.dumps(op.value, sort_keys=True, ensure_ascii=False)
        if existing:
            self.memory.update(existing["id"], content)
            return
        self.memory.remember(
            content,
            scope=self.scope,
            kind="semantic",
            source="langgraph",
            metadata={META: {"namespace": list(op.namespace), "key": op.key}},
            idempotency_key=uuid.uuid5(uuid.NAMESPACE_URL, f"{op.namespace}/{op.key}/{content}").hex,
        )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = op.namespace_prefix
        found: list[SearchItem] = []
        if op.query:
            hits = self.memory.search(
                op.query, scopes=[self.scope], top_k=min(100, op.limit + op.offset + 20)
            )
            rows = [(hit, hit["score"]) for hit in hits["results"] if META in (hit.get("metadata") or {})]
        else:
            rows = [(row, None) for row in self._rows()]
        for row, score in rows:
            item = self._item(row, score, search=True)
            if item.namespace[: len(prefix)] != prefix:
                continue
            if op.filter and any(item.value.get(k) != v for k, v in op.filter.items()):
                continue
            found.append(item)  # type: ignore[arg-type]
        return found[op.offset : op.offset + op.limit]

    @staticmethod
    def _matches(namespace: tuple[str, ...], condition: Any) -> bool:
        path = tuple(condition.path)
        if len(path) > len(namespace):
            return False
        part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
        return all(want in ("*", have) for want, have in zip(path, part, strict=True))

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        spaces = sorted({tuple(row["metadata"][META]["namespace"]) for row in self._rows()})
        for condition in op.match_conditions or ():
            spaces = [ns for ns in spaces if self._matches(ns, condition)]
        if op.max_depth is not None:
            spaces = sorted({ns[: op.max_depth] for ns in spaces})
        return spaces[op.offset : op.offset + op.limit]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                row = self._find(op.namespace, op.key)
                results.append(self._item(row) if row else None)
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:  # pragma: no cover
                raise TypeError(f"unsupported store operation {op!r}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        import asyncio

        return await asyncio.to_thread(self.batch, list(ops))


# --- a small agent: remembers what the user tells it, answers from its store -------


class State(TypedDict):
    user: str
    message: str
    reply: str


def respond(state: State, *, store: BaseStore) -> dict[str, str]:
    namespace = ("memories", state["user"])
    text = state["message"]
    if text.lower().startswith("remember "):
        fact = text[len("remember ") :].strip()
        store.put(namespace, uuid.uuid5(uuid.NAMESPACE_URL, fact).hex, {"text": fact})
        return {"reply": f"Noted: {fact}"}
    hits = store.search(namespace, query=text, limit=1)
    if not hits:
        return {"reply": "I don't know yet."}
    return {"reply": f"From memory: {hits[0].value['text']}"}


def build_graph(store: BaseStore) -> Any:
    graph = StateGraph(State)
    graph.add_node("respond", respond)
    graph.add_edge(START, "respond")
    graph.add_edge("respond", END)
    return graph.compile(store=store)


def main(argv: list[str]) -> None:
    url, key = argv[1:3]
    with FedmemClient(url, key) as client:
        agent = build_graph(FedmemStore(client.agent(client.me()["principal"]["id"])))
        for message in ("remember Dana's favourite editor is Helix", "Which editor does Dana like?"):
            print(">", message)
            print(agent.invoke({"user": "dana", "message": message, "reply": ""})["reply"])


if __name__ == "__main__":
    main(sys.argv)
