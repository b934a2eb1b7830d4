"""Console routes for engines (joined into the console namespace by fedmem_site.urls)."""

from django.urls import path

from providers import candidate_views, views

urlpatterns = [
    path("engines/", views.engines, name="engines"),
    path("dashboard/engines/", views.dashboard_engines, name="dashboard-engines"),
    path("engines/<slug:engine_id>/", views.engine_detail, name="engine-detail"),
    path("engines/<slug:engine_id>/health/", views.engine_health, name="engine-health"),
    path("engines/<slug:engine_id>/credential/", views.engine_credential, name="engine-credential"),
    path("engines/<slug:engine_id>/remove/", views.engine_remove, name="engine-remove"),
    path("candidates/", candidate_views.candidates, name="candidates"),
    path("candidates/import/", candidate_views.candidate_import_view, name="candidate-import"),
    path(
        "candidates/<uuid:candidate_id>/review/",
        candidate_views.candidate_review_view,
        name="candidate-review",
    ),
    path(
        "candidates/<uuid:candidate_id>/promote/",
        candidate_views.candidate_promote_view,
        name="candidate-promote",
    ),
]
