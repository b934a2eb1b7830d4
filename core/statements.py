"""Statements compiled once per shape and reused across requests.

A read's visibility condition (tenant, scopes, classification, validity) is a
``Q`` of about twenty leaves: resolving it into joins and compiling it costs the
ORM a few ms, more than the statement then takes to run. Its SQL text depends
only on its *shape* (connectors, lookups, the kind of each value and the length
of each list), never on the values, so :func:`compiled` builds a statement once
per (purpose, shape) with a distinct stand-in for every value, and binds each
request's own values into the compiled parameters by position.

What keeps one request's values out of another's statement:

* every value of the condition is a stand-in when the statement is compiled; a
  stand-in that does not come through the compilation unchanged (the ORM converted
  or dropped it) leaves that shape uncached, compiled afresh every time;
* a compiled parameter that is neither a stand-in nor one of the caller's declared
  markers is refused (``ValueError``): a builder that captured a request value
  outside the condition would otherwise serve it to the next request;
* the cache key holds the caller's purpose and the shape, nothing else; a purpose
  must name everything else the builder's statement depends on.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Q

# Enough for every purpose times the shapes real policies produce; a shape costs a
# few KB of SQL text.
CAPACITY = 512


@dataclass(frozen=True, slots=True)
class _Slot:
    """Where the n-th value of the condition goes among the compiled parameters."""

    index: int


@dataclass(frozen=True, slots=True)
class _ListSlot:
    """A list parameter some of whose elements are values of the condition."""

    elements: tuple[Any, ...]


@dataclass(frozen=True)
class Template:
    """A condition split into its shape (hashable) and its values, in leaf order."""

    shape: Hashable
    values: tuple[Any, ...]


class _StandIns:
    """Values of the same types as the real ones, distinct from each other. They are
    only ever compiled, never run: what matters is that each is found again among
    the compiled parameters, and that no marker of the builder equals one."""

    # Random per process, so that no builder's fixed value equals one by design.
    _base = uuid.uuid4().int >> 64

    def __init__(self) -> None:
        self.by_value: dict[Any, int] = {}
        # Stand-ins for a whole array parameter (``__any``): the one element of a list.
        self.arrays: set[int] = set()

    def make(self, value: Any, *, array: bool = False) -> Any:
        """The stand-in for the next value of the condition, in leaf order (its index
        among the values)."""
        n = len(self.by_value)
        if isinstance(value, uuid.UUID):
            stand_in: Any = uuid.UUID(int=(self._base << 64) | n)
        elif isinstance(value, int):
            # Within every integer field's range: the ORM turns an out-of-range
            # comparison into an empty or a full condition, with no parameter.
            stand_in = 30_000 + (self._base + n) % 2_000
        elif isinstance(value, str):
            stand_in = f"\x1f{self._base:x}:{n}\x1f"
        else:  # an aware datetime (checked by _kind)
            stand_in = datetime(1900, 1, 1, tzinfo=UTC) + timedelta(
                seconds=self._base % 10**6, microseconds=n
            )
        if stand_in in self.by_value:  # past 2,000 integers: a repeat would shift every slot
            raise _Repeated
        self.by_value[stand_in] = n
        if array:
            self.arrays.add(n)
        return stand_in


def _plain(value: Any) -> Any:
    """``value`` as its base type: an enumeration member (a classification level, a
    scope) is bound as the int or text the ORM would have sent."""
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        return str.__str__(value)
    return value


class _Repeated(Exception):
    """A condition with more values than distinct stand-ins: compiled afresh."""


# Exact types whose values are bound as they are (no enumeration member, no bool).
_PLAIN = (uuid.UUID, int, str)


def _kind(value: Any) -> Hashable | None:
    """What of ``value`` decides the SQL text; None when the value cannot be stood in for."""
    if value is None or isinstance(value, bool):
        return ("const", value)  # isnull=True, exact=None: part of the shape
    if isinstance(value, uuid.UUID):
        return "uuid"
    if isinstance(value, int):
        return "int"
    if isinstance(value, str):
        return "str"
    if isinstance(value, datetime):
        # A naive datetime is converted by the ORM (with a warning): compiled afresh.
        return "datetime" if value.tzinfo is not None else None
    if isinstance(value, (list, tuple)):
        kinds = tuple(_kind(v) for v in value)
        if any(k is None or isinstance(k, tuple) for k in kinds):
            return None
        return (type(value).__name__, kinds)
    return None


def template(q: Q) -> tuple[Template, Q] | None:
    """``q``'s template and the same condition with a stand-in for every value, or
    None when some value is of a kind this module does not stand in for."""
    values: list[Any] = []
    stand_ins = _StandIns()

    def walk(node: Q) -> tuple[Hashable, Q] | None:
        out = Q()
        out.connector, out.negated = node.connector, node.negated
        shape: list[Hashable] = [node.connector, node.negated]
        for child in node.children:
            if isinstance(child, Q):
                inner = walk(child)
                if inner is None:
                    return None
                shape.append(inner[0])
                out.children.append(inner[1])
                continue
            if not (isinstance(child, tuple) and len(child) == 2 and isinstance(child[0], str)):
                return None  # an expression as a condition: not a (lookup, value) leaf
            lookup, value = child
            if lookup.endswith("__any") and isinstance(value, (list, tuple)) and value:
                # One array parameter (core.lookups): its length is no part of the text.
                # The arrays are the long values (a rank's few hundred ids): elements
                # of one exact plain type are taken as they are, every other array
                # element by element.
                first = type(value[0])
                if first in _PLAIN and all(type(v) is first for v in value):
                    kind, array = _kind(value[0]), list(value)
                else:
                    kinds = {_kind(v) for v in value}
                    if len(kinds) != 1 or None in kinds or any(isinstance(k, tuple) for k in kinds):
                        return None
                    kind, array = kinds.pop(), [_plain(v) for v in value]
                shape.append((lookup, "array", kind))
                values.append(array)
                out.children.append((lookup, [stand_ins.make(value[0], array=True)]))
                continue
            kind = _kind(value)
            if kind is None:
                return None
            shape.append((lookup, kind))
            if isinstance(kind, tuple) and kind[0] == "const":
                out.children.append((lookup, value))
            elif isinstance(value, (list, tuple)):
                stood = [stand_ins.make(v) for v in value]
                values.extend(_plain(v) for v in value)
                out.children.append((lookup, type(value)(stood)))
            else:
                values.append(_plain(value))
                out.children.append((lookup, stand_ins.make(value)))
        return tuple(shape), out

    try:
        walked = walk(q)
    except _Repeated:
        return None
    if walked is None:
        return None
    shape, stood_q = walked
    stood_q._stand_ins = stand_ins  # type: ignore[attr-defined]
    return Template(shape, tuple(values)), stood_q


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: tuple[Any, ...]  # constants, markers, _Slot and _ListSlot

    def bind(self, values: tuple[Any, ...]) -> list[Any]:
        out: list[Any] = []
        for p in self.params:
            if isinstance(p, _Slot):
                out.append(values[p.index])
            elif isinstance(p, _ListSlot):
                out.append([values[e.index] if isinstance(e, _Slot) else e for e in p.elements])
            else:
                out.append(p)
        return out


# Neither compiled nor compilable for this shape: compile afresh each time.
_UNCACHED = object()

_cache: OrderedDict[Hashable, Any] = OrderedDict()
_lock = threading.Lock()


def _slots(sql: str, params: list[Any], stand_ins: _StandIns, markers: tuple[Any, ...]) -> _Compiled | None:
    def is_marker(p: Any) -> bool:
        return any(p is m or (type(p) is type(m) and p == m) for m in markers)

    if any(isinstance(m, Hashable) and m in stand_ins.by_value for m in markers):
        return None  # a marker that reads as a value: compiled afresh
    found: set[int] = set()
    out: list[Any] = []
    for p in params:
        if isinstance(p, Hashable) and not isinstance(p, bool) and p in stand_ins.by_value:
            found.add(stand_ins.by_value[p])
            out.append(_Slot(stand_ins.by_value[p]))
        elif isinstance(p, (list, tuple)) and not p:
            out.append(type(p)())  # an empty list holds no value of anyone's
        elif isinstance(p, list) and len(p) == 1 and stand_ins.by_value.get(p[0]) in stand_ins.arrays:
            found.add(stand_ins.by_value[p[0]])
            out.append(_Slot(stand_ins.by_value[p[0]]))
        elif isinstance(p, (list, tuple)) and any(
            isinstance(e, Hashable) and e in stand_ins.by_value for e in p
        ):
            elements = []
            for e in p:
                if isinstance(e, Hashable) and e in stand_ins.by_value:
                    found.add(stand_ins.by_value[e])
                    elements.append(_Slot(stand_ins.by_value[e]))
                elif is_marker(e):
                    elements.append(e)
                else:
                    raise ValueError(f"a compiled statement holds a value that is not the condition's: {e!r}")
            out.append(_ListSlot(tuple(elements)))
        elif is_marker(p):
            out.append(p)
        else:
            raise ValueError(f"a compiled statement holds a value that is not the condition's: {p!r}")
    if found != set(stand_ins.by_value.values()):
        return None  # a value converted or dropped on the way: its place is unknown
    if any(str(s) in sql for s in stand_ins.by_value if isinstance(s, (str, uuid.UUID))):
        return None  # a value written into the text (a short number could match by chance)
    return _Compiled(sql, tuple(out))


def compiled(
    purpose: Hashable,
    q: Q,
    build: Callable[[Q], Any],
    *,
    markers: tuple[Any, ...] = (),
) -> tuple[str, list[Any]]:
    """(sql, params) of ``build(q)`` (a queryset, or an (sql, params) pair), from the
    statement compiled for ``purpose`` and ``q``'s shape when there is one.

    ``build`` must depend on nothing but its argument and ``purpose``; ``markers`` are
    the parameters it may add itself (fixed values the caller replaces after)."""
    split = template(q)
    if split is None:
        return _sql_of(build(q))
    tmpl, stood_q = split
    key = (purpose, tmpl.shape)
    with _lock:
        entry = _cache.get(key)
        if entry is not None:
            _cache.move_to_end(key)
    if entry is None:
        try:
            sql, params = _sql_of(build(stood_q))
        except Exception:  # a stand-in the ORM refused: compile afresh
            entry = _UNCACHED
        else:
            entry = _slots(sql, params, stood_q._stand_ins, markers) or _UNCACHED  # type: ignore[attr-defined]
        with _lock:
            _cache[key] = entry
            while len(_cache) > CAPACITY:
                _cache.popitem(last=False)
    if not isinstance(entry, _Compiled):
        return _sql_of(build(q))
    return entry.sql, entry.bind(tmpl.values)


def fetch(purpose: Hashable, q: Q, build: Callable[[Q], Any]) -> list[tuple[Any, ...]]:
    """The rows of :func:`compiled`'s statement, as the database driver returns them:
    for a ``values_list`` of plain columns (ids, numbers, text), where the ORM would
    run no converter; a JSON, array or vector column needs the queryset itself."""
    sql, params = compiled(purpose, q, build)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def _sql_of(built: Any) -> tuple[str, list[Any]]:
    if isinstance(built, tuple):
        sql, params = built
    else:
        sql, params = built.query.sql_with_params()
    return sql, list(params)


def state(purpose: Hashable, q: Q) -> str:
    """How ``purpose`` over ``q`` is served: "compiled" (bound into a statement kept
    for its shape), "uncached" (its shape compiles afresh every time) or "absent"."""
    split = template(q)
    if split is None:
        return "uncached"
    with _lock:
        entry = _cache.get((purpose, split[0].shape))
    return "absent" if entry is None else "uncached" if entry is _UNCACHED else "compiled"


def clear() -> None:
    """Forget every compiled statement (tests)."""
    with _lock:
        _cache.clear()
