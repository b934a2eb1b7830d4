from django.urls import path

from governance import compliance_views as cv
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
    path("holds/", cv.holds, name="holds"),
    path("holds/<uuid:hold_id>/release/", cv.hold_release, name="hold-release"),
    path("erasure/", cv.erasures, name="erasures"),
    path("erasure/<uuid:request_id>/", cv.erasure_detail, name="erasure-detail"),
    path("erasure/<uuid:request_id>/retry/", cv.erasure_retry, name="erasure-retry"),
    path("erasure/<uuid:request_id>/certificate.json", cv.erasure_certificate, name="erasure-certificate"),
    path("retention/", cv.retention, name="retention"),
    path("retention/<uuid:agent_id>/", cv.retention_set, name="retention-set"),
    path("policies/", cv.policies, name="policies"),
    path("policies/<uuid:agent_id>/", cv.policy_detail, name="policy-detail"),
    path("policies/<uuid:agent_id>/diff/", cv.policy_diff_view, name="policy-diff"),
    path("policies/<uuid:agent_id>/restore/<int:version>/", cv.policy_restore, name="policy-restore"),
]
