from __future__ import annotations

import pytest


def test_health_answers_without_database(client):
    response = client.get("/health")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_ready_checks_database_and_broker(client):
    response = client.get("/ready")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "checks": {"database": "ok", "broker": "ok"}}


@pytest.mark.django_db
def test_ready_reports_an_unreachable_broker(client):
    from fedmem_site.celery import app

    original = app.conf.broker_url
    app.conf.broker_url = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    try:
        response = client.get("/ready")
    finally:
        app.conf.broker_url = original
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "not_ready"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["broker"].startswith("unavailable")


@pytest.mark.django_db
def test_ready_waits_for_a_serving_process_to_load_its_models(client, monkeypatch):
    import threading

    from core import warmup

    monkeypatch.setattr(warmup, "_started", threading.Event())
    monkeypatch.setattr(warmup, "_done", threading.Event())
    assert warmup.begin() and not warmup.begin()  # once per process
    response = client.get("/ready")
    assert response.status_code == 503
    assert response.json()["checks"] == {"database": "ok", "broker": "ok", "models": "loading"}
    warmup.finish()
    response = client.get("/ready")
    assert response.status_code == 200
    checks = {"database": "ok", "broker": "ok", "models": "ok"}
    assert response.json() == {"status": "ready", "checks": checks}
