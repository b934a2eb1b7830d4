"""Brute-force limits: failed console logins and API keys are throttled per address
and per account (429 with Retry-After), the lockout is audited, and the right
password does not get in while it lasts."""

from __future__ import annotations

import secrets

import pytest
from rest_framework.test import APIClient

from conftest import assert_error, bearer
from governance.models import AuditEvent
from governance.services.audit import subject_hash
from governance.tests import factories as f


def _login(client, username: str, password: str, address: str = "10.0.0.1"):
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


def test_forty_wrong_passwords_then_the_right_one_does_not_log_in(world, client):
    statuses = [_login(client, "owner", f"wrong-{i}").status_code for i in range(40)]
    assert statuses[:10] == [200] * 10  # the form again, with its error
    assert set(statuses[10:]) == {429}
    locked = _login(client, "owner", "pw-for-tests")
    assert locked.status_code == 429
    assert 0 < int(locked["Retry-After"]) <= 15 * 60
    assert b"Too many failed attempts" in locked.content
    assert "_auth_user_id" not in client.session
    assert client.get("/").status_code == 302  # still sent to the login page
    # Audited once, naming the account and the address by keyed hash only.
    events = list(AuditEvent.objects.filter(action="auth.lockout"))
    assert len(events) == 1
    assert events[0].data["account_hash"] == subject_hash("owner")
    assert events[0].data["address_hash"] == subject_hash("10.0.0.1")
    assert "owner" not in str(events[0].data) and "10.0.0.1" not in str(events[0].data)


def test_the_lockout_also_holds_on_the_admin_login(world, client):
    for i in range(10):
        _login(client, "owner", f"wrong-{i}")
    world.owner.is_staff = True
    world.owner.save()
    client.post(
        "/admin/login/?next=/admin/",
        {"username": "owner", "password": "pw-for-tests"},
        REMOTE_ADDR="10.0.0.1",
    )
    assert "_auth_user_id" not in client.session


def test_an_account_lockout_follows_the_account_to_another_address(world, client):
    for i in range(10):
        _login(client, "owner", f"wrong-{i}", address="10.0.0.1")
    assert _login(client, "owner", "pw-for-tests", address="10.9.9.9").status_code == 429
    # Another account from that other address is not affected.
    assert _login(client, "teammate", "pw-for-tests", address="10.9.9.9").status_code == 302


def test_an_address_lockout_covers_every_account_from_it(world, client):
    for i in range(50):
        _login(client, f"nobody-{i}", "x", address="10.0.0.2")
    assert _login(client, "owner", "pw-for-tests", address="10.0.0.2").status_code == 429
    assert _login(client, "owner", "pw-for-tests", address="10.0.0.3").status_code == 302


def test_a_good_login_resets_the_account_counter(world, client):
    for i in range(9):
        _login(client, "owner", f"wrong-{i}")
    assert _login(client, "owner", "pw-for-tests").status_code == 302
    client.post("/logout/")
    for i in range(9):
        assert _login(client, "owner", f"wrong-again-{i}").status_code == 200


def _random_key() -> str:
    return f"fm_{secrets.token_hex(6)}_{secrets.token_urlsafe(24)}"


def test_random_api_keys_from_one_address_are_throttled(world):
    client = APIClient(REMOTE_ADDR="10.0.0.5")
    statuses = []
    for _ in range(60):
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {_random_key()}")
        statuses.append(client.get("/v1/me").status_code)
    assert statuses[:50] == [401] * 50
    assert set(statuses[50:]) == {429}
    # A valid key from that address waits too; from another address it works.
    good = f.agent_key(world.agent)
    locked = APIClient(REMOTE_ADDR="10.0.0.5")
    locked.credentials(HTTP_AUTHORIZATION=f"Bearer {good}")
    error = assert_error(locked.get("/v1/me"), 429, "rate_limited")
    assert "Too many failed attempts" in error["message"]
    assert int(locked.get("/v1/me")["Retry-After"]) > 0
    assert bearer(good).get("/v1/me", REMOTE_ADDR="10.0.0.6").status_code == 200
    assert AuditEvent.objects.filter(action="auth.lockout", data__channel="api_key").count() == 1


def test_guessing_one_keys_secret_locks_that_key_everywhere(world):
    good = f.agent_key(world.agent)
    prefix = good.split("_")[1]
    for i in range(10):
        client = APIClient(REMOTE_ADDR=f"10.1.0.{i}")
        client.credentials(HTTP_AUTHORIZATION=f"Bearer fm_{prefix}_{secrets.token_urlsafe(24)}")
        assert client.get("/v1/me").status_code == 401
    client = APIClient(REMOTE_ADDR="10.2.0.1")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {good}")
    assert_error(client.get("/v1/me"), 429, "rate_limited")


@pytest.mark.parametrize("rate", ["10/15minute", "3/second", "off"])
def test_rates_parse(rate):
    from core.env import parse_rate

    assert parse_rate(rate, name="X") in {(10, 900), (3, 1), None}


def _other_process(failures: int) -> str:
    """Another web process (its own interpreter) of the same deployment: records
    ``failures`` failed logins for the account, then says whether it is locked."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from django.db import connection

    script = (
        "import django; django.setup()\n"
        "from governance.lockout import lockout_check, lockout_record_failure\n"
        f"for _ in range({failures}):\n"
        "    lockout_record_failure(address='10.9.9.9', account='victim', channel='console')\n"
        "print('LOCKED' if lockout_check(address='10.9.9.8', account='victim') else 'OPEN')\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "fedmem_site.settings.test",
        "FEDMEM_DB_NAME": connection.settings_dict["NAME"],
        "FEDMEM_AUTH_FAILURES_PER_ACCOUNT": "10/hour",
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def test_the_account_limit_holds_across_web_processes(world, settings):
    """fedmem_run starts several web processes: failures counted in one count in all
    (no Redis here: the counter table). Per-process counters would give an attacker
    the limit once per process."""
    from governance.lockout import lockout_check, lockout_record_failure

    settings.FEDMEM_AUTH_FAILURES_PER_ACCOUNT = "10/hour"
    for _ in range(6):
        assert lockout_record_failure(address="10.0.0.1", account="victim", channel="console") is None
    assert _other_process(3) == "OPEN"  # 9 of 10, from two processes
    locked = lockout_record_failure(address="10.0.0.2", account="victim", channel="console")
    assert locked is not None and locked.kind == "account"  # the tenth, here
    assert lockout_check(address="10.0.0.3", account="victim") is not None
    assert _other_process(0) == "LOCKED"  # and there
