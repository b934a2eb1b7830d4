"""Engine kind -> adapter class. Adding a provider: write the module, list it here
(see docs/providers.md for the checklist)."""

from __future__ import annotations

from importlib import import_module

from providers.adapters.base import MemoryAdapter

# Imported lazily: a provider's SDK is loaded only when an engine of that kind is used.
ADAPTERS: dict[str, str] = {
    "mem0": "providers.adapters.mem0:Mem0Adapter",
    "mem0_server": "providers.adapters.mem0:Mem0ServerAdapter",
    "zep": "providers.adapters.zep:ZepAdapter",
    "graphiti": "providers.adapters.graphiti:GraphitiAdapter",
    "letta": "providers.adapters.letta:LettaAdapter",
    "langgraph": "providers.adapters.langgraph:LangGraphAdapter",
    "openai_agents": "providers.adapters.openai_agents:OpenAIAgentsAdapter",
    "cognee": "providers.adapters.cognee:CogneeAdapter",
    "custom": "providers.adapters.custom:HttpCustomAdapter",
    "openai_compatible": "providers.adapters.openai_compatible:OpenAICompatibleAdapter",
}


def provider_kinds() -> list[str]:
    return sorted(ADAPTERS)


def warm(providers: list[str] | None = None) -> dict[str, str]:
    """Import adapters and their SDKs ahead of the first call; report, never raise."""
    outcome: dict[str, str] = {}
    for provider in providers or provider_kinds():
        try:
            adapter_class(provider).warm()
            outcome[provider] = "ok"
        except Exception as exc:  # a missing SDK shows up when that engine is used
            outcome[provider] = f"{exc.__class__.__name__}: {exc}"[:200]
    return outcome


def adapter_class(provider: str) -> type[MemoryAdapter]:
    try:
        module_name, _, class_name = ADAPTERS[provider].partition(":")
    except KeyError:
        raise KeyError(f"Unknown provider {provider!r}.") from None
    klass = getattr(import_module(module_name), class_name)
    if not (isinstance(klass, type) and issubclass(klass, MemoryAdapter)):
        raise TypeError(f"{ADAPTERS[provider]} is not a MemoryAdapter")
    return klass
