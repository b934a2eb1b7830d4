"""The agent memory policy as a typed, validated value.

Stored as JSON in :class:`governance.models.AgentPolicyVersion`; every reader gets
a :class:`MemoryPolicy` with every field filled (missing keys take the defaults
below), so enforcement code never deals with half-written JSON.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from core.vocabulary import CLASSIFICATION_NAMES, Classification, Kind, Scope

DEFAULT_READ_SCOPES = (Scope.SESSION.value, Scope.USER.value, Scope.AGENT.value)
# Weakest first; the same levels engines announce (providers.models.Isolation).
ISOLATION_LEVELS = ("none", "logical", "dedicated")
MAX_RECALL_TOP_K = 100


class PolicyError(ValueError):
    """A policy document that cannot be used; ``field`` names the offending key."""

    def __init__(self, field_name: str, message: str) -> None:
        self.field = field_name
        super().__init__(f"{field_name}: {message}")


@dataclass(frozen=True)
class PolicyModes:
    session: bool = True
    long_term: bool = True
    agent: bool = True
    shared: bool = False
    knowledge_graph: bool = False


@dataclass(frozen=True)
class MemoryPolicy:
    """What an agent may write and read. Defaults are the documented ones."""

    modes: PolicyModes = field(default_factory=PolicyModes)
    write_scopes: tuple[str, ...] = DEFAULT_READ_SCOPES
    read_scopes: tuple[str, ...] = DEFAULT_READ_SCOPES
    default_scope: str = Scope.USER.value
    allowed_kinds: tuple[str, ...] = tuple(Kind.values)
    max_classification: str = "confidential"
    allow_personal_data: bool = True
    retention_days: int | None = None
    # Idle retention: forget an item not recalled (nor written) for this many days.
    idle_days: int | None = None
    legal_hold: bool = False
    infer: bool = False
    shared_with: tuple[str, ...] = ()
    teams: tuple[str, ...] = ()
    projects: tuple[str, ...] = ()
    global_access: bool = False
    required_isolation: str = "logical"
    recall_top_k: int = 8
    # Check each write against the agent's current facts (memory.contradictions).
    check_contradictions: bool = False

    @property
    def max_classification_level(self) -> Classification:
        return Classification.from_name(self.max_classification)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for key, value in data.items():
            if isinstance(value, tuple):
                data[key] = list(value)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> MemoryPolicy:
        """Validate a stored or submitted policy; unknown keys are refused."""
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise PolicyError(unknown[0], "unknown policy key")
        values: dict[str, Any] = {}
        if "modes" in data:
            modes = data["modes"]
            if not isinstance(modes, dict):
                raise PolicyError("modes", "must be an object")
            mode_names = {f.name for f in fields(PolicyModes)}
            for key, flag in modes.items():
                if key not in mode_names or not isinstance(flag, bool):
                    raise PolicyError("modes", f"{key!r} is not a known mode with a boolean value")
            values["modes"] = PolicyModes(**modes)
        for key in ("write_scopes", "read_scopes"):
            if key in data:
                values[key] = _choices(key, data[key], Scope.values)
        if "allowed_kinds" in data:
            values["allowed_kinds"] = _choices("allowed_kinds", data["allowed_kinds"], Kind.values)
        if "default_scope" in data:
            if data["default_scope"] not in Scope.values:
                raise PolicyError("default_scope", "must be one of " + ", ".join(Scope.values))
            values["default_scope"] = data["default_scope"]
        if "max_classification" in data:
            if data["max_classification"] not in CLASSIFICATION_NAMES:
                raise PolicyError("max_classification", "must be one of " + ", ".join(CLASSIFICATION_NAMES))
            values["max_classification"] = data["max_classification"]
        for key in ("allow_personal_data", "legal_hold", "infer", "global_access", "check_contradictions"):
            if key in data:
                if not isinstance(data[key], bool):
                    raise PolicyError(key, "must be true or false")
                values[key] = data[key]
        for key in ("retention_days", "idle_days"):
            if key in data:
                days = data[key]
                if days is not None and (isinstance(days, bool) or not isinstance(days, int) or days < 1):
                    raise PolicyError(key, "must be null or a positive integer")
                values[key] = days
        if "recall_top_k" in data:
            top_k = data["recall_top_k"]
            if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_RECALL_TOP_K:
                raise PolicyError("recall_top_k", f"must be an integer from 1 to {MAX_RECALL_TOP_K}")
            values["recall_top_k"] = top_k
        for key in ("shared_with", "teams", "projects"):
            if key in data:
                values[key] = _strings(key, data[key])
        if "required_isolation" in data:
            if data["required_isolation"] not in ISOLATION_LEVELS:
                raise PolicyError("required_isolation", "must be one of " + ", ".join(ISOLATION_LEVELS))
            values["required_isolation"] = data["required_isolation"]
        return cls(**values)


def _choices(key: str, value: Any, allowed: list[str]) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyError(key, "must be a list of names")
    bad = [v for v in value if v not in allowed]
    if bad:
        raise PolicyError(key, f"{bad[0]!r} is not one of " + ", ".join(allowed))
    return tuple(dict.fromkeys(value))


def _strings(key: str, value: Any) -> tuple[str, ...]:
    # No NUL: PostgreSQL's jsonb cannot store one (it failed as a 500 on save).
    if not isinstance(value, list) or not all(
        isinstance(v, str) and 0 < len(v) <= 128 and "\x00" not in v for v in value
    ):
        raise PolicyError(key, "must be a list of non-empty strings (at most 128 characters each, no NUL)")
    if len(value) > 200:
        raise PolicyError(key, "at most 200 entries")
    return tuple(dict.fromkeys(value))


DEFAULT_POLICY = MemoryPolicy()
