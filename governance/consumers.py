"""Live job progress over WebSocket (Channels). The console falls back to polling."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer

from governance.models import Job


def job_group(job_id: Any) -> str:
    return f"job.{job_id}"


def job_payload(job: Job) -> dict[str, Any]:
    return {
        "id": str(job.pk),
        "kind": job.kind,
        "status": job.status,
        "progress": job.progress,
        "total": job.total,
        "message": job.message,
        "error": job.error,
    }


def broadcast_job(job: Job) -> None:
    """Tell watchers a job changed. Cross-process only with the Redis layer."""
    layer = get_channel_layer()
    if layer is not None:
        async_to_sync(layer.group_send)(job_group(job.pk), {"type": "job.update", "job": job_payload(job)})


class JobProgressConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    async def connect(self) -> None:
        user = self.scope.get("user")
        job_id = self.scope["url_route"]["kwargs"]["job_id"]
        job = await self._visible_job(user, job_id)
        if job is None:
            await self.close(code=4404)
            return
        await self.channel_layer.group_add(job_group(job_id), self.channel_name)
        await self.accept()
        await self.send_json(job_payload(job))

    async def disconnect(self, code: int) -> None:
        job_id = self.scope["url_route"]["kwargs"]["job_id"]
        await self.channel_layer.group_discard(job_group(job_id), self.channel_name)

    async def job_update(self, event: dict[str, Any]) -> None:
        await self.send_json(event["job"])

    @database_sync_to_async
    def _visible_job(self, user: Any, job_id: Any) -> Job | None:
        if user is None or not user.is_authenticated:
            return None
        return Job.objects.restrict(user).filter(pk=job_id).first()
