"""Fixtures shared by the providers tests."""

from __future__ import annotations

import pytest

from providers import credentials
from providers.tests.servers import LocalServer


@pytest.fixture(autouse=True)
def _engines_settings(settings):
    # Test engines are local HTTP servers on 127.0.0.1: allow plain HTTP for them.
    # Loopback still needs allow_development_hosts on each instance.
    settings.FEDMEM_ENGINES_ALLOW_HTTP = True
    settings.FEDMEM_CREDENTIALS_CACHE_SECONDS = 60
    credentials.clear_cache()
    yield
    credentials.clear_cache()


@pytest.fixture
def local_server():
    servers: list[LocalServer] = []

    def make(**kwargs) -> LocalServer:
        server = LocalServer(**kwargs)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()
