"""Enqueue Celery work only once the surrounding transaction has committed.

A task enqueued inside a transaction that later rolls back would run against
rows that never existed (or miss rows not yet visible to the worker).
"""

from __future__ import annotations

from typing import Any

from celery import Task
from django.db import transaction


def enqueue_on_commit(task: Task, *args: Any, **kwargs: Any) -> None:
    transaction.on_commit(lambda: task.delay(*args, **kwargs))
