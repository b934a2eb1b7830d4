"""``Authorization: Bearer <key>`` for agents and users."""

from __future__ import annotations

import hashlib
import hmac
from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import authentication, exceptions

from governance.models import ApiKey
from governance.principals import AgentPrincipal, bind_to_tenant

KEY_PREFIX = "fm_"
# last_used_at is a hint, not an audit record: write it at most once a minute per key.
LAST_USED_RESOLUTION = timedelta(minutes=1)


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


def resolve_key(raw: str) -> ApiKey:
    """Find the active key for a presented secret or raise AuthenticationFailed."""
    prefix = split_key(raw)
    if prefix is None:
        raise exceptions.AuthenticationFailed("Invalid API key.")
    key = (
        ApiKey.objects.select_related("agent", "agent__tenant", "user", "tenant")
        .filter(prefix=prefix)
        .first()
    )
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
    return key


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
        key = resolve_key(raw)
        request._request.tenant = key.tenant
        if key.agent_id:
            return AgentPrincipal(key.agent, key), key  # type: ignore[arg-type]
        # A personal key acts only in the tenant it was created in, whatever else
        # its user belongs to (a console session keeps the tenant switcher).
        bind_to_tenant(key.user, key.tenant_id)
        return key.user, key

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="fedmem"'
