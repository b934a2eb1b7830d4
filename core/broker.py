"""kombu's filesystem transport with a message file that appears whole or not at all.

The stock transport creates ``<name>.msg`` in the queue folder and then writes it. A
worker polling the folder can move and read that file between the two steps: it gets
an empty or partial body, ``json.loads`` raises, the worker exits and ``fedmem_run``
stops with it (seen under load with a burst of writes). Here the body is written and
flushed to a file in a sibling folder the worker never lists, then renamed into the
queue folder; a rename within one file system is atomic, so the worker sees either no
file or the complete message. A body that still cannot be read (a file cut short by a
crash of the machine) is logged and skipped instead of stopping the worker: the work
it carried is re-queued by the sweeps that look for it (pending extraction, jobs).
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

INCOMING = "incoming"

logger = logging.getLogger(__name__)


class Channel(filesystem.Channel):
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        # The same name the stock transport uses: the worker orders by its prefix.
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        folder = Path(self.data_folder_out)
        staging = folder.parent / INCOMING
        staging.mkdir(parents=True, exist_ok=True)
        partial = staging / name
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, folder / name)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise ChannelError(f"Cannot add file {name!r} to directory") from exc

    def _get(self, queue: str) -> Any:
        # The stock _get moves the file out, reads it and only then decodes; a bad
        # body is gone from the queue by the time it fails, so the next one is read.
        while True:
            try:
                return super()._get(queue)
            except ValueError:
                logger.exception("skipped an unreadable message on queue %s", queue)


class Transport(filesystem.Transport):
    Channel = Channel
