"""Governance routes that live under /v1/memory/: the agent's memory policy,
legal holds, erasure requests."""

from django.urls import path

from governance.api import erasure, holds, policies

prefix = "agents/<str:agent_id>/"
urlpatterns = [
    path(prefix + "policy", policies.PolicyView.as_view(), name="agent-policy"),
    path(prefix + "policy/versions", policies.PolicyVersionsView.as_view(), name="agent-policy-versions"),
    path(prefix + "policy/restore", policies.PolicyRestoreView.as_view(), name="agent-policy-restore"),
    path("erasure-requests", erasure.ErasureRequestListView.as_view(), name="erasure-requests"),
    path(
        "erasure-requests/<str:request_id>",
        erasure.ErasureRequestDetailView.as_view(),
        name="erasure-request",
    ),
    path(
        "erasure-requests/<str:request_id>/retry",
        erasure.ErasureRetryView.as_view(),
        name="erasure-retry",
    ),
    path(
        "erasure-requests/<str:request_id>/certificate",
        erasure.ErasureCertificateView.as_view(),
        name="erasure-certificate",
    ),
    path("legal-holds", holds.LegalHoldListView.as_view(), name="legal-holds"),
    path("legal-holds/<str:hold_id>", holds.LegalHoldDetailView.as_view(), name="legal-hold-detail"),
    path(
        "legal-holds/<str:hold_id>/release", holds.LegalHoldReleaseView.as_view(), name="legal-hold-release"
    ),
]
