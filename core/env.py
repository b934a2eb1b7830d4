"""Typed environment readers that fail loudly.

Every setting comes from the environment. A value that cannot be parsed stops the
process at start-up with a message naming the variable, instead of surfacing later
as a confusing runtime error. ``NAME_FILE`` is accepted wherever ``NAME`` is, so a
secret can come from a mounted file (Docker/Kubernetes secrets).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypeVar

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}

T = TypeVar("T")


def _raw(name: str) -> str | None:
    file_name = os.environ.get(f"{name}_FILE")
    if file_name:
        try:
            return Path(file_name).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ImproperlyConfigured(
                f"{name}_FILE points to {file_name!r}, which cannot be read: {exc}"
            ) from exc
    return os.environ.get(name)


def env_str(name: str, default: str | None = None) -> str | None:
    value = _raw(name)
    return default if value is None or value == "" else value


def env_required(name: str, why: str) -> str:
    value = env_str(name)
    if value is None:
        raise ImproperlyConfigured(f"{name} must be set: {why}")
    return value


def env_bool(name: str, default: bool) -> bool:
    value = _raw(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name}={value!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off"
    )


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    value = _raw(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from exc
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is below the minimum of {minimum}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name}={number} is above the maximum of {maximum}")
    return number


def env_float(
    name: str, default: float, *, minimum: float | None = None, maximum: float | None = None
) -> float:
    value = _raw(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = float(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number") from exc
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is below the minimum of {minimum}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name}={number} is above the maximum of {maximum}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = _raw(name)
    if value is None:
        return list(default)
    return [part.strip() for part in value.split(",") if part.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env_str(name, default)
    assert value is not None
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} must be one of: {', '.join(choices)}")
    return value


PERIODS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600}


def parse_rate(rate: str | None, *, name: str = "FEDMEM_API_RATE_LIMIT") -> tuple[int, int] | None:
    """'600/minute' → (600, 60); '10/15minute' → (10, 900); None, '' or 'off' → no limit."""
    if rate is None or rate.strip().lower() in {"", "off", "0"}:
        return None
    try:
        count, _, period = rate.strip().partition("/")
        period = period.strip().lower()
        digits = period[: len(period) - len(period.lstrip("0123456789"))]
        multiple = int(digits) if digits else 1
        if multiple < 1:
            raise ValueError(period)
        return int(count), multiple * PERIODS[period[len(digits) :]]
    except (ValueError, KeyError) as exc:
        raise ImproperlyConfigured(
            f"{name}={rate!r} must look like '600/minute' or '10/15minute' "
            "(periods: second, minute, hour) or 'off'"
        ) from exc
