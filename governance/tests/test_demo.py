from __future__ import annotations

import io
import json

from django.core.management import call_command

from conftest import bearer
from governance.models import Agent, ApiKey, Membership, Role, User


def test_demo_is_idempotent_and_its_credentials_work(db, settings, tmp_path, client):
    settings.DATA_DIR = tmp_path
    out1, out2 = io.StringIO(), io.StringIO()
    call_command("fedmem_demo", stdout=out1)
    counts = (User.objects.count(), Agent.objects.count(), ApiKey.objects.count(), Membership.objects.count())
    call_command("fedmem_demo", stdout=out2)
    assert counts == (
        User.objects.count(),
        Agent.objects.count(),
        ApiKey.objects.count(),
        Membership.objects.count(),
    )
    # Same printed credentials on the second run.
    assert out1.getvalue() == out2.getvalue()

    creds = json.loads((tmp_path / "demo-credentials.json").read_text())
    assert {info["role"] for info in creds["users"].values()} == set(Role.values)
    assert client.login(username="officer", password=creds["users"]["officer"]["password"])
    key = creds["agents"]["support-bot"]["key"]
    assert bearer(key).get("/v1/me").json()["principal"]["name"] == "support-bot"
    assert oct((tmp_path / "demo-credentials.json").stat().st_mode & 0o777) == "0o600"


def test_demo_resets_credentials_when_the_file_is_lost(db, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    call_command("fedmem_demo", stdout=io.StringIO())
    first = json.loads((tmp_path / "demo-credentials.json").read_text())
    (tmp_path / "demo-credentials.json").unlink()
    call_command("fedmem_demo", stdout=io.StringIO())
    second = json.loads((tmp_path / "demo-credentials.json").read_text())
    assert first["users"]["admin"]["password"] != second["users"]["admin"]["password"]
    assert User.objects.get(username="admin").check_password(second["users"]["admin"]["password"])
