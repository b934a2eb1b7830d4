"""Demo memories for the demo agents: a few hundred realistic facts, seeded idempotently.

``support-bot`` remembers customers (user scope: preferences, open issues,
account facts) and what it learned about the product (agent scope);
``ops-agent`` remembers deployments, incidents and their causes. Everything
goes through the ordinary write services (policy, personal-data detection,
embedding, dedup, history); a rerun only writes what is missing.
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from django.utils import timezone

from governance.models import Agent
from memory.enforcement import system_access
from memory.models import MemoryItem
from memory.services.items import MemoryDraft, memory_remember_batch
from memory.services.sessions import session_message_append
from memory.text import content_hash

CUSTOMERS = [
    ("maria.lopez", "Maria Lopez", "Lopez Logistics"), ("kenji.sato", "Kenji Sato", "Sato Robotics"),
    ("amara.okafor", "Amara Okafor", "Okafor Health"), ("lena.fischer", "Lena Fischer", "Fischer Bau"),
    ("omar.haddad", "Omar Haddad", "Haddad Foods"), ("priya.nair", "Priya Nair", "Nair Analytics"),
    ("jonas.berg", "Jonas Berg", "Berg Maritime"), ("sofia.rossi", "Sofia Rossi", "Rossi Design"),
    ("david.cohen", "David Cohen", "Cohen Legal"), ("aiko.tanaka", "Aiko Tanaka", "Tanaka Retail"),
    ("lucas.martin", "Lucas Martin", "Martin Energy"), ("fatima.zahra", "Fatima Zahra", "Atlas Textiles"),
    ("noah.williams", "Noah Williams", "Williams Freight"), ("elif.yilmaz", "Elif Yilmaz", "Yilmaz Media"),
    ("tomas.novak", "Tomas Novak", "Novak Pharma"), ("grace.kim", "Grace Kim", "Kim Biotech"),
    ("mateo.silva", "Mateo Silva", "Silva Agro"), ("hannah.muller", "Hannah Muller", "Muller Print"),
    ("ravi.patel", "Ravi Patel", "Patel Cloudworks"), ("chloe.dubois", "Chloe Dubois", "Dubois Hotels"),
    ("ivan.petrov", "Ivan Petrov", "Petrov Mining"), ("zoe.anderson", "Zoe Anderson", "Anderson Schools"),
    ("kwame.mensah", "Kwame Mensah", "Mensah Solar"), ("ana.costa", "Ana Costa", "Costa Travel"),
]  # fmt: skip
CHANNELS = ["e-mail", "Slack Connect", "a phone call", "the customer portal", "Microsoft Teams", "SMS"]
HOURS = [
    "before 10:00 CET",
    "after lunch",
    "on Tuesday mornings",
    "late afternoon Pacific time",
    "only on Fridays",
]
LANGUAGES = ["English", "German", "Spanish", "French", "Japanese", "Portuguese"]
PLANS = ["Starter", "Team", "Business", "Enterprise"]
ISSUES = [
    "CSV exports time out for reports larger than 50,000 rows",
    "SSO logins fail intermittently since their identity provider rotated its signing key",
    "webhook deliveries to their ERP arrive twice after a retry",
    "the mobile app logs users out every morning",
    "invoices show the wrong VAT rate for deliveries to Austria",
    "dashboard charts render blank in Safari 17",
    "API requests are throttled at 100 per minute although the contract says 500",
    "scheduled reports arrive in UTC instead of their local time zone",
]
PRODUCT_NOTES = [
    "Bulk CSV exports above 50,000 rows must be run as background jobs; the synchronous export times out.",
    "Customers on the Starter plan cannot use SSO; offer the Team plan trial instead of a workaround.",
    "Refunds above 500 EUR need approval from the billing lead before they are promised to a customer.",
    "When a customer reports duplicate webhooks, ask for the delivery IDs: retries reuse the same ID.",
    "The status page is the source of truth during incidents; never give an ETA that it does not show.",
    "Safari 17 rendering problems are fixed by the 4.12 dashboard release; ask customers to hard-refresh.",
    "Rate-limit increases are applied per API key, not per account; confirm which key they use.",
    "Customers in the EU must have their data exported from the eu-central region only.",
    "Password resets are self-service; support never sets or reads passwords on a customer's behalf.",
    "A VAT-rate complaint goes to finance with the invoice number and the delivery country.",
    "Enterprise customers have a named technical account manager; loop them in on every escalation.",
    "Time-zone issues in scheduled reports are configured per workspace under Settings > Locale.",
    "Escalate security questionnaires to the trust team; support does not fill them in.",
    "The mobile app's daily logout is caused by the 24-hour refresh-token lifetime on Starter plans.",
    "Ticket priority P1 means production is down for all users; everything else is P2 or lower.",
    "Offer a call only after two unanswered e-mails; most customers prefer written updates.",
]
SERVICES = ["checkout", "billing", "search", "auth", "notifications", "reporting", "exports", "webhooks"]
REGIONS = ["eu-central", "eu-west", "us-east", "us-west", "ap-southeast"]
INCIDENTS = [
    (
        "an expired TLS certificate on the internal load balancer",
        "rotated the certificate and added expiry alerts",
    ),
    ("a missing index on orders.customer_id after the 2.31 migration", "added the index concurrently"),
    ("the connection pool capped at 20 while traffic doubled", "raised the pool to 80 and added autoscaling"),
    ("a feature flag that enabled the new pricing engine for every tenant", "turned the flag off"),
    ("the disk on the primary database filling up with WAL files", "freed space and fixed the archiver"),
    ("a retry storm from the mobile app after a 502 burst", "added jittered backoff in the client"),
    ("clock skew of 40 seconds between two token servers", "re-enabled NTP on the token hosts"),
    (
        "a cache stampede right after the deploy flushed Redis",
        "pre-warmed the cache before switching traffic",
    ),
    ("a DNS record pointing at the decommissioned queue cluster", "fixed the record and lowered its TTL"),
    ("a memory leak in the PDF renderer", "pinned the previous renderer version"),
]
SYMPTOMS = [
    "returned 502 errors", "timed out for most requests", "dropped webhook deliveries",
    "served stale search results", "double-charged a handful of customers", "rejected valid logins",
]  # fmt: skip
OPS_FACTS = [
    "Deploys to production happen Tuesday to Thursday, 09:00-15:00 CET; Friday deploys need a VP's approval.",
    "The billing service depends on the ledger database; a ledger failover pauses billing for 90 seconds.",
    "Search indexes are rebuilt nightly at 02:00 UTC; rebuilds slow search queries by roughly 30 percent.",
    "The on-call rotation hands over every Monday at 10:00 CET.",
    "Database migrations that rewrite a table over 10 GB must run in the maintenance window.",
    "The auth service caches public keys for 10 minutes; key rotations take that long to propagate.",
    "Webhook retries back off exponentially up to 6 hours, then the delivery is marked failed.",
    "Runbooks live in the ops wiki under Incidents > Playbooks; every P1 gets a postmortem within 5 days.",
    "Redis holds sessions and rate-limit counters only; losing it logs everyone out but loses no data.",
    "Traffic peaks on the first business day of each month, when customers pull invoices.",
]


def _support_memories(rng: random.Random) -> list[MemoryDraft]:
    drafts: list[MemoryDraft] = []
    for user_id, name, company in CUSTOMERS:
        plan = rng.choice(PLANS)
        facts = [
            (f"{name} prefers to be contacted through {rng.choice(CHANNELS)}, ideally {rng.choice(HOURS)}.",
             "preference"),
            (f"{name} writes in {rng.choice(LANGUAGES)} and expects replies in the same language.",
             "preference"),
            (f"{name} works at {company}, which is on the {plan} plan with {rng.randint(5, 400)} seats.",
             "fact"),
            (f"{company} reported that {rng.choice(ISSUES)}.", "episodic"),
            (f"{name} asked to be told before any maintenance that affects {rng.choice(SERVICES)}.",
             "preference"),
            (f"{company}'s contract renews in {rng.choice(['January', 'April', 'July', 'October'])}; "
             f"{name} decides on renewals.", "fact"),
        ]  # fmt: skip
        if rng.random() < 0.5:
            facts.append((f"{name} was unhappy about the response time on the last P1 ticket.", "episodic"))
        if rng.random() < 0.4:
            facts.append(
                (f"{company} needs invoices with a purchase-order number before they can pay.", "fact")
            )
        for content, kind in facts:
            drafts.append(
                MemoryDraft(content=content, kind=kind, scope="user", user_id=user_id, source="demo")
            )
    for note in PRODUCT_NOTES:
        drafts.append(MemoryDraft(content=note, kind="procedural", scope="agent", source="demo"))
    return drafts


def _ops_memories(rng: random.Random) -> list[MemoryDraft]:
    drafts = [MemoryDraft(content=fact, kind="semantic", scope="agent", source="demo") for fact in OPS_FACTS]
    for number in range(70):
        cause, fix = rng.choice(INCIDENTS)
        service, region = rng.choice(SERVICES), rng.choice(REGIONS)
        content = (
            f"Deploy {2400 + number * 7} of {service} {rng.choice(SYMPTOMS)} in {region} for "
            f"{rng.randint(4, 95)} minutes because of {cause}; the on-call engineer {fix}."
        )
        drafts.append(MemoryDraft(content=content, kind="episodic", scope="agent", source="demo"))
    return drafts


def memory_demo_seed(*, agents: dict[str, Agent]) -> dict[str, Any]:
    """Seed the demo agents' memories; returns how many exist and how many were new."""
    rng = random.Random(2024)  # noqa: S311 - demo content, not security: the same memories every run
    plans = {
        "support-bot": _support_memories(rng),
        "ops-agent": _ops_memories(rng),
    }
    created = 0
    total = 0
    for name, drafts in plans.items():
        agent = agents.get(name)
        if agent is None:
            continue
        have = set(MemoryItem.objects.filter(agent=agent).values_list("content_hash", flat=True))
        missing = [d for d in drafts if content_hash(d.content) not in have]
        access = system_access(agent)
        new_ids = []
        for start in range(0, len(missing), 100):
            results = memory_remember_batch(access=access, drafts=[*missing[start : start + 100]], via="demo")
            new_ids += [r.outcome.item.pk for r in results if r.outcome is not None and r.outcome.created]
        # Spread the new memories over the last 90 days so recency and lists look lived-in.
        now = timezone.now()
        for item_id in new_ids:
            moment = now - timedelta(days=rng.uniform(0, 90))
            MemoryItem.objects.filter(pk=item_id).update(created_at=moment, valid_from=moment)
        created += len(new_ids)
        total += MemoryItem.objects.filter(agent=agent).count()
        if name == "support-bot" and not agent.session_messages.exists():
            for role, text in [
                ("user", "Hi, our CSV export keeps timing out. Can you help?"),
                ("assistant", "Large exports run best as background jobs; I can show you how to start one."),
                ("user", "Yes please, and send the steps by e-mail."),
            ]:
                session_message_append(
                    access=access, session_id="demo-chat-1", role=role, content=text, user_id="maria.lopez"
                )
    # The demo graph datasets (five domains of causal chains, their own agents).
    graph: dict[str, Any] = {}
    anchor = next(iter(agents.values()), None)
    if anchor is not None:
        from memory.services.graph_demo import graph_demo_load

        graph = graph_demo_load(tenant=anchor.tenant, created_by=anchor.created_by)
    return {"memories": total, "created": created, "graph": graph}
