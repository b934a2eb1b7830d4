"""Memory rows as the API renders them, for every surface (REST, MCP, exports).

The serializers in ``memory.api.serializers`` describe these shapes for the schema;
a test keeps the two identical.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.vocabulary import Classification
from memory.models import Dataset, MemoryItem, SessionMessage

_DATETIME = serializers.DateTimeField()


def _when(value: Any) -> str | None:
    return None if value is None else _DATETIME.to_representation(value)


def item_json(item: MemoryItem, *, include_content: bool = True) -> dict[str, Any]:
    """``MemoryItemSerializer(item).data`` without building a serializer per row.

    Batch writes, listings and exports render hundreds of items; instantiating a
    ModelSerializer for each cost more than storing it. The serializer stays the
    schema's description; a test keeps the two identical.
    """
    data: dict[str, Any] = {
        "id": str(item.pk),
        "agent_id": str(item.agent_id),
        "content": item.content if include_content else None,
        "scope": item.scope,
        "scopes": list(item.scopes),
        "kind": item.kind,
        "record_kind": item.record_kind,
        "classification": str(Classification(item.classification).label),
        "personal_data": item.personal_data,
        "personal_data_types": list(item.personal_data_types),
        "user_id": item.user_id,
        "session_id": item.session_id,
        "team": item.team,
        "project": item.project,
        "source": item.source,
        "provenance": item.provenance,
        "metadata": item.metadata,
        "content_hash": item.content_hash,
        "created_at": _when(item.created_at),
        "updated_at": _when(item.updated_at),
        "valid_from": _when(item.valid_from),
        "invalid_at": _when(item.invalid_at),
        "occurred_at": _when(item.occurred_at),
        "retention_until": _when(item.retention_until),
        "legal_hold": item.legal_hold,
        "extraction_status": item.extraction_status,
        "extraction_error": item.extraction_error,
    }
    if not include_content:
        del data["content"]
    return data


def message_json(message: SessionMessage) -> dict[str, Any]:
    """``SessionMessageSerializer(message).data`` without a serializer per row."""
    return {
        "id": message.pk,
        "session_id": message.session_id,
        "user_id": message.user_id,
        "role": message.role,
        "content": message.content,
        "classification": str(Classification(message.classification).label),
        "personal_data": message.personal_data,
        "personal_data_types": list(message.personal_data_types),
        "metadata": message.metadata,
        "created_at": _when(message.created_at),
    }


def dataset_json(dataset: Dataset) -> dict[str, Any]:
    """``DatasetSerializer(dataset).data`` (memory.api.knowledge), for every surface."""
    return {
        "dataset_id": dataset.name,
        "agent_id": str(dataset.agent_id),
        "scope": dataset.scope,
        "team": dataset.team,
        "project": dataset.project,
        "classification": str(Classification(dataset.classification).label),
        "legal_hold": dataset.legal_hold,
        "engine_id": dataset.engine,
        "documents": dataset.documents,
        "graph_status": dataset.graph_status,
        "graph_job": None if dataset.graph_job is None else str(dataset.graph_job),
        "graph_built_at": _when(dataset.graph_built_at),
        "created_at": _when(dataset.created_at),
    }


def job_json(job: Any) -> dict[str, Any]:
    return {"id": str(job.pk), "status": job.status, "url": f"/v1/jobs/{job.pk}"}
