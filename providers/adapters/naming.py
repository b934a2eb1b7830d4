"""Collision-free provider names built from fedmem's tenant slug and scope ids.

Providers give fedmem one flat string per namespace (a Graphiti group id, a Zep
user id, a Cognee dataset name), and each refuses some characters. Mapping
unsafe characters to one replacement (``acme_corp`` and ``acme-corp`` both
becoming ``acme-corp``) lets two tenants share a namespace, so every part is
*escaped* instead: letters and digits stay, every other character becomes
``_`` plus the hex of its UTF-8 bytes (``_`` itself is ``_5f``), and parts are
joined with ``-``, which an escaped part never contains. The mapping is
injective and its output uses only ``[A-Za-z0-9_-]``, which every provider here
accepts; nothing the slug rules allow is refused.
"""

from __future__ import annotations

import re

_SAFE = re.compile(r"[A-Za-z0-9]")
_ESCAPED = re.compile(r"_([0-9a-f]{2})")
SEPARATOR = "-"


def escape(value: str) -> str:
    out = []
    for char in value:
        if _SAFE.fullmatch(char):
            out.append(char)
        else:
            out.extend(f"_{byte:02x}" for byte in char.encode("utf-8"))
    return "".join(out)


def unescape(value: str) -> str:
    data = bytearray()
    position = 0
    while position < len(value):
        if value[position] == "_":
            match = _ESCAPED.match(value, position)
            if match is None:
                raise ValueError(f"Not an escaped name: {value!r}")
            data.append(int(match.group(1), 16))
            position = match.end()
        else:
            data.extend(value[position].encode("ascii"))
            position += 1
    return data.decode("utf-8")


def join(*parts: str) -> str:
    """One name from several parts, each escaped; ``split`` reverses it."""
    return SEPARATOR.join(escape(part) for part in parts)


def split(name: str) -> list[str] | None:
    """The parts of a name made by ``join``; None for a name fedmem did not make."""
    try:
        return [unescape(part) for part in name.split(SEPARATOR)]
    except (ValueError, UnicodeDecodeError):
        return None
