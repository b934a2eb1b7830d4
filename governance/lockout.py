"""Brute-force limits on credentials: console passwords and API keys.

Failed attempts are counted per client address and per account (the username, or
a key's public prefix) in fixed windows of the ``counters`` cache, shared by every
process (Redis with ``REDIS_URL``, otherwise the table of ``core.counters``).
Once a counter reaches its limit, every attempt on that address or account is
refused with 429 and ``Retry-After`` until the window ends - the right password
included, or the limit would only slow guessing down. The moment a lockout starts
is written to the audit trail, naming the account and the address by keyed hash
only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.db import transaction

from core.counters import count_hit
from core.env import parse_rate


@dataclass(frozen=True)
class Lockout:
    """Refusal of a credential attempt: which counter is full and for how long."""

    kind: str  # "address" | "account"
    retry_after: int


def client_address(request: Any) -> str:
    """The caller's address; behind a trusted proxy, the one that proxy saw."""
    meta = getattr(request, "META", {})
    if settings.FEDMEM_BEHIND_PROXY:
        forwarded = meta.get("HTTP_X_FORWARDED_FOR", "")
        if forwarded:
            # The proxy appends the address it saw; anything left of it is client-supplied.
            return forwarded.split(",")[-1].strip()
    return meta.get("REMOTE_ADDR", "") or "unknown"


def _rates() -> dict[str, tuple[int, int] | None]:
    return {
        "address": parse_rate(
            settings.FEDMEM_AUTH_FAILURES_PER_ADDRESS, name="FEDMEM_AUTH_FAILURES_PER_ADDRESS"
        ),
        "account": parse_rate(
            settings.FEDMEM_AUTH_FAILURES_PER_ACCOUNT, name="FEDMEM_AUTH_FAILURES_PER_ACCOUNT"
        ),
    }


def _counter(kind: str, ident: str, period: int, now: float) -> str:
    from governance.services.audit import subject_hash

    # Hashed: the cache never holds addresses or usernames in clear.
    return f"fedmem:authfail:{kind}:{subject_hash(ident)[:32]}:{period}:{int(now // period)}"


def _idents(address: str, account: str | None) -> list[tuple[str, str]]:
    pairs = [("address", address)]
    if account:
        pairs.append(("account", account.lower()))
    return pairs


def lockout_check(*, address: str, account: str | None) -> Lockout | None:
    """The lockout this attempt falls under, or None when it may proceed."""
    now = time.time()
    rates = _rates()
    windows = []
    for kind, ident in _idents(address, account):
        rate = rates[kind]
        if rate is not None:
            windows.append((kind, rate, _counter(kind, ident, rate[1], now)))
    # Every request with a credential asks: both counters in one read.
    counts = caches["counters"].get_many([counter for _kind, _rate, counter in windows]) if windows else {}
    for kind, (limit, period), counter in windows:
        if (counts.get(counter) or 0) >= limit:
            return Lockout(kind, max(1, int(period - now % period) + 1))
    return None


def lockout_record_failure(*, address: str, account: str | None, channel: str) -> Lockout | None:
    """Count one failed attempt; the lockout it triggers (audited once), if any."""
    now = time.time()
    started: Lockout | None = None
    rates = _rates()
    for kind, ident in _idents(address, account):
        rate = rates[kind]
        if rate is None:
            continue
        limit, period = rate
        count = count_hit(caches["counters"], _counter(kind, ident, period, now), period + 1)
        if count == limit and started is None:
            started = Lockout(kind, max(1, int(period - now % period) + 1))
    if started is not None:
        _audit_lockout(started, address=address, account=account, channel=channel)
    return started


def lockout_reset(*, account: str) -> None:
    """A successful login clears the account's failures (never the address's)."""
    rate = _rates()["account"]
    if rate is not None:
        caches["counters"].delete(_counter("account", account.lower(), rate[1], time.time()))


def _audit_lockout(lockout: Lockout, *, address: str, account: str | None, channel: str) -> None:
    from governance.services.audit import audit_record, subject_hash

    with transaction.atomic():
        audit_record(
            tenant=None,
            actor=None,
            action="auth.lockout",
            target_type="account" if lockout.kind == "account" else "address",
            data={
                "channel": channel,  # console | api_key
                "by": lockout.kind,
                "address_hash": subject_hash(address),
                "account_hash": subject_hash(account.lower()) if account else "",
                "seconds": lockout.retry_after,
            },
        )
