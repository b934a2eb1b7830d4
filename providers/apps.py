import threading

from django.apps import AppConfig


class ProvidersConfig(AppConfig):
    name = "providers"
    verbose_name = "Memory providers"

    def ready(self) -> None:
        from django.conf import settings

        if settings.FEDMEM_ENGINES_PRELOAD:
            from providers.adapters.registry import warm

            # Off the request path: the first recall must not pay for SDK imports.
            threading.Thread(target=warm, name="fedmem-provider-warmup", daemon=True).start()
