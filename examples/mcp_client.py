"""Connect to fedmem's MCP server the way a desktop or coding assistant does, from
one of the configurations in examples/mcp/ (the `mcpServers` shape those
assistants read), and use two tools.

    python examples/mcp_client.py examples/mcp/http.json     # streamable HTTP at /mcp
    python examples/mcp_client.py examples/mcp/stdio.json    # spawns manage.py fedmem_mcp
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


def load(path: str | Path, name: str = "fedmem") -> dict[str, Any]:
    return json.loads(Path(path).read_text())["mcpServers"][name]


async def use(server: dict[str, Any], fact: str, question: str) -> dict[str, Any]:
    async def session_work(read: Any, write: Any) -> dict[str, Any]:
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = [tool.name for tool in (await session.list_tools()).tools]
            stored = await session.call_tool("remember", {"content": fact, "scope": "agent"})
            recalled = await session.call_tool("recall", {"query": question, "scopes": ["agent"]})
            return {"tools": tools, "stored": stored, "recalled": recalled}

    if "url" in server:
        async with (
            httpx2.AsyncClient(headers=server.get("headers", {}), timeout=60) as http,
            streamable_http_client(server["url"], http_client=http) as (read, write),
        ):
            return await session_work(read, write)
    params = StdioServerParameters(command=server["command"], args=server["args"], env=server.get("env"))
    async with stdio_client(params) as (read, write):
        return await session_work(read, write)


def main(argv: list[str]) -> None:
    outcome = asyncio.run(
        use(load(argv[1]), "The release train leaves on Thursdays", "When do releases go out?")
    )
    print("tools:", ", ".join(outcome["tools"]))
    print(outcome["recalled"].content[0].text)  # framed as untrusted data


if __name__ == "__main__":
    main(sys.argv)
