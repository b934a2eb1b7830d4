from django.urls import path

from memory.api import candidates, contradictions, graph_views, knowledge, views

app_name = "memory"

prefix = "agents/<str:agent_id>/"
urlpatterns = [
    path("candidates", candidates.CandidateListView.as_view(), name="candidates"),
    path("candidates/<str:candidate_id>", candidates.CandidateDetailView.as_view(), name="candidate"),
    path(
        "candidates/<str:candidate_id>/review",
        candidates.CandidateReviewView.as_view(),
        name="candidate-review",
    ),
    path(
        "candidates/<str:candidate_id>/promote",
        candidates.CandidatePromoteView.as_view(),
        name="candidate-promote",
    ),
    path(prefix + "memories", views.RememberView.as_view(), name="memories"),
    path(prefix + "memories/batch", views.BatchView.as_view(), name="memories-batch"),
    path(prefix + "memories/search", views.SearchView.as_view(), name="memories-search"),
    path(prefix + "memories/purge", views.PurgeView.as_view(), name="memories-purge"),
    path(prefix + "memories/export", views.ExportView.as_view(), name="memories-export"),
    path(prefix + "memories/<str:item_id>", views.ItemView.as_view(), name="memory-detail"),
    path(
        prefix + "memories/<str:item_id>/supersede",
        graph_views.SupersedeView.as_view(),
        name="memory-supersede",
    ),
    path(prefix + "memories/<str:item_id>/revive", graph_views.ReviveView.as_view(), name="memory-revive"),
    path(prefix + "memories/<str:item_id>/history", graph_views.HistoryView.as_view(), name="memory-history"),
    path(prefix + "discover", graph_views.DiscoverView.as_view(), name="discover"),
    path(prefix + "trace", graph_views.TraceView.as_view(), name="trace"),
    path(prefix + "causal_chain", graph_views.CausalChainView.as_view(), name="causal-chain"),
    path(prefix + "what_if", graph_views.WhatIfView.as_view(), name="what-if"),
    path(prefix + "contradictions", contradictions.ContradictionListView.as_view(), name="contradictions"),
    path(
        prefix + "contradictions/<str:decision_id>/undo",
        contradictions.ContradictionUndoView.as_view(),
        name="contradiction-undo",
    ),
    path(prefix + "recall", views.RecallView.as_view(), name="recall"),
    path(prefix + "answer", knowledge.AnswerView.as_view(), name="answer"),
    path(prefix + "knowledge", knowledge.KnowledgeView.as_view(), name="knowledge"),
    path(prefix + "knowledge/datasets", knowledge.DatasetListView.as_view(), name="knowledge-datasets"),
    path(prefix + "knowledge/graph", knowledge.KnowledgeGraphView.as_view(), name="knowledge-graph"),
    path(prefix + "knowledge/search", knowledge.KnowledgeSearchView.as_view(), name="knowledge-search"),
    path(
        prefix + "knowledge/datasets/<str:dataset_id>",
        knowledge.DatasetDetailView.as_view(),
        name="knowledge-dataset",
    ),
    path(
        prefix + "knowledge/datasets/<str:dataset_id>/relations",
        knowledge.DatasetRelationsView.as_view(),
        name="knowledge-dataset-relations",
    ),
    path(
        prefix + "sessions/<str:session_id>/messages",
        views.SessionMessagesView.as_view(),
        name="session-messages",
    ),
]
