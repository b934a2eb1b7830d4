"""uvicorn's HTTP/1.1 protocol with Nagle's algorithm off on every connection.

uvicorn writes a response's head and body in separate sends. With Nagle on, the
second send waits for the client's acknowledgement of the first, and a client
on a kept-alive connection delays that acknowledgement by up to 40 ms: every
request after the first on a connection took 40+ ms however fast the view was
(measured: /health 44 ms kept alive, 7 ms on a fresh connection). asyncio only
sets TCP_NODELAY on sockets it made with an explicit TCP protocol number, and
uvicorn's listening socket has none, so it is set here per connection.
"""

from __future__ import annotations

import asyncio
import socket

from uvicorn.protocols.http.h11_impl import H11Protocol


class NoDelayH11Protocol(H11Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)  # type: ignore[arg-type]
