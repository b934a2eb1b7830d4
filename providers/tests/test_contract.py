"""The contract file: every adapter's announcement validates; the registry is complete."""

from __future__ import annotations

import pytest

from providers import contracts
from providers.adapters.base import ALL_CAPABILITIES, MemoryAdapter, OperationContext
from providers.adapters.registry import ADAPTERS, adapter_class, provider_kinds
from providers.services import builtin_announcement
from providers.tests.adapters.helpers import ctx, engine


def test_the_schema_file_is_valid_json_schema():
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(contracts.schema())


@pytest.mark.parametrize("provider", sorted(ADAPTERS))
@pytest.mark.parametrize("tenant_id", [None, "7d1b1c8e-1a60-4c33-9a1b-7b0fa2f0a001"])
def test_every_adapter_announcement_validates(provider, tenant_id):
    klass = adapter_class(provider)
    assert issubclass(klass, MemoryAdapter) and klass.provider == provider
    announcement = klass(engine(provider, tenant_id=tenant_id)).announcement()
    assert contracts.errors("capability_announcement", announcement) == []
    assert announcement["isolation"] == ("dedicated" if tenant_id else klass.shared_isolation)
    assert (
        set(announcement["capabilities"]["memory"]) | set(announcement["capabilities"]["knowledge"])
        <= ALL_CAPABILITIES
    )
    assert "get_capabilities" in announcement["capabilities"]["memory"]


def test_the_builtin_announcement_validates():
    assert contracts.errors("capability_announcement", builtin_announcement()) == []


def test_registry_covers_the_issue():
    assert provider_kinds() == sorted(
        [
            "mem0",
            "mem0_server",
            "zep",
            "graphiti",
            "letta",
            "langgraph",
            "openai_agents",
            "cognee",
            "custom",
            "openai_compatible",
        ]
    )
    with pytest.raises(KeyError):
        adapter_class("nope")


def test_operation_contexts_validate():
    import time

    context = OperationContext(
        operation="recall",
        tenant_id="t",
        tenant_slug="acme",
        agent_id="a",
        user_id="u",
        session_id="s",
        trace_parent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        deadline=time.monotonic() + 1,
        required_isolation="logical",
    )
    data = context.to_contract("engine-1")
    assert contracts.errors("operation_context", data) == []
    assert 0 <= data["deadline_ms"] <= 1000
    assert contracts.errors("operation_context", {**data, "operation": "checkpoint"}) != []
    assert contracts.errors("operation_context", ctx().to_contract("x")) == []


def test_announcements_are_rejected_when_wrong():
    bad = {
        "schema_version": "1",
        "provider": "x",
        "engine_instance": "y",
        "capabilities": {"memory": ["remember", "teleport"], "knowledge": []},
        "isolation": "strong",
        "session_memory": "no",
    }
    assert len(contracts.errors("capability_announcement", bad)) == 3


def test_an_adapter_refuses_a_context_requiring_more_isolation_than_it_has():
    from providers.adapters.base import AdapterError

    adapter = adapter_class("custom")(engine("custom"))  # shared custom: "none"
    with pytest.raises(AdapterError) as info:
        adapter.perform("recall", ctx(required_isolation="logical"), query="x", top_k=1)
    assert info.value.reason == "isolation_insufficient" and not info.value.retryable
    assert adapter.perform("get_capabilities", ctx(required_isolation="dedicated"))["isolation"] == "none"
