"""Credential references, resolved at call time and never kept in clear.

Two schemes:

* ``env://NAME`` reads an environment variable (or ``NAME_FILE``). NAME must
  start with ``FEDMEM_CREDENTIAL_ENV_PREFIX`` so a reference can never pull an
  unrelated process secret (the database URL, the Django key) into an
  outbound request.
* ``openbao://mount/path#key`` reads one key of a KV v2 secret from OpenBao (or
  Vault, same HTTP API): ``GET {FEDMEM_OPENBAO_ADDR}/v1/{mount}/data/{path}``
  with ``X-Vault-Token`` read from the environment at call time, so a rotated
  token is picked up without a restart. A tenant's own reference must live
  under ``FEDMEM_OPENBAO_TENANT_PATH`` (``{tenant}`` replaced by its slug), so
  one tenant can never point at another tenant's secret.

Resolved values are cached in process memory for a short TTL
(``FEDMEM_CREDENTIALS_CACHE_SECONDS``) and wrapped in :class:`Secret`, whose
``repr``/``str`` never show the value; errors name the reference, never the value.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
from django.conf import settings

from core.env import env_str

ENV_SCHEME = "env"
OPENBAO_SCHEME = "openbao"
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,127}$")
_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_SECRET_BYTES = 16 * 1024


class CredentialError(Exception):
    """A reference that is malformed or cannot be resolved. The message never holds a secret."""

    code = "memory_credential_invalid"


class CredentialRefInvalid(CredentialError):
    code = "memory_credential_invalid"


class CredentialUnavailable(CredentialError):
    code = "memory_credential_unavailable"


class CredentialMissing(CredentialError):
    """The tenant has not set the credential a ``tenant_key`` engine needs."""

    code = "memory_engine_credential_missing"


class Secret:
    """A resolved credential. Printing, logging or serialising it shows ``***``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The clear value; call it only where it goes straight into a request header."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __reduce__(self) -> Any:  # pragma: no cover - guard, not behaviour
        raise TypeError("a Secret cannot be pickled")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True)
class CredentialRef:
    """A parsed reference. ``raw`` is kept for caching and storage, never shown back."""

    scheme: str
    raw: str
    env_name: str = ""
    mount: str = ""
    path: str = ""
    key: str = ""

    def __repr__(self) -> str:
        # The reference itself is not secret, but it is configuration the API never
        # echoes; the scheme is enough for a log line.
        return f"CredentialRef({self.scheme}://…)"


def parse_ref(raw: str) -> CredentialRef:
    raw = (raw or "").strip()
    if raw.startswith("env://"):
        name = raw[len("env://") :]
        if not _ENV_NAME.match(name):
            raise CredentialRefInvalid("env:// references name an upper-case environment variable.")
        prefix = settings.FEDMEM_CREDENTIAL_ENV_PREFIX
        if not name.startswith(prefix) or name == prefix:
            raise CredentialRefInvalid(f"env:// references must name a variable starting with {prefix!r}.")
        return CredentialRef(ENV_SCHEME, raw, env_name=name)
    if raw.startswith("openbao://"):
        rest = raw[len("openbao://") :]
        location, sep, key = rest.partition("#")
        segments = location.split("/")
        if not sep or len(segments) < 2 or not _KEY.match(key):
            raise CredentialRefInvalid("openbao:// references look like openbao://mount/path#key.")
        if not all(_SEGMENT.match(segment) for segment in segments):
            raise CredentialRefInvalid(
                "openbao:// mount and path segments use letters, digits, '.', '_' and '-'."
            )
        return CredentialRef(OPENBAO_SCHEME, raw, mount=segments[0], path="/".join(segments[1:]), key=key)
    raise CredentialRefInvalid("A credential reference is env://NAME or openbao://mount/path#key.")


def validate_ref(raw: str, *, tenant_slug: str | None) -> CredentialRef:
    """Parse a reference and confine a tenant's OpenBao reference to its own path."""
    ref = parse_ref(raw)
    if tenant_slug is not None and ref.scheme == OPENBAO_SCHEME:
        allowed = settings.FEDMEM_OPENBAO_TENANT_PATH.format(tenant=tenant_slug).strip("/") + "/"
        if not f"{ref.mount}/{ref.path}".startswith(allowed):
            raise CredentialRefInvalid(f"A tenant's OpenBao reference must live under {allowed!r}.")
    return ref


class _TtlCache:
    """Resolved secrets for a few seconds, so a burst of calls asks OpenBao once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, tuple[float, Secret]] = {}

    def get(self, raw: str) -> Secret | None:
        with self._lock:
            hit = self._items.get(raw)
            if hit is None:
                return None
            expires, secret = hit
            if time.monotonic() >= expires:
                del self._items[raw]
                return None
            return secret

    def put(self, raw: str, secret: Secret, ttl: float) -> None:
        if ttl <= 0:
            return
        with self._lock:
            # Bounded: references are declared by admins, but never let it grow unchecked.
            if len(self._items) >= 1024:
                self._items.clear()
            self._items[raw] = (time.monotonic() + ttl, secret)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_cache = _TtlCache()


def clear_cache() -> None:
    _cache.clear()


def resolve(ref: CredentialRef | str) -> Secret:
    """The secret a reference points to, from the short cache or its source."""
    if isinstance(ref, str):
        ref = parse_ref(ref)
    cached = _cache.get(ref.raw)
    if cached is not None:
        return cached
    secret = _resolve_env(ref) if ref.scheme == ENV_SCHEME else _resolve_openbao(ref)
    _cache.put(ref.raw, secret, settings.FEDMEM_CREDENTIALS_CACHE_SECONDS)
    return secret


def _resolve_env(ref: CredentialRef) -> Secret:
    value = env_str(ref.env_name)
    if not value:
        raise CredentialUnavailable(f"The environment variable {ref.env_name} is not set.")
    return Secret(value)


def _resolve_openbao(ref: CredentialRef) -> Secret:
    address = settings.FEDMEM_OPENBAO_ADDR
    if not address:
        raise CredentialUnavailable(
            "FEDMEM_OPENBAO_ADDR is not set; openbao:// references cannot be resolved."
        )
    token = env_str("FEDMEM_OPENBAO_TOKEN")
    if not token:
        raise CredentialUnavailable(
            "FEDMEM_OPENBAO_TOKEN is not set; openbao:// references cannot be resolved."
        )
    headers = {"X-Vault-Token": token, "Accept": "application/json"}
    if settings.FEDMEM_OPENBAO_NAMESPACE:
        headers["X-Vault-Namespace"] = settings.FEDMEM_OPENBAO_NAMESPACE
    url = f"{address.rstrip('/')}/v1/{quote(ref.mount)}/data/{quote(ref.path)}"
    verify: Any = settings.FEDMEM_OPENBAO_CA_FILE or True
    where = f"openbao {ref.mount}/{ref.path}"
    try:
        # OpenBao is the operator's own infrastructure (often on a private address),
        # so it is not an engine egress; still: no redirects, no proxies from the
        # environment, a short timeout.
        with httpx.Client(
            timeout=settings.FEDMEM_OPENBAO_TIMEOUT_SECONDS,
            follow_redirects=False,
            trust_env=False,
            verify=verify,
        ) as client:
            response = client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        raise CredentialUnavailable(f"{where}: OpenBao is unreachable ({exc.__class__.__name__}).") from None
    if response.status_code == 404:
        raise CredentialUnavailable(f"{where}: no such secret.")
    if response.status_code in (401, 403):
        raise CredentialUnavailable(f"{where}: the OpenBao token was refused.")
    if response.status_code != 200:
        raise CredentialUnavailable(f"{where}: OpenBao answered {response.status_code}.")
    try:
        data = response.json()["data"]["data"]
    except (ValueError, KeyError, TypeError):
        raise CredentialUnavailable(f"{where}: not a KV v2 answer.") from None
    value = data.get(ref.key) if isinstance(data, dict) else None
    if not isinstance(value, str) or not value:
        raise CredentialUnavailable(f"{where}: the secret has no key {ref.key!r}.")
    if len(value.encode("utf-8")) > MAX_SECRET_BYTES:
        raise CredentialUnavailable(f"{where}: the value is larger than {MAX_SECRET_BYTES} bytes.")
    return Secret(value)
