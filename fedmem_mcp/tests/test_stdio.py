"""The MCP tools over stdio: the official SDK's client spawns
``manage.py fedmem_mcp`` as a subprocess against the test database."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from fedmem_mcp.tests.live import ROOT, subprocess_env
from governance.models import ApiKey
from governance.tests import factories as f
from memory.models import MemoryItem

pytestmark = pytest.mark.django_db(transaction=True)


def run_session(key: str, work):
    env = subprocess_env()
    env["FEDMEM_MCP_KEY"] = key
    params = StdioServerParameters(
        command=sys.executable, args=["manage.py", "fedmem_mcp"], env=env, cwd=str(ROOT)
    )

    async def scenario():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await work(session)

    return asyncio.run(scenario())


def test_stdio_remember_recall_and_revocation(world):
    key = f.agent_key(world.agent)

    async def work(session):
        tools = {tool.name for tool in (await session.list_tools()).tools}
        stored = await session.call_tool(
            "remember", {"content": "Invoices are archived for ten years", "scope": "agent"}
        )
        recalled = await session.call_tool("recall", {"query": "how long are invoices kept?"})
        foreign = await session.call_tool("recall", {"query": "x", "agent_id": str(world.foreign_agent.pk)})
        # Revoked while the server runs: the very next call is refused.
        await asyncio.to_thread(
            lambda: ApiKey.objects.filter(agent=world.agent).update(revoked_at="2026-01-01T00:00:00Z")
        )
        after = await session.call_tool("recall", {"query": "invoices"})
        return tools, stored, recalled, foreign, after

    tools, stored, recalled, foreign, after = run_session(key, work)
    assert {"remember", "recall", "discover", "federated_recall"} <= tools
    assert not stored.is_error
    assert MemoryItem.objects.get().content == "Invoices are archived for ten years"
    assert recalled.structured_content["results"][0]["id"] == stored.structured_content["id"]
    assert recalled.content[0].text.startswith("<<<MEMORY_DATA_BEGIN nonce=")
    assert foreign.is_error and json.loads(foreign.content[0].text)["error"]["code"] == "agent_not_found"
    assert after.is_error and after.structured_content["error"]["code"] == "authentication_failed"


def test_stdio_refuses_to_start_without_a_valid_key(world):
    env = subprocess_env()
    env.pop("FEDMEM_MCP_KEY", None)
    missing = subprocess.run(
        [sys.executable, "manage.py", "fedmem_mcp"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert missing.returncode != 0 and "FEDMEM_MCP_KEY" in missing.stderr
    bad = subprocess.run(
        [sys.executable, "manage.py", "fedmem_mcp", "--key", "fm_000000000000_" + "x" * 40],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "Invalid API key" in bad.stderr
