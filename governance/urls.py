from django.urls import path

from governance import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", views.LogoutView.as_view(), name="logout"),
    path("tenant/switch/", views.switch_tenant, name="switch-tenant"),
    path("system/self-check/", views.self_check, name="self-check"),
    path("jobs/<uuid:job_id>/", views.job_row, name="job-row"),
    path("agents/", views.agents, name="agents"),
    path("audit/", views.audit, name="audit"),
    path("agents/<uuid:agent_id>/", views.agent_detail, name="agent-detail"),
    path("agents/<uuid:agent_id>/keys/", views.agent_key_create, name="agent-key-create"),
    path(
        "agents/<uuid:agent_id>/keys/<uuid:key_id>/revoke/", views.agent_key_revoke, name="agent-key-revoke"
    ),
]
