"""A cause -> effect relation one text states, as every extractor returns it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Relation:
    cause: str
    effect: str
    cue: str
