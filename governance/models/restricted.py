"""``restrict(principal, action)`` for tenant-owned models (NetBox's RestrictedQuerySet shape).

The rules live with the capability table (:mod:`governance.authz`), which imports
these models; so the models do not import it back: each gate registers itself
for its model when its module loads (``governance.authz`` for governance's
models, ``providers.selectors`` for engine instances), and a model whose gate
never registered fails loudly instead of answering unrestricted rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.db import models

M = TypeVar("M", bound=models.Model)
Gate = Callable[[models.QuerySet[Any], Any, str], models.QuerySet[Any]]

VIEW = "view"
CHANGE = "change"

_GATES: dict[str, Gate] = {}


def register_gate(model_label: str, gate: Gate) -> None:
    _GATES[model_label] = gate


class RestrictedQuerySet(models.QuerySet[M]):
    def restrict(self, principal: Any, action: str = VIEW) -> RestrictedQuerySet[M]:
        """The rows the principal may ``action``; nothing for anonymous callers."""
        gate = _GATES.get(self.model._meta.label)
        if gate is None:
            raise ImproperlyConfigured(f"no restrict() gate is registered for {self.model._meta.label}")
        return gate(self, principal, action)  # type: ignore[return-value]
