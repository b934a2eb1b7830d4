"""Django under ASGI with requests served side by side.

Django's own ASGI handler runs every synchronous view and middleware through
``sync_to_async(thread_sensitive=True)``: one thread per process serves all of
them, one request at a time. A web process then waits, idle, through each
request's database round trips and embedding forward pass, and the embedding
micro-batcher never sees two requests' texts together. This handler runs each
request's whole synchronous middleware chain and view in a pool of
``FEDMEM_WEB_THREADS`` threads instead, exactly as a threaded WSGI server would:
request start and end (``close_old_connections``) happen in the request's own
thread, so its database connection goes back to the pool when the request ends.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.db import close_old_connections


class ThreadedASGIHandler(ASGIHandler):
    """An :class:`ASGIHandler` whose requests run in a thread pool, each in one thread."""

    def __init__(self, threads: int | None = None) -> None:
        BaseHandler.__init__(self)
        # The synchronous chain, as under WSGI: no hop between threads inside a request.
        self.load_middleware(is_async=False)
        self.threads = threads or settings.FEDMEM_WEB_THREADS
        self.executor = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="fedmem-request")

    async def get_response_async(self, request: Any) -> Any:
        return await sync_to_async(self._respond, thread_sensitive=False, executor=self.executor)(request)

    def _respond(self, request: Any) -> Any:
        # What request_started and request_finished do under WSGI, in this thread,
        # whose connections are the ones the request used. A streamed body read
        # later runs in Django's own thread, which cleans up after itself.
        close_old_connections()
        try:
            return self.get_response(request)
        finally:
            close_old_connections()


def get_threaded_asgi_application() -> ThreadedASGIHandler:
    import django

    django.setup(set_prefix=False)
    return ThreadedASGIHandler()
