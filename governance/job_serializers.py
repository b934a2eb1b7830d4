"""A job as callers see it: one shape for `GET /v1/jobs/{id}` and the MCP `job_status` tool."""

from __future__ import annotations

from rest_framework import serializers

from governance.models import Job


class JobIdSerializer(serializers.Serializer):
    job_id = serializers.UUIDField(help_text="The job's id (`job.id` of the answer that queued it).")


class JobSerializer(serializers.ModelSerializer):
    class Meta:
        model = Job
        fields = [
            "id",
            "kind",
            "status",
            "progress",
            "total",
            "message",
            "error",
            "result",
            "worker",
            "attempts",
            "created_at",
            "started_at",
            "finished_at",
        ]
