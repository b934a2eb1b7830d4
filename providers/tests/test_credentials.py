"""Credential references: env:// and openbao:// (KV v2), resolved at call time,
cached briefly, never shown."""

from __future__ import annotations

import logging

import pytest

from providers import credentials
from providers.credentials import (
    CredentialRefInvalid,
    CredentialUnavailable,
    Secret,
    parse_ref,
    resolve,
    validate_ref,
)
from providers.tests.servers import LocalServer, Resp

TOKEN = "s.test-openbao-token"


def kv2_server(secrets: dict[str, dict[str, str]]) -> LocalServer:
    """Speaks the KV v2 read API: GET /v1/{mount}/data/{path} with X-Vault-Token."""
    server = LocalServer().start()

    def read(req):
        if req.headers.get("x-vault-token") != TOKEN:
            return Resp(403, {"errors": ["permission denied"]})
        key = f"{req.params['mount']}/{req.params['path']}"
        if key not in secrets:
            return Resp(404, {"errors": []})
        return Resp(
            200,
            {
                "request_id": "r-1",
                "lease_id": "",
                "renewable": False,
                "lease_duration": 0,
                "data": {
                    "data": secrets[key],
                    "metadata": {
                        "created_time": "2026-01-01T00:00:00Z",
                        "version": 3,
                        "deletion_time": "",
                        "destroyed": False,
                    },
                },
                "wrap_info": None,
                "warnings": None,
                "auth": None,
            },
        )

    server.route("GET", r"/v1/(?P<mount>[^/]+)/data/(?P<path>.+)", read)
    return server


@pytest.fixture
def openbao(settings, monkeypatch):
    server = kv2_server(
        {
            "secret/fedmem/tenants/acme/mem0": {"api_key": "m0-acme-secret"},
            "secret/platform/zep": {"api_key": "zep-platform-secret"},
        }
    )
    settings.FEDMEM_OPENBAO_ADDR = server.url
    monkeypatch.setenv("FEDMEM_OPENBAO_TOKEN", TOKEN)
    yield server
    server.stop()


def test_env_reference_resolves_at_call_time(monkeypatch):
    monkeypatch.setenv("FEDMEM_CRED_MEM0", "first")
    assert resolve("env://FEDMEM_CRED_MEM0").reveal() == "first"


def test_env_reference_may_come_from_a_file(monkeypatch, tmp_path):
    path = tmp_path / "key"
    path.write_text("from-file\n")
    monkeypatch.setenv("FEDMEM_CRED_FILEKEY_FILE", str(path))
    assert resolve("env://FEDMEM_CRED_FILEKEY").reveal() == "from-file"


def test_env_reference_outside_the_prefix_is_refused():
    for ref in [
        "env://DATABASE_URL",
        "env://FEDMEM_SECRET_KEY",
        "env://FEDMEM_CRED_",
        "env://lower",
    ]:
        with pytest.raises(CredentialRefInvalid):
            parse_ref(ref)


def test_unset_env_reference_is_unavailable():
    with pytest.raises(CredentialUnavailable):
        resolve("env://FEDMEM_CRED_NOT_SET_ANYWHERE")


def test_openbao_reference_reads_kv_v2(openbao):
    assert resolve("openbao://secret/platform/zep#api_key").reveal() == "zep-platform-secret"
    request = openbao.requests[-1]
    assert request.path == "/v1/secret/data/platform/zep"
    assert request.headers["x-vault-token"] == TOKEN


def test_openbao_results_are_cached_for_the_ttl(openbao, settings):
    for _ in range(3):
        resolve("openbao://secret/platform/zep#api_key")
    assert len(openbao.requests) == 1
    credentials.clear_cache()
    settings.FEDMEM_CREDENTIALS_CACHE_SECONDS = 0  # no cache: every call asks
    resolve("openbao://secret/platform/zep#api_key")
    resolve("openbao://secret/platform/zep#api_key")
    assert len(openbao.requests) == 3


def test_openbao_failures_are_unavailable_and_name_no_secret(openbao, monkeypatch):
    with pytest.raises(CredentialUnavailable, match="no such secret"):
        resolve("openbao://secret/platform/missing#api_key")
    with pytest.raises(CredentialUnavailable, match="no key"):
        resolve("openbao://secret/platform/zep#other")
    monkeypatch.setenv("FEDMEM_OPENBAO_TOKEN", "wrong")
    with pytest.raises(CredentialUnavailable, match="refused") as info:
        resolve("openbao://secret/fedmem/tenants/acme/mem0#api_key")
    assert "wrong" not in str(info.value)


def test_openbao_down_is_unavailable(openbao):
    openbao.stop()
    with pytest.raises(CredentialUnavailable, match="unreachable"):
        resolve("openbao://secret/platform/zep#api_key")


def test_openbao_without_token_is_unavailable(openbao, monkeypatch):
    monkeypatch.delenv("FEDMEM_OPENBAO_TOKEN")
    with pytest.raises(CredentialUnavailable, match="FEDMEM_OPENBAO_TOKEN"):
        resolve("openbao://secret/platform/zep#api_key")


@pytest.mark.parametrize(
    "ref",
    [
        "openbao://secret",
        "openbao://secret/path",
        "openbao://secret/../x#k",
        "openbao://secret/p#",
        "vault://secret/p#k",
        "https://example.com",
        "",
        "env://",
    ],
)
def test_malformed_references_are_refused(ref):
    with pytest.raises(CredentialRefInvalid):
        parse_ref(ref)


def test_a_tenant_reference_is_confined_to_its_own_path():
    validate_ref("openbao://secret/fedmem/tenants/acme/mem0#api_key", tenant_slug="acme")
    for foreign in [
        "openbao://secret/fedmem/tenants/globex/mem0#api_key",
        "openbao://secret/platform/zep#api_key",
        "openbao://secret/fedmem/tenants/acme-evil/x#k",
    ]:
        with pytest.raises(CredentialRefInvalid):
            validate_ref(foreign, tenant_slug="acme")
    validate_ref("openbao://secret/platform/zep#api_key", tenant_slug=None)  # platform admins


def test_a_secret_never_shows_its_value(monkeypatch, caplog):
    monkeypatch.setenv("FEDMEM_CRED_SHOWN", "top-secret-value")
    secret = resolve("env://FEDMEM_CRED_SHOWN")
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("test").info("secret is %s / %r / %s", secret, secret, [secret])
    assert "top-secret-value" not in caplog.text
    assert "top-secret-value" not in f"{secret} {secret!r} {[secret]}"
    assert secret == Secret("top-secret-value")
