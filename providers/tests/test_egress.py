"""The guarded egress client: declared origin only, checked addresses, no redirects,
timeouts, traceparent, plain HTTP only when allowed."""

from __future__ import annotations

import ipaddress

import httpx
import pytest

from providers.egress import (
    EgressPolicy,
    EgressRefused,
    EgressTimeout,
    EgressUnavailable,
    address_refusal,
    guarded_client,
    resolve_checked,
    traceparent,
)
from providers.tests.servers import Resp


def _policy(url: str, **kwargs) -> EgressPolicy:
    kwargs.setdefault("timeout", 5.0)
    kwargs.setdefault("allow_private", True)
    return EgressPolicy.for_url(url, **kwargs)


@pytest.mark.parametrize("code", [300, 301, 302, 303, 304, 305, 307, 308])
def test_every_redirect_is_refused(local_server, code):
    server = local_server().start()
    server.route("GET", "/start", lambda req: Resp(code, {}, {"Location": f"{server.url}/elsewhere"}))
    server.route("GET", "/elsewhere", lambda req: Resp(200, {"ok": True}))
    with guarded_client(_policy(server.url)) as client, pytest.raises(EgressRefused) as info:
        client.get("/start")
    assert info.value.reason == "redirect_refused"
    assert [r.path for r in server.requests] == ["/start"]  # the target was never asked


def test_a_redirect_is_refused_even_when_the_caller_asks_to_follow(local_server):
    server = local_server().start()
    server.route("GET", "/start", lambda req: Resp(302, {}, {"Location": "/elsewhere"}))
    with guarded_client(_policy(server.url)) as client, pytest.raises(EgressRefused):
        client.get("/start", follow_redirects=True)
    assert [r.path for r in server.requests] == ["/start"]


def test_undeclared_port_is_refused_without_a_socket(local_server):
    server = local_server().start()
    declared = local_server().start()
    with guarded_client(_policy(declared.url)) as client, pytest.raises(EgressRefused) as info:
        client.get(f"{server.url}/anything")
    assert info.value.reason == "port_refused"
    assert server.connections == 0 and declared.connections == 0


def test_undeclared_host_is_refused_without_a_socket(local_server):
    server = local_server().start()
    with guarded_client(_policy(server.url)) as client, pytest.raises(EgressRefused) as info:
        client.get(f"http://localhost:{server.port}/anything")
    assert info.value.reason == "host_refused"
    assert server.connections == 0


def test_a_name_resolving_to_a_private_address_is_refused(local_server):
    server = local_server().start()
    # DNS is the network boundary: a resolver answering as a hostile zone would.
    policy = EgressPolicy.for_url(
        f"http://engine.example:{server.port}",
        timeout=5.0,
        resolver=lambda host, port: ["10.1.2.3"],
    )
    with guarded_client(policy) as client, pytest.raises(EgressRefused) as info:
        client.get("/x")
    assert info.value.reason == "address_refused"
    assert "private" in str(info.value)


def test_a_name_with_one_private_answer_among_public_ones_is_refused():
    with pytest.raises(EgressRefused):
        resolve_checked(
            "engine.example",
            443,
            allow_private=False,
            resolver=lambda host, port: ["93.184.216.34", "192.168.1.5"],
        )


def test_localhost_is_refused_outside_development(local_server):
    server = local_server().start()
    policy = EgressPolicy.for_url(f"http://localhost:{server.port}", timeout=5.0)
    with guarded_client(policy) as client, pytest.raises(EgressRefused) as info:
        client.get("/x")
    assert "loopback" in str(info.value)
    assert server.connections == 0


def test_the_connection_goes_to_the_checked_address_with_the_declared_host(local_server):
    server = local_server().start()
    server.route("GET", "/x", lambda req: Resp(200, {"host": req.headers["host"]}))
    calls = []

    def resolver(host, port):
        calls.append(host)
        return ["127.0.0.1"]

    policy = EgressPolicy.for_url(
        f"http://engine.test:{server.port}", timeout=5.0, allow_private=True, resolver=resolver
    )
    with guarded_client(policy) as client:
        body = client.get("/x").json()
    assert calls == ["engine.test"]  # resolved once, by us
    assert body["host"] == f"engine.test:{server.port}"


@pytest.mark.parametrize(
    ("address", "label"),
    [
        ("127.0.0.1", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.0.1", "private"),
        ("169.254.169.254", "link-local"),
        ("100.64.1.1", "CGNAT"),
        ("224.0.0.1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("240.0.0.1", "reserved"),
        ("::1", "loopback"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.0.0.1", "private"),
        ("2002:7f00:1::", "loopback"),
        ("64:ff9b::a00:1", "private"),
        ("ff02::1", "multicast"),
    ],
)
def test_special_addresses_are_refused(address, label):
    refusal = address_refusal(ipaddress.ip_address(address))
    assert refusal is not None and label.lower() in refusal.lower()


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "1.1.1.1"])
def test_public_addresses_pass(address):
    assert address_refusal(ipaddress.ip_address(address)) is None


def test_a_slow_engine_is_cut_at_the_timeout(local_server):
    server = local_server().start()

    def slow(req):
        server.sleep(10)
        return Resp(200, {"late": True})

    server.route("GET", "/slow", slow)
    with guarded_client(_policy(server.url, timeout=0.2)) as client, pytest.raises(EgressTimeout):
        client.get("/slow")


def test_a_passed_deadline_sends_nothing(local_server):
    import time

    server = local_server().start()
    with (
        guarded_client(_policy(server.url), deadline=time.monotonic() - 1) as client,
        pytest.raises(EgressTimeout),
    ):
        client.get("/x")
    assert server.connections == 0


def test_plain_http_is_refused_unless_allowed(local_server, settings):
    server = local_server().start()
    settings.FEDMEM_ENGINES_ALLOW_HTTP = False
    settings.DEBUG = False
    with guarded_client(_policy(server.url)) as client, pytest.raises(EgressRefused) as info:
        client.get("/x")
    assert info.value.reason == "http_refused"
    assert server.connections == 0
    settings.DEBUG = True
    server.route("GET", "/x", lambda req: Resp(200, {}))
    with guarded_client(_policy(server.url)) as client:
        assert client.get("/x").status_code == 200


def test_unreachable_engine_is_unavailable(local_server):
    server = local_server().start()
    url = server.url
    server.stop()
    with guarded_client(_policy(url)) as client, pytest.raises(EgressUnavailable):
        client.get("/x")


def test_traceparent_is_sent_and_continues_the_callers_trace(local_server):
    server = local_server().start()
    server.route("GET", "/x", lambda req: Resp(200, {}))
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    with guarded_client(_policy(server.url), trace_parent=parent) as client:
        client.get("/x")
    with guarded_client(_policy(server.url)) as client:
        client.get("/x")
    continued, fresh = (r.headers["traceparent"] for r in server.requests)
    assert continued.startswith("00-4bf92f3577b34da6a3ce929d0e0e4736-") and not continued.endswith(
        "00f067aa0ba902b7-01"
    )
    assert len(fresh.split("-")) == 4 and fresh.split("-")[1] != "4bf92f3577b34da6a3ce929d0e0e4736"


def test_malformed_traceparent_starts_a_new_trace():
    for bad in [
        "",
        "garbage",
        "00-" + "0" * 32 + "-" + "1" * 16 + "-01",
        "ff-" + "a" * 32 + "-" + "b" * 16 + "-01",
    ]:
        value = traceparent(bad)
        assert value.startswith("00-") and "0" * 32 not in value


def test_environment_proxies_are_ignored(local_server, monkeypatch):
    server = local_server().start()
    server.route("GET", "/x", lambda req: Resp(200, {"direct": True}))
    monkeypatch.setenv("HTTP_PROXY", "http://10.9.9.9:3128")
    monkeypatch.setenv("ALL_PROXY", "http://10.9.9.9:3128")
    with guarded_client(_policy(server.url)) as client:
        assert client.get("/x").json() == {"direct": True}


def test_non_http_schemes_are_refused():
    with pytest.raises(EgressRefused):
        EgressPolicy.for_url("ftp://engine.example/", timeout=1.0)
    with pytest.raises(EgressRefused):
        EgressPolicy.for_url("file:///etc/passwd", timeout=1.0)


def test_tls_is_verified_with_the_extra_ca_file(tmp_path, settings):
    """An HTTPS engine with a certificate from a private CA: refused without the CA
    file, accepted with FEDMEM_ENGINES_CA_FILE."""
    from providers.tests.tls import https_server

    def to_loopback(host, port):
        return ["127.0.0.1"]

    with https_server(tmp_path) as (url, ca_file):
        settings.FEDMEM_ENGINES_CA_FILE = None
        with (
            guarded_client(_policy(url, resolver=to_loopback)) as client,
            pytest.raises(EgressUnavailable),
        ):
            client.get("/x")
        settings.FEDMEM_ENGINES_CA_FILE = str(ca_file)
        with guarded_client(_policy(url, resolver=to_loopback)) as client:
            assert client.get("/x").json() == {"tls": True}
        # The name in the certificate is checked, not just the chain.
        policy = EgressPolicy.for_url(
            url.replace("localhost", "engine.test"),
            timeout=5.0,
            allow_private=True,
            resolver=lambda host, port: ["127.0.0.1"],
        )
        with guarded_client(policy) as client, pytest.raises(EgressUnavailable):
            client.get("/x")


def test_ssrf_via_httpx_url_tricks_is_refused(local_server):
    server = local_server().start()
    with guarded_client(_policy(server.url)) as client:
        for url in [f"http://127.0.0.1@10.0.0.1:{server.port}/", f"http://[::1]:{server.port}/"]:
            with pytest.raises((EgressRefused, httpx.InvalidURL)):
                client.get(url)
    assert server.connections == 0
