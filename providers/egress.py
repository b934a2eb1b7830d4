"""The one guarded HTTP client every call to an engine goes through.

Rules, each enforced in the transport so that provider SDKs handed this client
cannot bypass them:

* only the instance's declared scheme, host and port — anything else is refused
  before a socket is opened;
* the host is resolved once, every answer is checked (loopback, private,
  link-local, CGNAT, multicast, reserved, unspecified, IPv4 embedded in IPv6 …
  are refused unless the instance is marked for development) and the connection
  goes to the checked address, so a second DNS answer cannot rebind it; TLS
  still verifies the declared name (SNI + hostname check);
* redirects are never followed: every 3xx answer is refused;
* TLS verified (system store plus ``FEDMEM_ENGINES_CA_FILE``);
* a timeout on every phase, clamped to the caller's deadline;
* a W3C ``traceparent`` header on every request;
* plain ``http://`` refused unless ``FEDMEM_ENGINES_ALLOW_HTTP`` or ``DEBUG``.

Proxies from the environment are ignored (``trust_env=False``): a proxy would
connect on our behalf to an address we never checked.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import secrets
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings

Resolver = Callable[[str, int], list[str]]

_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


class EgressError(Exception):
    """An outbound call that did not happen or did not finish. Never holds a secret."""

    reason = "egress_error"
    retryable = False

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        if reason:
            self.reason = reason


class EgressRefused(EgressError):
    """Refused by policy (host, port, address, scheme, redirect): retrying cannot help."""

    reason = "egress_refused"
    retryable = False


class EgressTimeout(EgressError):
    reason = "timeout"
    retryable = True


class EgressUnavailable(EgressError):
    """The engine could not be reached (DNS failure, connection refused, reset, TLS)."""

    reason = "unreachable"
    retryable = True


# --- addresses -------------------------------------------------------------------

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# Registry blocks newer than this Python's ipaddress tables (it calls them global).
_NOT_GLOBAL = (
    ipaddress.ip_network("192.0.0.8/32"),  # IPv4 dummy address, RFC 7600
    ipaddress.ip_network("3fff::/20"),  # documentation, RFC 9637
)


def address_refusal(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why an address may not be contacted outside development, or None if it may."""
    if isinstance(ip, ipaddress.IPv6Address):
        # An IPv4 address carried inside IPv6 is judged as that IPv4 address.
        embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            inner = address_refusal(embedded)
            return f"embedded IPv4 address is {inner}" if inner else "IPv4 embedded in IPv6"
    checks = (
        ("loopback", ip.is_loopback),
        ("unspecified", ip.is_unspecified),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved),
        ("private", ip.is_private),
        ("shared address space (CGNAT)", isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT),
        ("site-local", isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local),
        ("documentation", any(ip in net for net in _NOT_GLOBAL if net.version == ip.version)),
        ("not globally routable", not ip.is_global),
    )
    for label, hit in checks:
        if hit:
            return label
    return None


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: list[str] = []
    for info in infos:
        address = str(info[4][0]).split("%", 1)[0]
        if address not in seen:
            seen.append(address)
    return seen


def resolve_checked(host: str, port: int, *, allow_private: bool, resolver: Resolver | None = None) -> str:
    """Resolve ``host`` once, check every answer, return the address to connect to."""
    try:
        literal = ipaddress.ip_address(host.strip("[]"))
        addresses = [str(literal)]
    except ValueError:
        try:
            addresses = (resolver or system_resolver)(host, port)
        except (OSError, UnicodeError) as exc:
            raise EgressUnavailable(
                f"{host} does not resolve ({exc.__class__.__name__}).", reason="dns"
            ) from None
    if not addresses:
        raise EgressUnavailable(f"{host} does not resolve.", reason="dns")
    for address in addresses:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            raise EgressRefused(
                f"{host} resolved to a malformed address.", reason="address_refused"
            ) from None
        refusal = None if allow_private else address_refusal(ip)
        if refusal:
            # Refuse the whole name, not just this answer: a name that mixes public and
            # private answers is how rebinding attacks start.
            raise EgressRefused(f"{host} resolves to a {refusal} address.", reason="address_refused")
    return addresses[0]


# --- traceparent -----------------------------------------------------------------


def traceparent(parent: str | None = None) -> str:
    """A W3C traceparent: the caller's trace id continued with a new span, or a new trace."""
    match = _TRACEPARENT.match((parent or "").strip().lower())
    if match and match.group(1) != "ff" and set(match.group(2)) != {"0"} and set(match.group(3)) != {"0"}:
        return f"00-{match.group(2)}-{secrets.token_hex(8)}-{match.group(4)}"
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


# --- policy ----------------------------------------------------------------------


@dataclass(frozen=True)
class EgressPolicy:
    """Where one engine instance may be reached, and how."""

    scheme: str
    host: str
    port: int
    timeout: float
    allow_private: bool = False
    tls_verify: bool = True
    allow_http: bool = False
    ca_file: str | None = None
    resolver: Resolver | None = field(default=None, compare=False)

    @classmethod
    def for_url(
        cls,
        base_url: str,
        *,
        timeout: float,
        allow_private: bool = False,
        tls_verify: bool = True,
        resolver: Resolver | None = None,
    ) -> EgressPolicy:
        parts = urlsplit(base_url)
        try:
            # The client parses it again: what it would refuse later is refused here, as policy.
            httpx.URL(base_url)
        except httpx.InvalidURL:
            raise EgressRefused("The engine URL is not a valid URL.", reason="url_refused") from None
        scheme = (parts.scheme or "").lower()
        if scheme not in {"http", "https"} or not parts.hostname:
            raise EgressRefused("An engine URL is http(s)://host[:port]/…", reason="scheme_refused")
        try:
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError:
            raise EgressRefused("The engine URL has an invalid port.", reason="port_refused") from None
        return cls(
            scheme=scheme,
            host=parts.hostname.lower(),
            port=port,
            timeout=timeout,
            allow_private=allow_private,
            tls_verify=tls_verify,
            allow_http=bool(settings.FEDMEM_ENGINES_ALLOW_HTTP or settings.DEBUG),
            ca_file=settings.FEDMEM_ENGINES_CA_FILE or None,
            resolver=resolver,
        )

    def check_url(self, url: httpx.URL) -> None:
        """Refuse anything but the declared origin — before any socket exists."""
        scheme = url.scheme.lower()
        if scheme != self.scheme:
            raise EgressRefused(
                f"Scheme {scheme!r} is not the engine's declared scheme.", reason="scheme_refused"
            )
        if scheme == "http" and not self.allow_http:
            raise EgressRefused(
                "Plain HTTP to engines is refused; use https or set FEDMEM_ENGINES_ALLOW_HTTP.",
                reason="http_refused",
            )
        if (url.host or "").lower() != self.host:
            raise EgressRefused(
                "The request targets a host the engine did not declare.", reason="host_refused"
            )
        port = url.port or (443 if scheme == "https" else 80)
        if port != self.port:
            raise EgressRefused(
                "The request targets a port the engine did not declare.", reason="port_refused"
            )


# Requests go out as headers then body: without NODELAY, Nagle holds the body back
# until the engine ACKs the headers, which a delayed ACK can stretch by milliseconds.
_SOCKET_OPTIONS = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]

_ssl_lock = threading.Lock()
_ssl_contexts: dict[str | None, ssl.SSLContext] = {}


def _ssl_context(ca_file: str | None) -> ssl.SSLContext:
    # Building a context reads the system trust store (milliseconds); share one per CA file.
    with _ssl_lock:
        context = _ssl_contexts.get(ca_file)
        if context is None:
            context = ssl.create_default_context()
            if ca_file:
                context.load_verify_locations(cafile=ca_file)
            _ssl_contexts[ca_file] = context
        return context


def _verify(policy: EgressPolicy) -> ssl.SSLContext | bool:
    return _ssl_context(policy.ca_file) if policy.tls_verify else False


class _Guard:
    """What the sync and async transports share: checks, pinning, headers, errors."""

    def __init__(self, policy: EgressPolicy, *, trace_parent: str | None, deadline: float | None) -> None:
        self.policy = policy
        self.trace_parent = trace_parent
        self.deadline = deadline

    def timeout(self) -> float:
        limit = self.policy.timeout
        if self.deadline is not None:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise EgressTimeout("The call's deadline passed before it was sent.")
            limit = min(limit, remaining)
        return limit

    def prepare(self, request: httpx.Request, address: str) -> None:
        limit = self.timeout()
        host = self.policy.host
        request.url = request.url.copy_with(host=address)
        # The Host header was fixed from the declared name when the request was built;
        # SNI and certificate verification also use the declared name, not the address.
        name = f"[{host}]" if ":" in host else host
        default_port = 443 if self.policy.scheme == "https" else 80
        request.headers["Host"] = name if self.policy.port == default_port else f"{name}:{self.policy.port}"
        request.headers["traceparent"] = traceparent(self.trace_parent)
        request.extensions = {
            **request.extensions,
            "sni_hostname": host,
            "timeout": {"connect": limit, "read": limit, "write": limit, "pool": limit},
        }

    @staticmethod
    def refuse_redirect(response: httpx.Response) -> None:
        if 300 <= response.status_code < 400:
            raise EgressRefused(
                f"The engine answered a redirect ({response.status_code}); redirects are never followed.",
                reason="redirect_refused",
            )

    @staticmethod
    def translate(exc: httpx.HTTPError) -> EgressError:
        if isinstance(exc, httpx.TimeoutException):
            return EgressTimeout(f"The engine did not answer in time ({exc.__class__.__name__}).")
        return EgressUnavailable(f"The engine could not be reached ({exc.__class__.__name__}).")


class GuardedTransport(httpx.BaseTransport):
    def __init__(
        self,
        policy: EgressPolicy,
        *,
        trace_parent: str | None = None,
        deadline: float | None = None,
    ):
        self._guard = _Guard(policy, trace_parent=trace_parent, deadline=deadline)
        self._inner = httpx.HTTPTransport(
            verify=_verify(policy), retries=0, trust_env=False, socket_options=_SOCKET_OPTIONS
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        policy = self._guard.policy
        policy.check_url(request.url)
        self._guard.timeout()
        address = resolve_checked(
            policy.host, policy.port, allow_private=policy.allow_private, resolver=policy.resolver
        )
        self._guard.prepare(request, address)
        try:
            response = self._inner.handle_request(request)
        except httpx.HTTPError as exc:
            raise self._guard.translate(exc) from None
        try:
            self._guard.refuse_redirect(response)
        except EgressRefused:
            response.close()
            raise
        return response

    def close(self) -> None:
        self._inner.close()


class AsyncGuardedTransport(httpx.AsyncBaseTransport):
    def __init__(
        self,
        policy: EgressPolicy,
        *,
        trace_parent: str | None = None,
        deadline: float | None = None,
    ):
        self._guard = _Guard(policy, trace_parent=trace_parent, deadline=deadline)
        self._inner = httpx.AsyncHTTPTransport(
            verify=_verify(policy), retries=0, trust_env=False, socket_options=_SOCKET_OPTIONS
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        policy = self._guard.policy
        policy.check_url(request.url)
        self._guard.timeout()
        address = await asyncio.to_thread(
            resolve_checked,
            policy.host,
            policy.port,
            allow_private=policy.allow_private,
            resolver=policy.resolver,
        )
        self._guard.prepare(request, address)
        try:
            response = await self._inner.handle_async_request(request)
        except httpx.HTTPError as exc:
            raise self._guard.translate(exc) from None
        try:
            self._guard.refuse_redirect(response)
        except EgressRefused:
            await response.aclose()
            raise
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def _netloc_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _client_kwargs(policy: EgressPolicy, headers: dict[str, str] | None) -> dict[str, Any]:
    return {
        # An IPv6 literal keeps its brackets, or the URL would read its last group as the port.
        "base_url": f"{policy.scheme}://{_netloc_host(policy.host)}:{policy.port}",
        "headers": headers or {},
        "timeout": policy.timeout,
        "follow_redirects": False,
        "trust_env": False,
    }


def guarded_client(
    policy: EgressPolicy,
    *,
    headers: dict[str, str] | None = None,
    trace_parent: str | None = None,
    deadline: float | None = None,
) -> httpx.Client:
    """An httpx client that can only reach ``policy``'s origin, under its rules."""
    transport = GuardedTransport(policy, trace_parent=trace_parent, deadline=deadline)
    return httpx.Client(transport=transport, **_client_kwargs(policy, headers))


def guarded_async_client(
    policy: EgressPolicy,
    *,
    headers: dict[str, str] | None = None,
    trace_parent: str | None = None,
    deadline: float | None = None,
) -> httpx.AsyncClient:
    transport = AsyncGuardedTransport(policy, trace_parent=trace_parent, deadline=deadline)
    return httpx.AsyncClient(transport=transport, **_client_kwargs(policy, headers))


def find_egress_error(exc: BaseException | None) -> EgressError | None:
    """SDKs wrap transport errors in their own types; find ours in the chain."""
    seen = 0
    while exc is not None and seen < 16:
        if isinstance(exc, EgressError):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None
