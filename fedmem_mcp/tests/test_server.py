"""The tool registry in process: schemas match the serializers, the rate limit
applies to tool calls, unknown tools and user keys without an agent are refused."""

from __future__ import annotations

import asyncio

import pytest
from django.core.cache import caches

from fedmem_mcp.schema import serializer_schema
from fedmem_mcp.server import ToolError, call_tool, list_tools, run_tool
from fedmem_mcp.tools import REGISTRY
from governance.models import ApiKey
from governance.permissions import AgentPrincipal
from governance.tests import factories as f


def test_each_schema_is_its_serializer():
    for tool in list_tools():
        spec = REGISTRY[tool.name]
        expected = serializer_schema(spec.args)
        assert set(tool.input_schema["properties"]) == {"agent_id", *expected["properties"]}
        assert tool.input_schema.get("required", []) == expected.get("required", [])


def _agent_caller(agent):
    f.agent_key(agent)
    key = ApiKey.objects.get(agent=agent)
    return AgentPrincipal(agent, key), key


def test_tool_calls_count_against_the_rate_limit(world, settings):
    settings.API_RATE_LIMIT = "2/minute"
    caches["counters"].clear()
    principal, key = _agent_caller(world.agent)
    for _ in range(2):
        run_tool(REGISTRY["list_memories"], principal, key, {})
    with pytest.raises(ToolError) as caught:
        run_tool(REGISTRY["list_memories"], principal, key, {})
    assert caught.value.body["error"]["code"] == "rate_limited"
    assert caught.value.body["error"]["details"]["retry_after"] >= 1
    caches["counters"].clear()


def test_unknown_tool_is_a_tool_error(world):
    principal, key = _agent_caller(world.agent)

    async def caller(ctx):
        return principal, key

    result = asyncio.run(call_tool(caller, None, "drop_everything", {}))
    assert result.is_error and result.structured_content["error"]["code"] == "unknown_tool"
