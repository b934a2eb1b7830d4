"""Settings readers fail loudly on bad values and accept *_FILE secrets."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from core.env import env_bool, env_choice, env_int, env_list, env_str


def test_bool(monkeypatch):
    monkeypatch.setenv("X_FLAG", "yes")
    assert env_bool("X_FLAG", False) is True
    monkeypatch.setenv("X_FLAG", "0")
    assert env_bool("X_FLAG", True) is False
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG='maybe' is not a boolean"):
        env_bool("X_FLAG", False)


def test_int_bounds(monkeypatch):
    monkeypatch.setenv("X_NUM", "12")
    assert env_int("X_NUM", 1) == 12
    monkeypatch.setenv("X_NUM", "twelve")
    with pytest.raises(ImproperlyConfigured, match="not an integer"):
        env_int("X_NUM", 1)
    monkeypatch.setenv("X_NUM", "0")
    with pytest.raises(ImproperlyConfigured, match="below the minimum"):
        env_int("X_NUM", 1, minimum=1)


def test_choice_and_list(monkeypatch):
    monkeypatch.setenv("X_MODE", "prod")
    with pytest.raises(ImproperlyConfigured, match="must be one of"):
        env_choice("X_MODE", "development", ("development", "production"))
    monkeypatch.setenv("X_HOSTS", "a.example, b.example,,")
    assert env_list("X_HOSTS", []) == ["a.example", "b.example"]


def test_file_variant_wins_and_missing_file_is_an_error(monkeypatch, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    monkeypatch.setenv("X_SECRET", "from-env")
    monkeypatch.setenv("X_SECRET_FILE", str(secret))
    assert env_str("X_SECRET") == "s3cret"
    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="X_SECRET_FILE"):
        env_str("X_SECRET")
