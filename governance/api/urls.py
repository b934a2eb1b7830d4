from django.urls import path

from governance.api import views

urlpatterns = [
    path("me", views.MeView.as_view(), name="me"),
    path("me/keys", views.MyKeysView.as_view(), name="my-keys"),
    path("me/keys/<str:key_id>", views.MyKeyDetailView.as_view(), name="my-key-detail"),
    path("agents", views.AgentListView.as_view(), name="agent-list"),
    path("agents/<str:agent_id>", views.AgentDetailView.as_view(), name="agent-detail"),
    path("agents/<str:agent_id>/keys", views.AgentKeysView.as_view(), name="agent-keys"),
    path(
        "agents/<str:agent_id>/keys/<str:key_id>", views.AgentKeyDetailView.as_view(), name="agent-key-detail"
    ),
    path("agents/<str:agent_id>/grants", views.AgentGrantsView.as_view(), name="agent-grants"),
    path("system/self-check", views.SelfCheckView.as_view(), name="self-check"),
    path("audit/events", views.AuditEventListView.as_view(), name="audit-events"),
    path("audit/verify", views.AuditVerifyView.as_view(), name="audit-verify"),
    path("jobs/<str:job_id>", views.JobDetailView.as_view(), name="job-detail"),
]
