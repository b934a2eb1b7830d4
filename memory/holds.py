"""The one place that decides whether memory is under legal hold.

An item is held when its own ``legal_hold`` flag is set (written under a policy
with ``legal_hold``), its dataset is flagged, OR an active
:class:`governance.models.LegalHold` of its tenant covers it. Every write path
that changes or deletes existing rows — update, forget, purge, supersede,
contradiction, dedup merge, re-extraction, retention, erasure, dataset ops,
provider forget — asks here (through :class:`Holds`), and every attempt a hold
stops is audited as ``legal_hold.blocked``.

Which rows a hold covers:

* subject: items and session messages whose ``user_id`` is the subject (the hold
  stores only the subject's keyed hash, so matching hashes candidate user ids);
* agent: the agent's items and session messages;
* scope: items visible at that scope level (of one agent when the hold names one),
  and session messages for a ``session`` scope hold;
* dataset: the dataset's chunks (``dataset`` foreign key, or ``provenance.dataset``
  for rows written before the key existed);
* item: that item.

NULL safety: a hold's condition can be SQL NULL for a row (``provenance->'dataset'``
is NULL when the key is absent, ``dataset_id IN (...)`` is NULL for rows without a
dataset), and ``NOT (... OR NULL)`` drops the row from both ``filter`` and
``exclude``. The raw conditions therefore never leave this module: callers get
querysets through :meth:`Holds.held` / :meth:`Holds.unheld` / :meth:`Holds.annotate`,
which compare one ``COALESCE(condition, false)`` expression.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet, Value
from django.db.models.functions import Coalesce

from core.vocabulary import Scope
from governance.models import LegalHold
from governance.services.audit import audit_record, subject_hash

_NOTHING = Q(pk__in=[])
_HELD = "_fedmem_held"


def active_holds(tenant_id: Any) -> list[LegalHold]:
    return list(LegalHold.objects.active().filter(tenant_id=tenant_id).order_by("placed_at", "id"))


def hold_targets() -> list[str]:
    """Every target a hold can name (the matrix test enumerates these)."""
    return list(LegalHold.Target.values)


class Holds:
    """The active holds of one tenant, read once, and every decision made from them."""

    def __init__(self, tenant_id: Any, holds: list[LegalHold] | None = None) -> None:
        self.tenant_id = tenant_id
        self.holds = active_holds(tenant_id) if holds is None else list(holds)

    def __bool__(self) -> bool:
        return bool(self.holds)

    # --- subjects ---------------------------------------------------------------------

    def _subject_hashes(self) -> dict[str, list[LegalHold]]:
        out: dict[str, list[LegalHold]] = {}
        for hold in self.holds:
            if hold.target == LegalHold.Target.SUBJECT and hold.subject:
                out.setdefault(hold.subject, []).append(hold)
        return out

    def _subjects_in(self, rows: QuerySet[Any]) -> dict[str, list[str]]:
        """Hold id -> the user ids among ``rows`` that hold names (by keyed hash)."""
        hashes = self._subject_hashes()
        if not hashes:
            return {}
        found: dict[str, list[str]] = {}
        distinct = rows.order_by().values_list("user_id", flat=True).distinct()
        distinct.query.select_for_update = False  # FOR UPDATE cannot go with DISTINCT
        for user_id in distinct:
            if not user_id:
                continue
            for hold in hashes.get(subject_hash(user_id), []):
                found.setdefault(str(hold.pk), []).append(user_id)
        return found

    # --- conditions (private: only ever used through COALESCE) -------------------------

    def _item_condition(self, hold: LegalHold, subjects: dict[str, list[str]]) -> Q:
        from memory.models import Dataset

        base = Q(tenant_id=hold.tenant_id)
        match hold.target:
            case LegalHold.Target.SUBJECT:
                ids = subjects.get(str(hold.pk))
                return base & Q(user_id__in=ids) if ids else _NOTHING
            case LegalHold.Target.AGENT:
                return base & Q(agent_id=hold.agent_id)
            case LegalHold.Target.SCOPE:
                q = base & Q(scopes__contains=[hold.scope])
                return q & Q(agent_id=hold.agent_id) if hold.agent_id else q
            case LegalHold.Target.DATASET:
                named = Dataset.objects.filter(tenant_id=hold.tenant_id, name=hold.dataset).values("pk")
                return base & (Q(dataset_id__in=named) | Q(provenance__dataset=hold.dataset))
            case LegalHold.Target.ITEM:
                return base & Q(pk=hold.item_id)
        return _NOTHING

    def _message_condition(self, hold: LegalHold, subjects: dict[str, list[str]]) -> Q:
        base = Q(tenant_id=hold.tenant_id)
        match hold.target:
            case LegalHold.Target.SUBJECT:
                ids = subjects.get(str(hold.pk))
                return base & Q(user_id__in=ids) if ids else _NOTHING
            case LegalHold.Target.AGENT:
                return base & Q(agent_id=hold.agent_id)
            case LegalHold.Target.SCOPE if hold.scope == Scope.SESSION:
                return base & Q(agent_id=hold.agent_id) if hold.agent_id else base
        return _NOTHING

    def _expression(self, rows: QuerySet[Any], holds: Iterable[LegalHold] | None = None) -> Coalesce:
        from memory.models import Dataset, SessionMessage

        messages = rows.model is SessionMessage
        subjects = self._subjects_in(rows)
        combined = Q(legal_hold=True)
        if not messages:
            flagged_sets = Dataset.objects.filter(tenant_id=self.tenant_id, legal_hold=True).values("pk")
            combined |= Q(dataset_id__in=flagged_sets)
        for hold in self.holds if holds is None else holds:
            combined |= (
                self._message_condition(hold, subjects) if messages else self._item_condition(hold, subjects)
            )
        return Coalesce(ExpressionWrapper(combined, output_field=BooleanField()), Value(False))

    # --- decisions ---------------------------------------------------------------------

    def annotate(self, rows: QuerySet[Any], name: str = "held") -> QuerySet[Any]:
        """``rows`` with a never-NULL boolean ``name``: held or not."""
        return rows.annotate(**{name: self._expression(rows)})

    def held(self, rows: QuerySet[Any]) -> QuerySet[Any]:
        return rows.alias(**{_HELD: self._expression(rows)}).filter(**{_HELD: True})

    def unheld(self, rows: QuerySet[Any]) -> QuerySet[Any]:
        return rows.alias(**{_HELD: self._expression(rows)}).filter(**{_HELD: False})

    def covering(self, rows: QuerySet[Any]) -> dict[str, int]:
        """Hold id -> how many of ``rows`` it covers (one row can count under several)."""
        out: dict[str, int] = {}
        for hold in self.holds:
            count = rows.alias(**{_HELD: self._expression(rows, [hold])}).filter(**{_HELD: True}).count()
            if count:
                out[str(hold.pk)] = count
        return out

    def holds_by_id(self, ids: Iterable[str]) -> list[LegalHold]:
        wanted = set(ids)
        return [h for h in self.holds if str(h.pk) in wanted]

    def covering_item(self, item: Any) -> list[LegalHold]:
        """The hold rows covering one item (its own flag is not a hold row)."""
        from memory.models import MemoryItem

        rows = MemoryItem.objects.filter(pk=item.pk)
        return self.holds_by_id(self.covering(rows))

    def item_is_held(self, item: Any) -> bool:
        from memory.models import MemoryItem

        return bool(item.legal_hold) or self.held(MemoryItem.objects.filter(pk=item.pk)).exists()

    def covering_subject(self, *, subject: str, agent_id: Any = None) -> list[LegalHold]:
        """Holds that stop deleting a subject's data wholesale (erasure, provider forget)."""
        digest = subject_hash(subject)
        return [
            h
            for h in self.holds
            if (h.target == LegalHold.Target.SUBJECT and h.subject == digest)
            or (
                h.target == LegalHold.Target.AGENT
                and agent_id is not None
                and str(h.agent_id) == str(agent_id)
            )
        ]


def holds_covering_item(item: Any) -> list[LegalHold]:
    return Holds(item.tenant_id).covering_item(item)


def is_held(item: Any) -> bool:
    return Holds(item.tenant_id).item_is_held(item)


def holds_covering_subject(tenant_id: Any, *, subject: str, agent_id: Any = None) -> list[LegalHold]:
    return Holds(tenant_id).covering_subject(subject=subject, agent_id=agent_id)


def audit_blocked(
    *,
    tenant: Any,
    actor: Any,
    operation: str,
    holds: list[LegalHold],
    count: int,
    flagged: int = 0,
    target: Any = None,
) -> None:
    """Record that holds stopped a write. Runs in its own transaction when called
    outside one, so the record survives the refusal that follows it."""
    with transaction.atomic():
        audit_record(
            tenant=tenant,
            actor=actor,
            action="legal_hold.blocked",
            target_type=target[0] if target else "",
            target_id=target[1] if target else "",
            data={
                "operation": operation,
                "count": count,
                "flagged_items": flagged,
                "holds": sorted({str(h.pk) for h in holds}),
            },
        )
