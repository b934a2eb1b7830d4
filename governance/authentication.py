"""``Authorization: Bearer <key>`` for agents and users."""

from __future__ import annotations

import hashlib
import hmac
from datetime import timedelta
from typing import Any

from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.exceptions import PermissionDenied
from django.db.models import BigIntegerField
from django.db.models.expressions import RawSQL
from django.dispatch import receiver
from django.utils import timezone
from rest_framework import authentication, exceptions

from core import generations
from governance.lockout import client_address, lockout_check, lockout_record_failure, lockout_reset
from governance.models import ApiKey
from governance.principals import AgentPrincipal, bind_to_tenant

LOCKED_OUT = "Too many failed attempts; try again later."

KEY_PREFIX = "fm_"
# last_used_at is a hint, not an audit record: write it at most once a minute per key.
LAST_USED_RESOLUTION = timedelta(minutes=1)
# The generation (core.generations) of every identity row: keys, agents, users,
# tenants, policy versions (their triggers: governance migration 0013).
GENERATION = "governance"


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def split_key(raw: str) -> str | None:
    """Return the public prefix of a well-formed key, or None."""
    if not raw.startswith(KEY_PREFIX):
        return None
    prefix, sep, secret = raw[len(KEY_PREFIX) :].partition("_")
    if not sep or len(prefix) != 12 or len(secret) < 20:
        return None
    return prefix


# Keys by prefix, with their agent, user and tenant as last read, each valid while the
# governance generation it was read under stands (core.generations: any change to
# those rows, in any process, moves it in the same transaction).
_keys: generations.Cache[ApiKey] = generations.Cache()


def _load_key(prefix: str) -> ApiKey | None:
    """The key row with its owner and tenants, and (one statement) the generation."""
    sql, params = generations.select_sql(GENERATION)
    return (
        ApiKey.objects.select_related("agent", "agent__tenant", "user", "tenant")
        .annotate(generation=RawSQL(sql, params, output_field=BigIntegerField()))  # noqa: S611 - fixed SQL
        .filter(prefix=prefix)
        .first()
    )


def _lookup(prefix: str) -> ApiKey | None:
    """The key for ``prefix``: a copy of the one read before while no governance row
    changed since (one read of the generation), else read again."""
    if _keys.generation_of(prefix) is not None:
        generation = generations.current(GENERATION)
        key = _keys.get(prefix, generation)
        if key is not None:
            key.generation = generation  # type: ignore[attr-defined]
            return key
    key = _load_key(prefix)
    if key is not None:
        _keys.put(prefix, key.generation, key)  # type: ignore[attr-defined]
    return key


def resolve_key(raw: str) -> ApiKey:
    """Find the active key for a presented secret or raise AuthenticationFailed."""
    prefix = split_key(raw)
    if prefix is None:
        raise exceptions.AuthenticationFailed("Invalid API key.")
    key = _lookup(prefix)
    if key is None or not hmac.compare_digest(key.key_hash, hash_key(raw)):
        raise exceptions.AuthenticationFailed("Invalid API key.")
    if key.revoked_at is not None:
        raise exceptions.AuthenticationFailed("This API key has been revoked.")
    owner_active = key.agent.is_active if key.agent_id else key.user.is_active  # type: ignore[union-attr]
    if not owner_active:
        raise exceptions.AuthenticationFailed("The owner of this API key is disabled.")
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
        # The copy too, or every later request would write it again (the update
        # leaves the generation as it is: last use is bookkeeping).
        _keys.update(prefix, key.generation, lambda stored: setattr(stored, "last_used_at", now))  # type: ignore[attr-defined]
    return key


def authenticate_bearer(raw: str, *, address: str) -> ApiKey:
    """:func:`resolve_key` behind the brute-force limit of ``address`` and the key's
    prefix: raises Throttled (429, with the wait) while either is locked out, and
    counts every failure."""
    prefix = split_key(raw)
    locked = lockout_check(address=address, account=f"key:{prefix}" if prefix else None)
    if locked is not None:
        raise exceptions.Throttled(wait=locked.retry_after, detail=LOCKED_OUT)
    try:
        return resolve_key(raw)
    except exceptions.AuthenticationFailed:
        lockout_record_failure(
            address=address, account=f"key:{prefix}" if prefix else None, channel="api_key"
        )
        raise


class LockoutModelBackend(ModelBackend):
    """Passwords (console and Django admin) are not even checked while locked out."""

    def authenticate(self, request: Any, username: str | None = None, password: str | None = None, **kw: Any):  # type: ignore[no-untyped-def]
        if (
            request is not None
            and lockout_check(address=client_address(request), account=username) is not None
        ):
            raise PermissionDenied(LOCKED_OUT)  # stops authenticate(); counted as a failure
        return super().authenticate(request, username=username, password=password, **kw)


@receiver(user_login_failed, dispatch_uid="fedmem-lockout-count")
def _count_login_failure(sender: Any, credentials: dict[str, Any], request: Any = None, **kw: Any) -> None:
    if request is not None:
        lockout_record_failure(
            address=client_address(request), account=credentials.get("username"), channel="console"
        )


@receiver(user_logged_in, dispatch_uid="fedmem-lockout-reset")
def _reset_on_login(sender: Any, request: Any, user: Any, **kw: Any) -> None:
    lockout_reset(account=user.get_username())


def key_principal(key: ApiKey) -> Any:
    """Who acts with this key: its agent, or its user confined to the key's tenant.

    Every surface that takes a key (REST, MCP over HTTP and stdio) asks here, so a
    personal key acts only in the tenant it was created in, whatever else its user
    belongs to (a console session keeps the tenant switcher).
    """
    generation = getattr(key, "generation", None)
    if key.agent_id:
        return AgentPrincipal(key.agent, key, generation=generation)
    bind_to_tenant(key.user, key.tenant_id, generation=generation)
    return key.user


class BearerKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Any) -> tuple[Any, ApiKey] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != self.keyword.lower():
            return None
        raw = raw.strip()
        if not raw or " " in raw:
            raise exceptions.AuthenticationFailed("Invalid Authorization header; use 'Bearer <key>'.")
        key = authenticate_bearer(raw, address=client_address(request))
        request._request.tenant = key.tenant
        return key_principal(key), key

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="fedmem"'
