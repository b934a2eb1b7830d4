"""Engine kind -> adapter class. Adding a provider: write the module, list it here
(see docs/providers.md for the checklist)."""

from __future__ import annotations

from importlib import import_module
from typing import Any

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


# --- injection: engine instances bound to components supplied in code ------------------

_BOUND: dict[str, dict[str, Any]] = {}


def bind(engine_id: str, **components: Any) -> None:
    """Bind a declared engine instance to components built in code, which every adapter
    for that engine is then constructed with: a Mem0 ``client`` (a ``MemoryClient`` or
    an OSS ``Memory``), a LangGraph ``store``, a Graphiti or Cognee ``transport``, an
    Agents SDK ``session_factory``, a Zep or Letta ``client``. Call it once at start-up
    (an ``AppConfig.ready`` of the application embedding fedmem); rebinding replaces.

    The names a provider accepts are its adapter's ``injectable``; anything else is
    refused here, at bind time, not on the first call. An injected component is the
    caller's: fedmem's guarded egress does not wrap it.
    """
    from providers.models import EngineInstance

    engine = EngineInstance.objects.filter(pk=engine_id).only("provider").first()
    if engine is None:
        raise KeyError(f"No engine instance {engine_id!r}.")
    allowed = set(adapter_class(engine.provider).injectable)
    unknown = sorted(set(components) - allowed)
    if unknown:
        takes = ", ".join(sorted(allowed))
        raise TypeError(f"A {engine.provider} engine takes {takes}; not {', '.join(unknown)}.")
    _BOUND[engine_id] = dict(components)


def unbind(engine_id: str) -> None:
    _BOUND.pop(engine_id, None)


def bound(engine_id: str) -> dict[str, Any]:
    """What ``bind`` gave this engine instance (empty: built from its declaration)."""
    return dict(_BOUND.get(engine_id, {}))
