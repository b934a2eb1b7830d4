from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from core import health
from governance import urls as governance_console
from memory import urls as memory_console
from providers import urls as providers_console

api_patterns = [
    path("", include("governance.api.urls")),
    path("", include("providers.api.write_urls")),
    # providers first: its candidates/imports must win over memory's candidates/<id>.
    path("memory/", include("providers.api.urls")),
    path("memory/", include("memory.api.urls")),
    path("memory/", include("governance.api.memory_urls")),
    path("schema", SpectacularAPIView.as_view(), name="schema"),
    # Split: the page loads its start-up script from ?script, so the CSP needs no inline code.
    path("docs", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
]

urlpatterns = [
    path("health", health.health, name="health"),
    path("ready", health.ready, name="ready"),
    path("v1/", include((api_patterns, "api"))),
    path("admin/", admin.site.urls),
    # One console namespace; each app contributes its pages.
    path(
        "",
        include(
            (
                [
                    *governance_console.urlpatterns,
                    *memory_console.urlpatterns,
                    *providers_console.urlpatterns,
                ],
                "console",
            )
        ),
    ),
]

handler400 = "core.errors.handler400"
handler403 = "core.errors.handler403"
handler404 = "core.errors.handler404"
handler500 = "core.errors.handler500"
