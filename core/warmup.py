"""Whether this serving process has loaded what requests need (the start-up warm-up).

The web processes load the provider SDKs and the recall models in a background
thread after they start listening (:func:`providers.apps.start_warmup`). Until that
thread is done, a request competes with it for the interpreter: /health answered in
tens of milliseconds instead of a few, and the first recalls waited for a model. The
readiness probe reports the state so a load balancer (or a benchmark) sends traffic
to a process only once it is warm.
"""

from __future__ import annotations

import threading

_started = threading.Event()
_done = threading.Event()


def begin() -> bool:
    """Mark the warm-up started; False when this process had already started it."""
    if _started.is_set():
        return False
    _started.set()
    return True


def finish() -> None:
    _done.set()


def state() -> str | None:
    """``"loading"`` while the warm-up runs, ``"ok"`` once done, None when this process
    never warms up (a management command, the test client)."""
    if not _started.is_set():
        return None
    return "ok" if _done.is_set() else "loading"
