"""The demo data seam: `fedmem_run` seeds demo data without knowing who owns it.

core sits below every app, so it cannot import the governance service that
builds the demo tenant; governance registers it when it loads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_seeder: Callable[[], dict[str, Any]] | None = None


def register_demo_seeder(seeder: Callable[[], dict[str, Any]]) -> None:
    global _seeder
    _seeder = seeder


def demo_seed() -> dict[str, Any] | None:
    """The registered seeder's result, or None when no app offers demo data."""
    return _seeder() if _seeder is not None else None
