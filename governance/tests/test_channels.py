"""Channels: job progress over WebSocket, in-memory layer by default, Redis when configured."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from governance.consumers import broadcast_job
from governance.models import Job


def test_default_layer_is_in_memory(settings):
    assert settings.CHANNEL_LAYERS["default"]["BACKEND"] == "channels.layers.InMemoryChannelLayer"


def test_redis_layer_round_trip(redis):
    url = redis
    from channels_redis.core import RedisChannelLayer

    layer = RedisChannelLayer(hosts=[url])

    async def round_trip():
        channel = await layer.new_channel()
        await layer.group_add("fedmem-test", channel)
        await layer.group_send("fedmem-test", {"type": "job.update", "n": 1})
        message = await layer.receive(channel)
        await layer.flush()
        return message

    assert async_to_sync(round_trip)() == {"type": "job.update", "n": 1}


# Seconds a socket step may take: the first connect loads the ASGI stack and reads the
# session, which took over the communicator's 1 s default on a loaded 2-core machine.
WAIT = 15


@pytest.mark.django_db(transaction=True)
def test_job_progress_socket(world):
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    from fedmem_site.asgi import application

    session = SessionStore()
    session[SESSION_KEY] = str(world.admin.pk)
    session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[0]  # the lockout-aware ModelBackend
    session[HASH_SESSION_KEY] = world.admin.get_session_auth_hash()
    session.save()
    job = Job.objects.create(tenant=world.tenant, kind="self_check", total=3)
    foreign = Job.objects.create(tenant=world.other_tenant, kind="self_check")
    headers = [(b"cookie", f"sessionid={session.session_key}".encode()), (b"origin", b"http://localhost")]

    async def scenario():
        comm = WebsocketCommunicator(application, f"/ws/jobs/{job.pk}/", headers=headers)
        connected, _ = await comm.connect(timeout=WAIT)
        assert connected
        first = await comm.receive_json_from(timeout=WAIT)
        assert first["status"] == "queued"
        job.status, job.progress = Job.Status.RUNNING, 2
        await sync_to_async(broadcast_job)(job)
        update = await comm.receive_json_from(timeout=WAIT)
        assert (update["status"], update["progress"]) == ("running", 2)
        await comm.disconnect()

        denied = WebsocketCommunicator(application, f"/ws/jobs/{foreign.pk}/", headers=headers)
        connected, _ = await denied.connect(timeout=WAIT)
        assert not connected

        anonymous = WebsocketCommunicator(
            application, f"/ws/jobs/{job.pk}/", headers=[(b"origin", b"http://localhost")]
        )
        connected, _ = await anonymous.connect(timeout=WAIT)
        assert not connected

    async_to_sync(scenario)()
    assert get_channel_layer() is not None
