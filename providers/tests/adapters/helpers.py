"""Shared bits of the adapter tests: an operation context and contract checks."""

from __future__ import annotations

from typing import Any

from providers import contracts
from providers.adapters.base import EngineConfig, Hit, MemoryAdapter, OperationContext
from providers.credentials import Secret

TENANT_ID = "7d1b1c8e-1a60-4c33-9a1b-7b0fa2f0a001"


def ctx(operation: str = "recall", **overrides: Any) -> OperationContext:
    values: dict[str, Any] = {
        "operation": operation,
        "tenant_id": TENANT_ID,
        "tenant_slug": "acme",
        "agent_id": "agent-1",
        "user_id": "alice",
        "session_id": None,
    }
    values.update(overrides)
    return OperationContext(**values)


def engine(
    provider: str,
    url: str = "http://127.0.0.1:9",
    *,
    engine_id: str | None = None,
    tenant_id: str | None = None,
    **options: Any,
) -> EngineConfig:
    return EngineConfig(
        engine_id=engine_id or f"{provider.replace('_', '-')}-test",
        provider=provider,
        base_url=url,
        tenant_id=tenant_id,
        timeout_seconds=5.0,
        allow_development_hosts=True,
        options=options,
    )


def key(value: str = "test-key") -> Any:
    return lambda: Secret(value)


def assert_contract(adapter: MemoryAdapter, hits: list[Hit] | None = None) -> None:
    announcement = adapter.announcement()
    assert contracts.errors("capability_announcement", announcement) == []
    assert contracts.errors("operation_context", ctx().to_contract(adapter.engine.engine_id)) == []
    for hit in hits or []:
        assert contracts.errors("hit", hit.to_dict()) == [], hit.to_dict()
        assert hit.provider_id == adapter.provider
        assert hit.engine_id == adapter.engine.engine_id
        assert hit.rank >= 1
