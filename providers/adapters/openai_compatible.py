"""openai_compatible: an OpenAI-compatible chat-completions endpoint, used to write answers.

Not a memory store: it announces no memory or knowledge operation (federation and
routing never pick it) and offers one extra call, :meth:`complete`, which the
answer synthesizer (``providers.synthesis``) uses. The official ``openai`` client
library does the talking, over the guarded egress client (declared host and port
only, no redirects, TLS verified, timeout, ``traceparent``). Works with OpenAI
itself and with servers speaking the same API (vLLM, llama.cpp, Ollama, LiteLLM).
"""

from __future__ import annotations

from typing import Any, ClassVar

from providers.adapters.base import AdapterError, HealthReport, MemoryAdapter, OperationContext
from providers.credentials import Secret

DEFAULT_MAX_TOKENS = 400


class OpenAICompatibleAdapter(MemoryAdapter):
    provider = "openai_compatible"
    label = "OpenAI-compatible chat completions"
    memory_capabilities: ClassVar[frozenset[str]] = frozenset({"get_health", "get_capabilities"})
    shared_isolation = "none"  # it stores nothing; the prompt carries only what the caller may read
    record_kinds = ()
    option_types: ClassVar[dict[str, type | tuple[type, ...]]] = {
        "model": str,
        "max_tokens": int,
        "temperature": (int, float),
    }
    sdk_modules = ("openai",)

    @classmethod
    def validate_options(cls, options: Any) -> dict[str, Any]:
        clean = super().validate_options(options)
        if not clean.get("model"):
            raise ValueError("model is required (the chat model to call).")
        if not 1 <= int(clean.get("max_tokens", DEFAULT_MAX_TOKENS)) <= 8192:
            raise ValueError("max_tokens is between 1 and 8192.")
        return clean

    def auth_headers(self, secret: Secret | None) -> dict[str, str]:
        return {}  # the openai client sets Authorization from api_key itself

    def _client(self, ctx: OperationContext) -> Any:
        from openai import OpenAI

        secret = self.credential()
        return OpenAI(
            base_url=self.engine.base_url,
            # Servers without access control still need a non-empty key for the library.
            api_key=secret.reveal() if secret is not None else "not-needed",
            # The SDK annotates its own vendored httpx; ours is the same class at run time.
            http_client=self.http_client(ctx, with_auth=False),  # type: ignore[arg-type]
            max_retries=0,
            timeout=self.engine.timeout_seconds,
        )

    def get_health(self, ctx: OperationContext) -> HealthReport:
        watch = self.timed()
        with self.translate_errors():
            models = self._client(ctx).models.list()
            names = [m.id for m in models.data][:10]
        wanted = self.engine.options.get("model")
        return HealthReport("ok" if wanted in names else "degraded", watch.ms, {"model": wanted})

    def complete(self, ctx: OperationContext, *, messages: list[dict[str, str]]) -> str:
        """One chat completion; every failure comes out as an AdapterError."""
        with self.translate_errors():
            response = self._client(ctx).chat.completions.create(
                model=str(self.engine.options.get("model")),
                messages=messages,
                max_tokens=int(self.engine.options.get("max_tokens", DEFAULT_MAX_TOKENS)),
                temperature=float(self.engine.options.get("temperature", 0)),
            )
            if not response.choices or response.choices[0].message.content is None:
                raise AdapterError("The chat engine answered with no text.", retryable=True)
            return str(response.choices[0].message.content)
