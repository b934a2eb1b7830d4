"""Live contract tests against a provider account of your own (skipped by default).

Set ``FEDMEM_LIVE=1`` and, per provider, ``FEDMEM_LIVE_<PROVIDER>_URL`` and
``FEDMEM_LIVE_<PROVIDER>_KEY`` (for example ``FEDMEM_LIVE_MEM0_URL=https://api.mem0.ai``,
``FEDMEM_LIVE_ZEP_URL=https://api.getzep.com/api/v4``); Cognee sign-in takes
``FEDMEM_LIVE_COGNEE_AUTH=login`` and ``<email>:<password>`` as the key. Each test
writes under a fresh tenant slug, follows the write until the provider settles it
(bounded), reads it back, proves another tenant cannot reach it, and cleans up.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest

from providers.adapters.base import AdapterError, EngineConfig, NewRecord
from providers.adapters.registry import adapter_class
from providers.credentials import Secret
from providers.tests.adapters.helpers import ctx

LIVE = os.environ.get("FEDMEM_LIVE") == "1"
SETTLE_SECONDS = float(os.environ.get("FEDMEM_LIVE_SETTLE_SECONDS", "180"))


def _live_adapter(provider: str):
    prefix = f"FEDMEM_LIVE_{provider.upper()}"
    url, secret = os.environ.get(f"{prefix}_URL"), os.environ.get(f"{prefix}_KEY")
    if not (LIVE and url):
        pytest.skip(f"set FEDMEM_LIVE=1 and {prefix}_URL / {prefix}_KEY to run against your account")
    options = {"auth": os.environ[f"{prefix}_AUTH"]} if os.environ.get(f"{prefix}_AUTH") else {}
    config = EngineConfig(
        engine_id=f"live-{provider}", provider=provider, base_url=url, timeout_seconds=30.0, options=options
    )
    return adapter_class(provider)(config, credential=lambda: Secret(secret) if secret else None)


def _settle(adapter, context, result):
    deadline = time.monotonic() + SETTLE_SECONDS
    while result.status == "queued" and result.handle:
        outcome = adapter.check_write(context, result.handle)
        if outcome.status != "queued":
            assert outcome.status == "settled", outcome.reason
            return outcome
        if time.monotonic() > deadline:
            pytest.fail(f"{adapter.provider} did not settle within {SETTLE_SECONDS} s")
        time.sleep(2)
    return None


@pytest.mark.parametrize("provider", ["mem0", "mem0_server", "zep", "graphiti", "langgraph"])
def test_remember_settles_recalls_and_stays_in_its_tenant(provider):
    adapter = _live_adapter(provider)
    tenant = f"fedmem-live-{uuid.uuid4().hex[:8]}"
    mine = ctx("remember", tenant_slug=tenant, user_id="live-user")
    text = f"The live contract check {uuid.uuid4().hex[:6]} prefers green tea"
    result = adapter.perform("remember", mine, record=NewRecord(text))
    _settle(adapter, mine, result)
    try:
        hits = adapter.perform(
            "recall", mine.for_operation("recall"), query="what tea is preferred", top_k=10
        )
        assert any("green tea" in h.text for h in hits), [h.text for h in hits]
        other = ctx("recall", tenant_slug=f"{tenant}-other", user_id="live-user")
        assert not any(text in h.text for h in adapter.perform("recall", other, query=text, top_k=10))
        for hit in hits:
            if adapter.supports("get"):
                with pytest.raises(AdapterError) as info:
                    adapter.perform("get", other.for_operation("get"), external_id=hit.external_id)
                assert info.value.reason == "not_found"
    finally:
        if adapter.supports("purge"):
            adapter.perform("purge", mine.for_operation("purge"))


def test_cognee_cognify_settles():
    adapter = _live_adapter("cognee")
    tenant = f"fedmem-live-{uuid.uuid4().hex[:8]}"
    mine = ctx("ingest_knowledge", tenant_slug=tenant)
    adapter.perform("ingest_knowledge", mine, dataset="live", documents=["Alice leads the robotics team."])
    try:
        built = adapter.perform("build_graph", mine.for_operation("build_graph"), dataset="live")
        _settle(adapter, mine, built)
    finally:
        adapter.perform("delete_dataset", mine.for_operation("delete_dataset"), dataset="live")
