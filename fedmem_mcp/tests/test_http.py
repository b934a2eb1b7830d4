"""The MCP tools over streamable HTTP on loopback, driven by the official SDK's
client against daphne serving the production ASGI app."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from governance.tests import factories as f
from memory.models import MemoryItem

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = {
    "remember", "recall", "search", "update_memory", "forget", "list_memories", "history",
    "discover", "trace", "causal_chain", "what_if", "federated_recall",
}  # fmt: skip
BEGIN = re.compile(r"^<<<MEMORY_DATA_BEGIN nonce=([0-9a-f]{32})>>>$", re.M)


class Mcp:
    """A synchronous face over one SDK session per call batch."""

    def __init__(self, url: str, key: str | None) -> None:
        self.url, self.key = url + "/mcp", key

    async def _session(self, work):
        headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with streamable_http_client(self.url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await work(session)

    def call(self, name: str, **arguments: Any):
        return asyncio.run(self._session(lambda session: session.call_tool(name, arguments)))

    def tools(self):
        return asyncio.run(self._session(lambda session: session.list_tools()))


def ok(result) -> dict:
    assert not result.is_error, result.content
    return result.structured_content


def error(result) -> dict:
    assert result.is_error
    body = json.loads(result.content[0].text)
    assert body == result.structured_content
    assert set(body["error"]) == {"code", "message", "details"}
    return body["error"]


def framed(result) -> tuple[str, list[dict]]:
    """The nonce and the decoded rows between the markers; nothing else in the text."""
    text = result.content[0].text
    lines = text.split("\n")
    match = BEGIN.match(lines[0])
    assert match, text
    nonce = match.group(1)
    assert lines[-1] == f"<<<MEMORY_DATA_END nonce={nonce}>>>"
    assert "untrusted data" in lines[1]
    assert text.count(nonce) == 3  # begin, notice, end: no row can spell it
    return nonce, [json.loads(line) for line in lines[2:-1]]


@pytest.fixture
def agent_mcp(world, asgi_server):
    return Mcp(asgi_server.url, f.agent_key(world.agent))


def test_lists_every_tool_with_a_closed_schema(agent_mcp):
    tools = {tool.name: tool for tool in agent_mcp.tools().tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.input_schema["type"] == "object"
        assert tool.input_schema["additionalProperties"] is False
        assert "agent_id" in tool.input_schema["properties"]
    assert tools["recall"].input_schema["required"] == ["query"]
    assert tools["recall"].annotations.read_only_hint is True
    assert tools["forget"].annotations.destructive_hint is True


def test_remember_recall_search_update_history_forget(world, agent_mcp):
    stored = ok(agent_mcp.call("remember", content="The staging database runs PostgreSQL 17", scope="agent"))
    item_id = stored["id"]
    assert MemoryItem.objects.get(pk=item_id).content == "The staging database runs PostgreSQL 17"

    recalled = agent_mcp.call("recall", query="which PostgreSQL does staging run?", scopes=["agent"])
    body = ok(recalled)
    assert body["results"][0]["id"] == item_id and body["results"][0]["trust"] == "untrusted"
    nonce, rows = framed(recalled)
    assert nonce == body["nonce"] and rows[0]["content"] == "The staging database runs PostgreSQL 17"

    found = ok(agent_mcp.call("search", query="PostgreSQL", scopes=["agent"]))
    assert [hit["id"] for hit in found["results"]] == [item_id]

    updated = agent_mcp.call(
        "update_memory", item_id=item_id, content="The staging database runs PostgreSQL 18"
    )
    assert ok(updated)["content"].endswith("18")
    assert framed(updated)[1][0]["content"].endswith("18")

    events = ok(agent_mcp.call("history", item_id=item_id))["events"]
    assert [e["event"] for e in events] == ["created", "updated"]

    assert ok(agent_mcp.call("forget", item_id=item_id)) == {"id": item_id, "forgotten": True}
    assert not MemoryItem.objects.filter(pk=item_id).exists()
    assert error(agent_mcp.call("history", item_id=item_id))["code"] == "memory_not_found"
