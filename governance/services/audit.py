"""Append to and verify the keyed, hash-chained audit trail.

Each event's hash is an HMAC (``FEDMEM_AUDIT_KEY``, kept outside the database) over
its content and the previous hash; the chain head carries an HMAC of its position
too, and :func:`audit_anchor_export` writes signed heads to files outside the
database at intervals. So someone with the database credentials but not the key can
neither edit an event and recompute the hashes, nor cut the tail and move the
head back, nor drop a whole chain, without verification saying so.

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
from pathlib import Path
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


def _key() -> bytes:
    return settings.FEDMEM_AUDIT_KEY.encode()


def event_hash(event: AuditEvent) -> str:
    return hmac.new(_key(), _canonical(event), hashlib.sha256).hexdigest()


def head_mac(chain: str, seq: int, hash_: str) -> str:
    return hmac.new(_key(), f"head|{chain}|{seq}|{hash_}".encode(), hashlib.sha256).hexdigest()


def _anchor_mac(chain: str, seq: int, hash_: str, at: str) -> str:
    return hmac.new(_key(), f"anchor|{chain}|{seq}|{hash_}|{at}".encode(), hashlib.sha256).hexdigest()


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
    AuditChainHead.objects.update_or_create(
        pk=chain,
        defaults={"seq": event.seq, "hash": event.hash, "mac": head_mac(chain, event.seq, event.hash)},
    )
    return event


@dataclass
class Verification:
    ok: bool
    chain: str
    checked: int
    broken_at: int | None = None
    reason: str = ""


def audit_verify(*, chain: str, batch: int = 2000) -> Verification:
    """Walk one chain in order; report the first event, head or anchor that does not hold."""
    prev = GENESIS
    expected_seq = 1
    checked = 0
    last_id = 0
    hashes_at: dict[int, str] = {}
    anchor = latest_anchor(chain)
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
            if not hmac.compare_digest(event_hash(event), event.hash):
                reason = "content does not match its hash"
                if hashlib.sha256(_canonical(event)).hexdigest() == event.hash:
                    reason = "its hash is not keyed: rewritten without the audit key"
                return Verification(False, chain, checked, event.seq, reason)
            if anchor is not None and event.seq == anchor["seq"]:
                hashes_at[event.seq] = event.hash
            prev = event.hash
            expected_seq += 1
            last_id = event.id
    last = expected_seq - 1
    head = AuditChainHead.objects.filter(pk=chain).first()
    if head is None and checked:
        return Verification(False, chain, checked, last, "the chain head is missing")
    if head is not None:
        if head.seq != last or head.hash != prev:
            return Verification(
                False, chain, checked, expected_seq, "events are missing from the end of the chain"
            )
        if not hmac.compare_digest(head.mac, head_mac(chain, head.seq, head.hash)):
            return Verification(
                False, chain, checked, head.seq, "the chain head was moved without the audit key"
            )
    if anchor is not None:
        if not anchor["valid"]:
            return Verification(
                False, chain, checked, anchor["seq"], "the exported anchor is not signed by the key"
            )
        if last < anchor["seq"]:
            return Verification(
                False,
                chain,
                checked,
                last + 1,
                f"the chain ends before its exported anchor at event {anchor['seq']}",
            )
        if hashes_at.get(anchor["seq"]) != anchor["hash"]:
            return Verification(
                False, chain, checked, anchor["seq"], "event differs from its exported anchor"
            )
    return Verification(True, chain, checked)


def audit_chains() -> list[str]:
    """Every chain that has events, a head or an exported anchor."""
    chains = set(AuditChainHead.objects.values_list("chain", flat=True))
    chains |= set(AuditEvent.objects.values_list("chain", flat=True).distinct())
    directory = _anchor_dir()
    if directory.is_dir():
        chains |= {path.stem for path in directory.glob("*.jsonl")}
    return sorted(chains)


def _anchor_dir() -> Path:
    return Path(str(settings.FEDMEM_AUDIT_ANCHOR_DIR))


def latest_anchor(chain: str) -> dict[str, Any] | None:
    """The last anchor exported for ``chain`` (``valid``: its signature holds)."""
    path = _anchor_dir() / f"{chain}.jsonl"
    if not path.is_file():
        return None
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines:
        return None
    try:
        row = json.loads(lines[-1])
        valid = hmac.compare_digest(
            str(row["mac"]), _anchor_mac(chain, int(row["seq"]), str(row["hash"]), str(row["at"]))
        )
        return {"seq": int(row["seq"]), "hash": str(row["hash"]), "valid": valid}
    except (ValueError, KeyError, TypeError):
        return {"seq": 0, "hash": "", "valid": False}


def audit_anchor_export() -> int:
    """Append each chain's current head, signed, to its file under
    FEDMEM_AUDIT_ANCHOR_DIR (outside the database; ship it off the host for more);
    returns how many chains moved since their last anchor."""
    directory = _anchor_dir()
    directory.mkdir(parents=True, exist_ok=True)
    written = 0
    for head in AuditChainHead.objects.order_by("chain"):
        last = latest_anchor(head.chain)
        if last is not None and last["seq"] == head.seq and last["hash"] == head.hash:
            continue
        at = timezone.now().isoformat()
        row = {"chain": head.chain, "seq": head.seq, "hash": head.hash, "at": at}
        row["mac"] = _anchor_mac(head.chain, head.seq, head.hash, at)
        with (directory / f"{head.chain}.jsonl").open("a", encoding="utf-8") as out:
            out.write(json.dumps(row, sort_keys=True) + "\n")
        written += 1
    return written
