"""The web processes' HTTP protocol turns Nagle's algorithm off on each connection."""

from __future__ import annotations

import asyncio
import socket

from uvicorn.config import Config
from uvicorn.server import ServerState

from fedmem_site.http_protocol import NoDelayH11Protocol


async def _app(scope, receive, send):  # type: ignore[no-untyped-def]
    raise AssertionError("no request is sent")


def test_every_accepted_connection_has_nagle_off():
    async def scenario() -> int:
        config = Config(app=_app, lifespan="off", log_level="warning")
        config.load()
        state = ServerState()
        made: list[NoDelayH11Protocol] = []

        def factory() -> NoDelayH11Protocol:
            made.append(NoDelayH11Protocol(config=config, server_state=state, app_state={}))
            return made[-1]

        # A listening socket like uvicorn's: no explicit protocol number, so asyncio
        # itself leaves Nagle on.
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        server = await asyncio.get_running_loop().create_server(factory, sock=listener)
        _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
        for _ in range(3000):  # the server side of the connection is being set up
            if made:
                break
            await asyncio.sleep(0.01)
        accepted = made[0].transport.get_extra_info("socket")
        nodelay = accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        writer.close()
        server.close()
        return nodelay

    assert asyncio.run(scenario()) != 0
