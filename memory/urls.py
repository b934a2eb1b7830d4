"""Console routes for memory (joined into the console namespace by fedmem_site.urls)."""

from django.urls import path

from memory import views

urlpatterns = [
    path("memories/", views.memories, name="memories"),
    path("memories/<uuid:item_id>/", views.memory_detail, name="memory-detail"),
    path("memories/<uuid:item_id>/trace/", views.memory_trace, name="memory-trace"),
    path("memories/<uuid:item_id>/what-if/", views.memory_what_if, name="memory-what-if"),
    path("graph/", views.graph_page, name="graph"),
    path("graph/data/", views.graph_data, name="graph-data"),
    path("graph/why/", views.graph_why, name="graph-why"),
    path("dashboard/memory/", views.dashboard_memory, name="dashboard-memory"),
]
