import gc
import logging
import threading
from typing import Literal

from django.apps import AppConfig

from core import warmup

logger = logging.getLogger(__name__)


def start_warmup(*, models: Literal["web", "worker"] | None = None) -> None:
    """Import provider SDKs in the background, once per serving process, and load
    the models the process's work needs: ``"web"`` the recall models (embedder,
    reranker) and the write path's (personal-data recognizers over the spaCy
    pipeline), ``"worker"`` the extraction task's (spaCy pipeline, embedder).

    Called by the ASGI/WSGI entry points and the Celery worker's children, never at
    app loading: a management command or a test run must not import seconds of
    SDKs, and a daemon thread still inside a C-extension import when the
    interpreter exits aborts the process. The thread is not a daemon, so exit waits
    for it. A request or task that needs a model while it loads waits for that load
    rather than starting its own (:mod:`memory.warm`). ``GET /ready`` answers 503
    ("models": "loading") until the thread is done (:mod:`core.warmup`).
    """
    from django.conf import settings

    if not settings.FEDMEM_ENGINES_PRELOAD or not warmup.begin():
        return

    def run() -> None:
        try:
            _warm(models)
        finally:
            # Ready even when a model failed to load: the first call that needs it
            # reports the failure.
            warmup.finish()

    # Off the request path: the first call must not pay for SDK imports or a model load.
    threading.Thread(target=run, name="fedmem-provider-warmup", daemon=False).start()


def _warm(models: Literal["web", "worker"] | None) -> None:
    from providers.adapters.registry import warm

    warm()
    if models is None:
        return
    from memory import warm as memory_warm
    from providers.builtin import warm_models

    loads = {"web": [warm_models, memory_warm.write_models], "worker": [memory_warm.extraction_models]}
    for load in loads[models]:
        try:
            load()
        except Exception:  # a broken model is reported by the first call that needs it
            logger.exception("loading models at start-up failed (%s)", load.__qualname__)
    # What start-up loaded (Django, SDKs, the models: millions of objects) lives as long
    # as the process; frozen, a full collection no longer walks it. Each full
    # collection took 100-600 ms of the request it fell into (the graph rank's slowest
    # calls at 10k facts, docs/graph.md "Figures"), mostly under 25 ms after the freeze.
    gc.freeze()


class ProvidersConfig(AppConfig):
    name = "providers"
    verbose_name = "Memory providers"

    def ready(self) -> None:
        from governance.services.erasure import register_engine_forgetter, register_subject_deleter
        from providers.builtin import builtin_source
        from providers.erasure import erase_subject_writes, forget_subject_in_engines
        from providers.federation import register_builtin_source

        register_builtin_source(builtin_source)

        from memory.engines import register_router
        from memory.reasoning.synthesis import register_synthesizer_resolver
        from providers import routing, selectors  # noqa: F401  (selectors: the engines' restrict() gate)
        from providers.synthesis import resolve_synthesizer

        register_synthesizer_resolver(resolve_synthesizer)
        register_router(routing.ROUTER)
        register_subject_deleter("provider_writes", erase_subject_writes)
        register_engine_forgetter("providers", forget_subject_in_engines)
