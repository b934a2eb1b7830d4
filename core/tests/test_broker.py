"""The default broker's message files: whole or absent, never half-written."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from kombu import Connection

from core.broker import Transport

MESSAGES = 300
BODY = "x" * 200_000  # big enough that writing a file takes a while


def connection(tmp_path: Path, transport: Any) -> Connection:
    queue = tmp_path / "queue"
    queue.mkdir(exist_ok=True)
    return Connection(
        transport=transport,
        transport_options={
            "data_folder_in": str(queue),
            "data_folder_out": str(queue),
            "store_processed": False,
        },
    )


def drain(tmp_path: Path, transport: Any) -> tuple[list[int], list[BaseException]]:
    received: list[int] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def write() -> None:
        with connection(tmp_path, transport) as conn:
            q = conn.SimpleQueue("tasks")
            for n in range(MESSAGES):
                q.put({"n": n, "body": BODY})
        done.set()

    def read() -> None:
        with connection(tmp_path, transport) as conn:
            q = conn.SimpleQueue("tasks")
            while len(received) < MESSAGES:
                # Read before polling: a queue found empty is final only when the writer
                # had finished before the poll began (it may finish during the poll).
                finished = done.is_set()
                try:
                    message = q.get(timeout=2 if finished else 0.001)
                except q.Empty:
                    if finished:
                        return
                    continue
                except BaseException as exc:
                    errors.append(exc)
                    return
                assert message.payload["body"] == BODY
                received.append(message.payload["n"])
                message.ack()

    threads = [threading.Thread(target=write), threading.Thread(target=read)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return received, errors


def test_a_worker_polling_while_messages_are_written_reads_every_one_whole(tmp_path: Path) -> None:
    received, errors = drain(tmp_path, Transport)
    assert errors == []
    assert sorted(received) == list(range(MESSAGES))
    # Nothing is left half-staged beside the queue.
    assert list((tmp_path / "incoming").iterdir()) == []


def test_an_unreadable_message_is_skipped_and_the_next_one_read(tmp_path: Path) -> None:
    with connection(tmp_path, Transport) as conn:
        q = conn.SimpleQueue("tasks")
        # A file cut short by a crash: the name of a message, an empty body, first in order.
        (tmp_path / "queue" / "0_cut.tasks.msg").write_bytes(b"")
        q.put({"n": 1})
        message = q.get(timeout=2)
        assert message.payload == {"n": 1}
        message.ack()
        with pytest.raises(q.Empty):
            q.get(timeout=0.1)


def test_the_default_worker_looks_for_work_more_often_than_once_a_second() -> None:
    """A worker whose prefetch slots are full is told "empty" and sleeps the
    transport's polling interval; at kombu's 1 s it ran one task per slot per second
    (2 extractions/s under load, however short each was). The configured interval
    must reach the transport the worker uses."""
    from django.conf import settings

    from fedmem_site.celery import app

    configured = settings.CELERY_BROKER_TRANSPORT_OPTIONS["polling_interval"]
    with app.connection_for_read() as conn:
        assert isinstance(conn.transport, Transport)
        assert conn.transport.polling_interval == configured
    assert configured < 1.0
