"""Egress proofs: the guarded client opens no socket to a special-purpose address,
however the address is spelled, follows no redirect whatever its 3xx code, and
cannot be rebound by a resolver that answers public first and private next.

Sockets are counted at ``socket.socket.connect``: the counter refuses every connect
it sees, so even a broken guard would open nothing during these tests. The figures
are printed (run with ``-s`` or read the captured output)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections import Counter

import httpx
import pytest

from providers.egress import (
    EgressError,
    EgressPolicy,
    EgressRefused,
    address_refusal,
    guarded_async_client,
    guarded_client,
)
from providers.tests.servers import Resp

# One or more addresses from every block of the IANA IPv4 and IPv6 special-purpose
# address registries that is not globally reachable, plus multicast and broadcast.
SPECIAL_V4 = {
    "this network 0.0.0.0/8": ["0.0.0.0", "0.1.2.3"],
    "private 10/8": ["10.0.0.1", "10.255.255.254"],
    "CGNAT 100.64/10": ["100.64.0.1", "100.127.255.254"],
    "loopback 127/8": ["127.0.0.1", "127.1.2.3"],
    "link-local 169.254/16": ["169.254.169.254", "169.254.0.1"],
    "private 172.16/12": ["172.16.0.1", "172.31.255.254"],
    "IETF protocol 192.0.0/24": ["192.0.0.1", "192.0.0.8", "192.0.0.170"],
    "TEST-NET-1 192.0.2/24": ["192.0.2.1"],
    "private 192.168/16": ["192.168.0.1", "192.168.255.254"],
    "benchmarking 198.18/15": ["198.18.0.1", "198.19.255.254"],
    "TEST-NET-2 198.51.100/24": ["198.51.100.7"],
    "TEST-NET-3 203.0.113/24": ["203.0.113.9"],
    "multicast 224/4": ["224.0.0.1", "239.255.255.250"],
    "reserved 240/4": ["240.0.0.1", "250.1.2.3"],
    "broadcast": ["255.255.255.255"],
}
SPECIAL_V6 = {
    "loopback ::1": ["::1"],
    "unspecified ::": ["::"],
    "IPv4-mapped ::ffff:0:0/96": ["::ffff:7f00:1", "::ffff:a9fe:a9fe"],
    "IPv4-compatible ::/96": ["::7f00:1"],
    "IPv4/IPv6 translation 64:ff9b::/96 (private v4 inside)": ["64:ff9b::a00:1"],
    "local-use translation 64:ff9b:1::/48": ["64:ff9b:1::1"],
    "discard 100::/64": ["100::1"],
    "IETF protocol 2001::/23": ["2001::1", "2001:2::1", "2001:10::1"],
    "documentation 2001:db8::/32": ["2001:db8::1"],
    "documentation 3fff::/20": ["3fff::1"],
    "6to4 2002::/16 (private v4 inside)": ["2002:a00:1::1", "2002:7f00:1::"],
    "segment routing 5f00::/16": ["5f00::1"],
    "unique local fc00::/7": ["fc00::1", "fd12:3456:789a::1"],
    "link-local fe80::/10": ["fe80::1"],
    "site-local fec0::/10": ["fec0::1"],
    "multicast ff00::/8": ["ff02::1", "ff05::1:3"],
}


def spellings_v4(address: str) -> set[str]:
    """The ways an IPv4 address gets written: libc's inet_aton forms and IPv6 wrappings."""
    a, b, c, d = (int(part) for part in address.split("."))
    n = int(ipaddress.IPv4Address(address))
    high, low = n >> 16, n & 0xFFFF
    return {
        address,
        str(n),  # decimal
        f"0x{n:08x}",  # hex
        f"0{a:o}.0{b:o}.0{c:o}.0{d:o}",  # octal
        f"0x{a:x}.0x{b:x}.0x{c:x}.0x{d:x}",  # hex dotted
        f"{a}.{b}.{(c << 8) | d}",  # a.b.c short form
        f"{a}.{(b << 16) | (c << 8) | d}",  # a.b short form
        f"{a:03d}.{b:03d}.{c:03d}.{d:03d}",  # zero padded (read as octal by libc)
        f"[::ffff:{address}]",  # IPv4-mapped, dotted
        f"[::ffff:{high:x}:{low:x}]",  # IPv4-mapped, hex
        f"[0:0:0:0:0:ffff:{address}]",  # IPv4-mapped, expanded
        f"[64:ff9b::{address}]",  # NAT64
        f"[2002:{high:x}:{low:x}::1]",  # 6to4
    }


def spellings_v6(address: str) -> set[str]:
    ip = ipaddress.IPv6Address(address)
    return {f"[{ip.compressed}]", f"[{ip.exploded}]", f"[{ip.exploded.upper()}]"}


def all_targets() -> list[tuple[str, str]]:
    targets = []
    for label, addresses in SPECIAL_V4.items():
        targets += [(label, spelling) for address in addresses for spelling in spellings_v4(address)]
    for label, addresses in SPECIAL_V6.items():
        targets += [(label, spelling) for address in addresses for spelling in spellings_v6(address)]
    return targets


@pytest.fixture
def connects(monkeypatch):
    """Every socket connect attempted in this test, refused before it happens."""
    attempts: list[object] = []

    def refuse(self, address, *args):
        attempts.append(address)
        raise ConnectionRefusedError("connects are counted and refused in egress proofs")

    def refuse_ex(self, address, *args):
        attempts.append(address)
        return 111

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse_ex)
    return attempts


def test_every_special_address_in_every_spelling_is_refused_without_a_socket(connects, capsys):
    outcomes: Counter[str] = Counter()
    escaped: list[str] = []
    for label, host in all_targets():
        for scheme in ("https", "http"):
            try:
                policy = EgressPolicy.for_url(f"{scheme}://{host}:8443/", timeout=2.0)
                with guarded_client(policy) as client:
                    client.get("/v1/health")
            except EgressRefused as exc:
                outcomes[exc.reason] += 1
                continue
            except EgressError as exc:
                outcomes[exc.reason] += 1
                escaped.append(f"{label}: {scheme}://{host} was not refused ({exc.reason}: {exc})")
                continue
            escaped.append(f"{label}: {scheme}://{host} answered")
    with capsys.disabled():
        print(
            f"\negress proofs: {len(all_targets())} spellings of {sum(map(len, SPECIAL_V4.values()))} IPv4 "
            f"and {sum(map(len, SPECIAL_V6.values()))} IPv6 special-purpose addresses x 2 schemes: "
            f"{sum(outcomes.values())} calls, {len(connects)} connections opened, outcomes {dict(outcomes)}"
        )
    assert connects == []
    assert not escaped, "\n".join(escaped)


def test_the_async_client_refuses_them_too(connects):
    async def run() -> list[str]:
        escaped = []
        for label, host in all_targets()[::5]:
            try:
                policy = EgressPolicy.for_url(f"https://{host}/", timeout=2.0)
                async with guarded_async_client(policy) as client:
                    await client.get("/")
            except EgressRefused:
                continue
            except EgressError as exc:
                escaped.append(f"{label}: {host} ({exc.reason})")
        return escaped

    assert asyncio.run(run()) == []
    assert connects == []


def test_every_registry_block_is_refused_by_the_address_check():
    for label, addresses in {**SPECIAL_V4, **SPECIAL_V6}.items():
        for address in addresses:
            assert address_refusal(ipaddress.ip_address(address)), f"{label}: {address} would be contacted"
    for public in ("93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "1.1.1.1", "2a00:1450:4001::1"):
        assert address_refusal(ipaddress.ip_address(public)) is None


def test_a_resolver_answering_public_then_private_never_reaches_the_private_address(connects, capsys):
    answers = [["93.184.216.34"], ["127.0.0.1"], ["93.184.216.34", "10.0.0.7"], ["10.0.0.7", "93.184.216.34"]]
    calls = {"n": 0}

    def rebinding(host: str, port: int) -> list[str]:
        answer = answers[min(calls["n"], len(answers) - 1)]
        calls["n"] += 1
        return answer

    policy = EgressPolicy.for_url("https://engine.example/", timeout=2.0, resolver=rebinding)
    reasons = []
    with guarded_client(policy) as client:
        for _ in answers:
            with pytest.raises(EgressError) as info:
                client.get("/v1/health")
            reasons.append(info.value.reason)
    # One resolution per request: the connect goes to the checked public address
    # (refused here by the counter), every answer holding a private address is refused.
    assert reasons == ["unreachable", "address_refused", "address_refused", "address_refused"]
    targets = [ipaddress.ip_address(address[0]) for address in connects]
    special = [ip for ip in targets if address_refusal(ip)]
    with capsys.disabled():
        print(
            f"\negress rebinding: {len(answers)} requests, {calls['n']} resolutions, "
            f"{len(connects)} connect attempts (all to {sorted({str(t) for t in targets})}), "
            f"{len(special)} to a special-purpose address"
        )
    assert special == []
    assert [str(t) for t in targets] == ["93.184.216.34"]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_no_3xx_code_is_ever_followed(local_server, capsys, asynchronous):
    server = local_server().start()
    targets = {
        "/to-path": "/elsewhere",
        "/to-private": "http://10.0.0.7/elsewhere",
        "/to-other-host": "https://engine.example/elsewhere",
        "/to-loopback-name": f"http://localhost:{server.port}/elsewhere",
    }
    codes = list(range(300, 400))
    for source, location in targets.items():
        server.route(
            "GET",
            source + "/(?P<code>[0-9]+)",
            lambda req, location=location: Resp(int(req.params["code"]), {}, {"Location": location}),
        )
    server.route("GET", "/elsewhere", lambda req: Resp(200, {"followed": True}))
    policy = EgressPolicy.for_url(server.url, timeout=5.0, allow_private=True)

    def sync_calls() -> list[str]:
        reasons = []
        with guarded_client(policy) as client:
            for source in targets:
                for code in codes:
                    try:
                        client.get(f"{source}/{code}", follow_redirects=True)
                        reasons.append("followed")
                    except EgressError as exc:
                        reasons.append(exc.reason)
        return reasons

    async def async_calls() -> list[str]:
        reasons = []
        async with guarded_async_client(policy) as client:
            for source in targets:
                for code in codes:
                    try:
                        await client.get(f"{source}/{code}", follow_redirects=True)
                        reasons.append("followed")
                    except EgressError as exc:
                        reasons.append(exc.reason)
        return reasons

    reasons = asyncio.run(async_calls()) if asynchronous else sync_calls()
    followed = [r for r in server.requests if r.path == "/elsewhere"]
    with capsys.disabled():
        print(
            f"\negress redirects ({'async' if asynchronous else 'sync'}): {len(codes)} codes x "
            f"{len(targets)} targets = {len(reasons)} calls, {len(followed)} redirects followed, "
            f"outcomes {dict(Counter(reasons))}"
        )
    assert followed == []
    assert set(reasons) == {"redirect_refused"}
    assert len(server.requests) == len(codes) * len(targets)


def test_ipv6_literal_engines_are_reachable_when_declared(local_server):
    """The declared origin keeps its brackets: an IPv6 engine URL is a valid base URL."""
    policy = EgressPolicy.for_url("https://[2001:db8::1]:8443/", timeout=1.0)
    with guarded_client(policy) as client, pytest.raises(EgressRefused) as info:
        client.get("/x")
    assert info.value.reason == "address_refused"
    assert isinstance(client.base_url, httpx.URL)
