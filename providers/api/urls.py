from django.urls import path

from providers.api import views

urlpatterns = [
    # Before memory's candidates/<id> routes (this include comes first in fedmem_site.urls).
    path("candidates/imports", views.CandidateImportView.as_view(), name="candidate-imports"),
    path("engines", views.EngineListView.as_view(), name="engine-list"),
    path("engines/<str:engine_id>", views.EngineDetailView.as_view(), name="engine-detail"),
    path(
        "engines/<str:engine_id>/capabilities",
        views.EngineCapabilitiesView.as_view(),
        name="engine-capabilities",
    ),
    path("engines/<str:engine_id>/health", views.EngineHealthView.as_view(), name="engine-health"),
    path(
        "engines/<str:engine_id>/credential",
        views.EngineCredentialView.as_view(),
        name="engine-credential",
    ),
    path(
        "agents/<str:agent_id>/federated/recall",
        views.FederatedRecallView.as_view(),
        name="federated-recall",
    ),
]
