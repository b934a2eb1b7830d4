"""/v1/provider-writes: where the writes an engine queued stand (not under /v1/memory/:
a write may be a forget issued by an erasure or a knowledge graph build)."""

from django.urls import path

from providers.api import views

urlpatterns = [
    path("provider-writes", views.ProviderWriteListView.as_view(), name="provider-write-list"),
    path(
        "provider-writes/<str:write_id>",
        views.ProviderWriteDetailView.as_view(),
        name="provider-write-detail",
    ),
]
