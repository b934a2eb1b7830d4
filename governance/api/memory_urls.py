"""Governance routes that live under /v1/memory/ (the agent's memory policy)."""

from django.urls import path

from governance.api import policies

prefix = "agents/<str:agent_id>/"
urlpatterns = [
    path(prefix + "policy", policies.PolicyView.as_view(), name="agent-policy"),
    path(prefix + "policy/versions", policies.PolicyVersionsView.as_view(), name="agent-policy-versions"),
    path(prefix + "policy/restore", policies.PolicyRestoreView.as_view(), name="agent-policy-restore"),
]
