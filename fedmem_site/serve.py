"""The web server: daphne, answering oversized request lines instead of hanging up.

    python -m fedmem_site.serve -b 127.0.0.1 -p 8000 fedmem_site.asgi:application

Takes daphne's arguments. Twisted, under daphne, drops the connection without a
word when the request line or a header line is longer than it accepts (16 KB): a
60 KB query string looked like a network failure to the client. Here such a
request gets ``414 URI Too Long`` (request line) or ``431 Request Header Fields Too
Large`` (a header), with the API's error body, before the connection closes.
"""

from __future__ import annotations

import json

from twisted.web import http

# Codes of core.errors.ErrorCode (URI_TOO_LONG, HEADERS_TOO_LARGE), spelled out:
# this module loads before Django is set up.
_TOO_LONG = {
    True: (b"414 URI Too Long", "uri_too_long", "The request line is too long."),
    False: (b"431 Request Header Fields Too Large", "headers_too_large", "A request header is too long."),
}


def _line_too_long(self: http.HTTPChannel, line: bytes) -> None:
    # Name-mangled private flag: true until the request line has been read.
    first = bool(getattr(self, "_HTTPChannel__first_line", True))
    status, code, message = _TOO_LONG[first]
    body = json.dumps({"error": {"code": code, "message": message, "details": {}}}).encode()
    self.transport.write(
        b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body
    )  # fmt: skip
    self.loseConnection()


def install() -> None:
    http.HTTPChannel.lineLengthExceeded = _line_too_long  # type: ignore[method-assign]


def main() -> None:
    from daphne.cli import CommandLineInterface

    install()
    CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
