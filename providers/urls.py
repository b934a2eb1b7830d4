"""Console routes for engines (joined into the console namespace by fedmem_site.urls)."""

from django.urls import path

from providers import views

urlpatterns = [
    path("engines/", views.engines, name="engines"),
    path("dashboard/engines/", views.dashboard_engines, name="dashboard-engines"),
    path("engines/<slug:engine_id>/", views.engine_detail, name="engine-detail"),
    path("engines/<slug:engine_id>/health/", views.engine_health, name="engine-health"),
    path("engines/<slug:engine_id>/credential/", views.engine_credential, name="engine-credential"),
    path("engines/<slug:engine_id>/remove/", views.engine_remove, name="engine-remove"),
]
