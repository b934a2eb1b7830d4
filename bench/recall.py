"""Recall latency and write throughput of the builtin memory engine.

    .venv/bin/python bench/recall.py               # 10,000 items
    .venv/bin/python bench/recall.py --items 100000

Loads N generated memories with real embeddings (computed once with the
configured model and cached under var/bench/, so reruns are quick) into a
database of its own (FEDMEM_DB_NAME, default ``fedmem_bench``), then:

* runs 200 recalls through the API layer (DRF test client: authentication,
  permission gate, policy, retrieval, serialization and framing), and prints
  p50/p95/p99 latency;
* writes fresh memories through the batch endpoint (100 per request) and prints
  items/s, next to the bare embedding throughput of the same model on the same
  texts in the same run, and the ratio of the two;
* prints the machine: cores, RAM, CPU model, PostgreSQL and pgvector versions.

Not a test: it asserts nothing, it measures.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import statistics
import sys
import time
from pathlib import Path

from machine import machine

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")
os.environ.setdefault("FEDMEM_DB_NAME", "fedmem_bench")
os.environ.setdefault("FEDMEM_LOG_LEVEL", "WARNING")

CHUNK = 10_000
USERS = 100

NAMES = [
    "Ava", "Ben", "Chloe", "Dmitri", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemi", "Liam",
    "Maya", "Nikolai", "Olga", "Pedro", "Quinn", "Rosa", "Sven", "Tara", "Umar", "Vera", "Wen", "Yusuf",
]  # fmt: skip
COMPANIES = [
    "Acme",
    "Globex",
    "Initech",
    "Umbrella",
    "Hooli",
    "Vandelay",
    "Stark",
    "Wayne",
    "Tyrell",
    "Soylent",
]
SERVICES = [
    "checkout", "billing", "search", "auth", "notifications", "reporting", "inventory", "payments",
    "shipping", "recommendations", "profile", "export", "import", "scheduler", "gateway", "ledger",
]  # fmt: skip
REGIONS = ["eu-west", "eu-central", "us-east", "us-west", "ap-south", "ap-northeast", "sa-east"]
SYMPTOMS = [
    "timed out", "returned 500 errors", "slowed to a crawl", "dropped messages", "double-charged users",
    "served stale data", "ran out of memory", "lost its database connection", "rejected valid tokens",
    "stopped sending e-mails", "leaked file handles", "queued jobs forever",
]  # fmt: skip
CAUSES = [
    "an expired TLS certificate", "a missing database index", "a bad feature flag", "a full disk",
    "a connection pool set too small", "a retry storm from mobile clients", "clock skew between nodes",
    "a schema migration that locked the orders table", "a DNS change", "a noisy neighbour on the host",
    "a memory leak in the image resizer", "a cache stampede after a deploy",
]  # fmt: skip
FIXES = [
    "rolled back the release", "added the index", "raised the pool size", "rotated the certificate",
    "cleared the cache", "scaled the workers out", "pinned the client library", "turned the flag off",
]  # fmt: skip
CHANNELS = ["e-mail", "Slack", "phone", "SMS", "the customer portal", "WhatsApp", "Teams"]
TOPICS = [
    "invoices", "renewals", "outage updates", "feature launches", "security notices", "onboarding",
    "training sessions", "contract changes", "usage reports", "price changes",
]  # fmt: skip
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
PRODUCTS = ["the mobile app", "the web dashboard", "the API", "the desktop client", "the admin console"]


def generate_texts(count: int, seed: int) -> list[str]:
    """Deterministic, varied, realistic memories; the first k texts are the same for any count."""
    rng = random.Random(seed)
    templates = [
        lambda: (
            f"Deploy {rng.randint(100, 9999)} of {rng.choice(SERVICES)} {rng.choice(SYMPTOMS)} in "
            f"{rng.choice(REGIONS)} because of {rng.choice(CAUSES)}; "
            f"the on-call engineer {rng.choice(FIXES)}."
        ),
        lambda: (
            f"{rng.choice(NAMES)} from {rng.choice(COMPANIES)} prefers {rng.choice(CHANNELS)} for "
            f"{rng.choice(TOPICS)} and asked not to be contacted on {rng.choice(DAYS)}s."
        ),
        lambda: (
            f"Ticket {rng.randint(10000, 99999)}: {rng.choice(PRODUCTS)} {rng.choice(SYMPTOMS)} for "
            f"{rng.choice(COMPANIES)} after the {rng.choice(SERVICES)} upgrade; support {rng.choice(FIXES)}."
        ),
        lambda: (
            f"{rng.choice(COMPANIES)} renews its contract in {rng.choice(DAYS)} meetings and wants "
            f"{rng.choice(TOPICS)} summarised before each quarterly review."
        ),
        lambda: (
            f"The {rng.choice(SERVICES)} service depends on {rng.choice(SERVICES)} and fails over to "
            f"{rng.choice(REGIONS)} when {rng.choice(CAUSES)} hits the primary region."
        ),
        lambda: (
            f"{rng.choice(NAMES)} reported that {rng.choice(PRODUCTS)} {rng.choice(SYMPTOMS)} while "
            f"exporting {rng.choice(TOPICS)}; root cause was {rng.choice(CAUSES)}."
        ),
    ]
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < count:
        text = rng.choice(templates)()
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def generate_queries(count: int) -> list[str]:
    rng = random.Random(7)
    forms = [
        lambda: f"why did {rng.choice(SERVICES)} fail in {rng.choice(REGIONS)}",
        lambda: f"how does {rng.choice(NAMES)} want to hear about {rng.choice(TOPICS)}",
        lambda: f"what went wrong with {rng.choice(PRODUCTS)} for {rng.choice(COMPANIES)}",
        lambda: f"incidents caused by {rng.choice(CAUSES)}",
        lambda: f"ticket {rng.randint(10000, 99999)}",
    ]
    return [rng.choice(forms)() for _ in range(count)]


def cached_embeddings(texts: list[str], cache_dir: Path, model_tag: str):  # type: ignore[no-untyped-def]
    """Embed in chunks of 10k, each cached under var/bench/ by model and content."""
    import numpy as np

    from memory.embeddings import embed_texts

    cache_dir.mkdir(parents=True, exist_ok=True)
    parts = []
    for start in range(0, len(texts), CHUNK):
        chunk = texts[start : start + CHUNK]
        digest = hashlib.sha256("\n".join(chunk).encode()).hexdigest()[:16]
        path = cache_dir / f"{model_tag}-{start // CHUNK:03d}-{digest}.npy"
        if path.exists():
            parts.append(np.load(path))
            continue
        began = time.perf_counter()
        vectors = embed_texts(chunk)
        np.save(path, vectors)
        print(
            f"  embedded {start + len(chunk):,}/{len(texts):,} ({time.perf_counter() - began:.0f}s)",
            flush=True,
        )
        parts.append(vectors)
    return np.concatenate(parts) if parts else np.zeros((0, 384), dtype="float32")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=10_000, help="memories to load (default 10000)")
    parser.add_argument("--recalls", type=int, default=200, help="recalls to time (default 200)")
    parser.add_argument(
        "--writes", type=int, default=1_000, help="memories to write for throughput (default 1000)"
    )
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection, transaction
    from rest_framework.test import APIClient

    from governance.models import Agent, Role
    from governance.services.agents import agent_create, api_key_create
    from governance.services.tenancy import membership_grant, tenant_get_or_create
    from memory.embeddings import configured_model_path, embed_texts, get_embedder
    from memory.models import MemoryItem
    from memory.pii import detect_personal_data, get_analyzer
    from memory.text import content_hash

    call_command("migrate", verbosity=0)
    info = machine()
    print(f"machine: {info['cores']} cores, {info['ram']} RAM, {info['cpu']}")
    # Other work on the same cores skews every figure below; say how busy it was.
    print("load average at start: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('server_version'), extversion FROM pg_extension WHERE extname='vector'"
        )
        pg, vec = cursor.fetchone()
    import torch

    get_embedder()  # applies FEDMEM_TORCH_THREADS
    get_analyzer()
    print(
        f"postgres {pg}, pgvector {vec}, torch threads {torch.get_num_threads()}, "
        f"db {settings.DATABASES['default']['NAME']}"
    )
    print(f"model: {configured_model_path()}")

    tenant = tenant_get_or_create(slug="bench", name="Bench")
    other = tenant_get_or_create(slug="bench-other", name="Bench (other tenant)")
    from governance.models import User

    owner, _ = User.objects.get_or_create(username="bench-owner")
    membership_grant(user=owner, tenant=tenant, role=Role.DEVELOPER)
    agents = {}
    for t, name in ((tenant, "bench-agent"), (other, "bench-foreign")):
        agents[name] = Agent.objects.filter(tenant=t, name=name).first() or agent_create(
            tenant=t, name=name, created_by=owner
        )
    agent = agents["bench-agent"]

    # --- load ------------------------------------------------------------------------
    texts = generate_texts(args.items, seed=1)
    model_tag = hashlib.sha256(str(configured_model_path()).encode()).hexdigest()[:8]
    began = time.perf_counter()
    vectors = cached_embeddings(texts, ROOT / "var" / "bench", model_tag)
    print(f"embeddings ready: {len(texts):,} in {time.perf_counter() - began:.1f}s (cached under var/bench/)")
    signature = hashlib.sha256(f"{args.items}:{model_tag}".encode()).hexdigest()[:12]
    loaded = MemoryItem.objects.filter(tenant__in=[tenant, other], source=f"bench:{signature}").count()
    if loaded != args.items:
        began = time.perf_counter()
        # Memory normally goes through the services (and their legal-hold checks);
        # this throwaway bench database is emptied directly.
        MemoryItem.objects.filter(tenant__in=[tenant, other]).delete()
        from memory.models.items import MemoryItem as Model

        index = next(i for i in Model._meta.indexes if i.name == "memory_item_embedding_hnsw")
        with connection.schema_editor() as editor:
            editor.remove_index(Model, index)  # building once after the load is much faster
        rng = random.Random(3)
        rows = []
        for n, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
            foreign = n % 20 == 19  # 5% in another tenant: must never be returned
            user_scoped = rng.random() < 0.3
            owner_agent = agents["bench-foreign"] if foreign else agent
            rows.append(
                MemoryItem(
                    tenant_id=owner_agent.tenant_id,
                    agent=owner_agent,
                    user_id=f"user-{rng.randrange(USERS)}" if user_scoped else "",
                    scope="user" if user_scoped else "agent",
                    scopes=["user" if user_scoped else "agent"],
                    content=text,
                    content_hash=content_hash(text),
                    embedding=vector,
                    source=f"bench:{signature}",
                    provenance={"via": "bench"},
                )
            )
            if len(rows) == 5000:
                MemoryItem.objects.bulk_create(rows)
                rows = []
        if rows:
            MemoryItem.objects.bulk_create(rows)
        print(
            f"loaded {args.items:,} rows in {time.perf_counter() - began:.1f}s; building the HNSW index...",
            flush=True,
        )
        began = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute("SET maintenance_work_mem = '1GB'")
        with connection.schema_editor() as editor:
            editor.add_index(Model, index)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE memory_item")
        print(f"index built in {time.perf_counter() - began:.1f}s")
    else:
        print(f"reusing {loaded:,} loaded rows")

    # --- recall through the API layer ---------------------------------------------------
    from governance.models import ApiKey

    ApiKey.objects.filter(agent=agent).delete()
    _, secret = api_key_create(tenant=tenant, agent=agent, name="bench")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    url = f"/v1/memory/agents/{agent.pk}/recall"
    queries = generate_queries(args.recalls + 10)
    rng = random.Random(11)

    def recall(query: str) -> float:
        body = {
            "query": query,
            "user_id": f"user-{rng.randrange(USERS)}",
            "scopes": ["user", "agent"],
            "top_k": 8,
        }
        began = time.perf_counter()
        response = client.post(url, body, format="json")
        elapsed = time.perf_counter() - began
        assert response.status_code == 200, response.content
        return elapsed

    for query in queries[:10]:
        recall(query)  # warm-up: connections, caches, first-call paths
    latencies = [recall(query) * 1000 for query in queries[10:]]
    embed_ms = []
    for query in queries[10:60]:
        began = time.perf_counter()
        embed_texts([query])
        embed_ms.append((time.perf_counter() - began) * 1000)
    print(
        f"recall over {args.items:,} items ({len(latencies)} requests, top_k 8, hybrid): "
        f"p50 {percentile(latencies, 0.5):.1f} ms, p95 {percentile(latencies, 0.95):.1f} ms, "
        f"p99 {percentile(latencies, 0.99):.1f} ms, mean {statistics.mean(latencies):.1f} ms "
        f"(of which query embedding p50 {percentile(embed_ms, 0.5):.1f} ms)"
    )

    # --- write throughput ----------------------------------------------------------------
    fresh = [f"{text} (batch {n})" for n, text in enumerate(generate_texts(args.writes, seed=99))]
    batch_url = f"/v1/memory/agents/{agent.pk}/memories/batch"
    # Interleaved chunk by chunk, so a change in machine load hits both figures alike.
    write_s = embed_s = pii_s = 0.0
    for start in range(0, len(fresh), 100):
        chunk = fresh[start : start + 100]
        began = time.perf_counter()
        response = client.post(
            batch_url, {"items": [{"content": t, "scope": "agent"} for t in chunk]}, format="json"
        )
        write_s += time.perf_counter() - began
        assert response.status_code == 201, response.content
        began = time.perf_counter()
        embed_texts(chunk)
        embed_s += time.perf_counter() - began
        began = time.perf_counter()
        detect_personal_data(chunk)
        pii_s += time.perf_counter() - began
    write_rate, embed_rate, pii_rate = (len(fresh) / seconds for seconds in (write_s, embed_s, pii_s))
    with transaction.atomic():
        MemoryItem.objects.filter(agent=agent, source="").delete()  # the written items; keep the loaded set
    print(
        f"batch writes through the API: {write_rate:.0f} items/s; bare embedding of the same texts: "
        f"{embed_rate:.0f} texts/s; ratio {write_rate / embed_rate:.2f} "
        f"(personal-data detection alone: {pii_rate:.0f} texts/s)"
    )
    print("load average at end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
