import threading

from django.apps import AppConfig

_warmup_started = threading.Event()


def start_warmup() -> None:
    """Import provider SDKs in the background, once per serving process.

    Called by the ASGI/WSGI entry points and the Celery worker, never at app
    loading: a management command or a test run must not import seconds of SDKs,
    and a daemon thread still inside a C-extension import when the interpreter
    exits aborts the process. The thread is not a daemon, so exit waits for it.
    """
    from django.conf import settings

    if not settings.FEDMEM_ENGINES_PRELOAD or _warmup_started.is_set():
        return
    _warmup_started.set()
    from providers.adapters.registry import warm

    # Off the request path: the first recall must not pay for SDK imports.
    threading.Thread(target=warm, name="fedmem-provider-warmup", daemon=False).start()


class ProvidersConfig(AppConfig):
    name = "providers"
    verbose_name = "Memory providers"

    def ready(self) -> None:
        from governance.services.erasure import register_engine_forgetter
        from providers.builtin import builtin_source
        from providers.erasure import forget_subject_in_engines
        from providers.federation import register_builtin_source

        register_builtin_source(builtin_source)

        from memory.engines import register_router
        from memory.reasoning.synthesis import register_synthesizer_resolver
        from providers import routing, selectors  # noqa: F401  (selectors: the engines' restrict() gate)
        from providers.synthesis import resolve_synthesizer

        register_synthesizer_resolver(resolve_synthesizer)
        register_router(routing.ROUTER)
        register_engine_forgetter("providers", forget_subject_in_engines)
