"""Append to and verify the hash-chained audit trail.

``audit_record`` must be called inside the transaction of the action it records,
so the event commits or rolls back with it. Appends to one chain are serialized
by a transaction-scoped advisory lock on the chain; different tenants' chains do
not wait for each other.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from governance.models import AuditChainHead, AuditEvent, Tenant
from governance.permissions import is_agent

GENESIS = "0" * 64
PLATFORM_CHAIN = "platform"


def subject_hash(value: str) -> str:
    """A keyed hash for naming a data subject in the trail without storing it."""
    return hmac.new(settings.SECRET_KEY.encode(), value.encode(), hashlib.sha256).hexdigest()


def _canonical(event: AuditEvent) -> bytes:
    body = {
        "chain": event.chain,
        "seq": event.seq,
        "tenant_id": str(event.tenant_id) if event.tenant_id else None,
        "actor": [event.actor_type, event.actor_id, event.actor_label],
        "action": event.action,
        "target": [event.target_type, event.target_id],
        "data": event.data,
        "created_at": event.created_at.isoformat(),
        "prev_hash": event.prev_hash,
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def event_hash(event: AuditEvent) -> str:
    return hashlib.sha256(_canonical(event)).hexdigest()


def _actor(actor: Any) -> tuple[str, str, str]:
    if actor is None:
        return "system", "", "system"
    if is_agent(actor):
        return "agent", str(actor.agent.pk), actor.agent.name
    if isinstance(getattr(actor, "type", None), str):
        # memory.enforcement.Actor: who a memory operation ran for, already resolved.
        return actor.type, actor.id, actor.name
    return "user", str(actor.pk), actor.get_username()


def _chain_lock(chain: str) -> None:
    key = int.from_bytes(hashlib.sha256(f"audit:{chain}".encode()).digest()[:8], "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])


def audit_record(
    *,
    tenant: Tenant | None,
    actor: Any,
    action: str,
    target: Any = None,
    target_type: str = "",
    target_id: str = "",
    data: dict[str, Any] | None = None,
) -> AuditEvent:
    if not connection.in_atomic_block:
        raise RuntimeError("audit_record must run inside the transaction of the audited action")
    chain = str(tenant.pk) if tenant is not None else PLATFORM_CHAIN
    if target is not None:
        target_type = target_type or target._meta.label_lower
        target_id = target_id or str(target.pk)
    _chain_lock(chain)
    head = AuditChainHead.objects.filter(pk=chain).first()
    actor_type, actor_id, actor_label = _actor(actor)
    event = AuditEvent(
        chain=chain,
        seq=(head.seq if head else 0) + 1,
        tenant_id=tenant.pk if tenant is not None else None,
        actor_type=actor_type,
        actor_id=actor_id,
        actor_label=actor_label,
        action=action,
        target_type=target_type,
        target_id=target_id,
        data=data or {},
        created_at=timezone.now(),
        prev_hash=head.hash if head else GENESIS,
    )
    event.hash = event_hash(event)
    event.save(force_insert=True)
    AuditChainHead.objects.update_or_create(pk=chain, defaults={"seq": event.seq, "hash": event.hash})
    return event


@dataclass
class Verification:
    ok: bool
    chain: str
    checked: int
    broken_at: int | None = None
    reason: str = ""


def audit_verify(*, chain: str, batch: int = 2000) -> Verification:
    """Walk one chain in order; report the first event that does not hold."""
    prev = GENESIS
    expected_seq = 1
    checked = 0
    last_id = 0
    while True:
        rows = list(AuditEvent.objects.filter(chain=chain, id__gt=last_id).order_by("id")[:batch])
        if not rows:
            break
        for event in rows:
            checked += 1
            if event.seq != expected_seq:
                return Verification(
                    False, chain, checked, event.seq, f"expected event {expected_seq} (missing rows)"
                )
            if event.prev_hash != prev:
                return Verification(False, chain, checked, event.seq, "does not link to the previous event")
            if event_hash(event) != event.hash:
                return Verification(False, chain, checked, event.seq, "content does not match its hash")
            prev = event.hash
            expected_seq += 1
            last_id = event.id
    head = AuditChainHead.objects.filter(pk=chain).first()
    if head is not None and (head.seq != expected_seq - 1 or head.hash != prev):
        return Verification(
            False, chain, checked, expected_seq, "events are missing from the end of the chain"
        )
    return Verification(True, chain, checked)
