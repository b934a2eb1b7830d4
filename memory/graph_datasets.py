"""Demo graph datasets written for fedmem: multi-step causal chains in five domains.

Each chain is a sequence of events; consecutive events become one fact each
("event 1 led to event 2", "event 3 happened because of event 2", ...), told by
different agents in different sessions, so a chain only connects through the
graph. Distractor facts share words with the chain but are not part of it.

Used by ``manage.py fedmem_demo`` (memory.services.graph_demo) and as the labelled
set of ``bench/eval_reasoning.py``: the question of each chain, its facts split
across sessions, its distractors, and its gold chain (the facts in causal order).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

# How one fact states "cause -> effect"; rotated along a chain so both directions of
# wording and several connectives occur.
TEMPLATES = (
    "{C} led to {e}.",
    "{E} happened because of {c}.",
    "{C} caused {e}.",
    "{C} resulted in {e}.",
    "{E} occurred due to {c}.",
)

# Two agents per domain take turns telling a chain's facts.
AGENTS = {
    "operations": ("incident-agent", "sre-agent"),
    "supply-chain": ("procurement-agent", "logistics-agent"),
    "clinical-ops": ("ward-agent", "pharmacy-agent"),
    "finance": ("finance-agent", "treasury-agent"),
    "customer-support": ("helpdesk-agent", "success-agent"),
}

# domain -> [(question, events in causal order, distractors)]
CHAINS: dict[str, list[tuple[str, list[str], list[str]]]] = {
    "operations": [
        (
            "Why did the checkout outage happen?",
            ["verbose debug logging on db-1", "a full disk on db-1", "the primary database crash",
             "the checkout outage"],
            ["The disk on the staging laptop was replaced last week.",
             "The checkout page got a new colour scheme."],
        ),
        (
            "What caused the login failures?",
            ["an expired TLS certificate on the auth gateway", "rejected handshakes at the auth gateway",
             "the login failures", "a spike in password reset requests"],
            ["The auth gateway team moved to a new office.",
             "Password reset e-mails now use the new template."],
        ),
        (
            "Why were search results stale?",
            ["a stuck indexing queue", "a growing indexing backlog", "stale search results",
             "complaints about missing products"],
            ["The search team hired two engineers.", "The products catalogue has 40,000 entries."],
        ),
        (
            "Why did the API latency rise?",
            ["a connection pool capped at twenty", "exhausted database connections",
             "request queueing in the API", "the API latency spike"],
            ["The API documentation was translated into German.",
             "Database backups run every night at two."],
        ),
        (
            "What led to the duplicate webhook deliveries?",
            ["a retry storm from the mobile app", "overloaded webhook workers",
             "timeouts in the webhook dispatcher", "duplicate webhook deliveries"],
            ["The mobile app won a design award.", "Webhook payloads are signed with HMAC."],
        ),
        (
            "Why did the nightly reports fail?",
            ["the clock skew on the scheduler host", "the expiry of job tokens", "rejected scheduler jobs",
             "the failed nightly reports"],
            ["The nightly reports are sent as PDF files.", "The scheduler host runs Debian."],
        ),
    ],
    "supply-chain": [
        (
            "Why did the Hamburg warehouse run out of stock?",
            ["a strike at the Rotterdam port", "delayed container shipments", "the late supplier deliveries",
             "empty shelves at the Hamburg warehouse"],
            ["The Hamburg warehouse installed solar panels.", "Container prices were stable in March."],
        ),
        (
            "What caused the production line stop?",
            ["a fire at the chip supplier", "a shortage of controller chips", "the assembly backlog",
             "the production line stop"],
            ["The production line was repainted in May.", "The chip supplier sponsors a football club."],
        ),
        (
            "Why did freight costs go up?",
            ["the fuel price surge", "higher carrier surcharges", "the freight cost increase",
             "lower margins on bulky goods"],
            ["Carrier contracts are reviewed each January.", "Bulky goods ship from the north depot."],
        ),
        (
            "Why were orders shipped to the wrong addresses?",
            ["a faulty address import", "corrupted delivery labels", "misrouted parcels",
             "the customer refund wave"],
            ["Delivery labels are printed in the packing hall.", "The address book app got an update."],
        ),
        (
            "What led to the spoiled produce?",
            ["a broken cooling unit in truck 12", "warm storage during transit", "spoiled produce",
             "a write-off of fresh inventory"],
            ["Truck 12 was washed on Friday.", "Fresh inventory is counted every morning."],
        ),
        (
            "Why did the supplier audit fail?",
            ["the missing temperature logs", "incomplete quality records", "the failed supplier audit",
             "a suspended supplier contract"],
            ["The audit team uses tablets.", "Quality records are archived for ten years."],
        ),
    ],
    "clinical-ops": [
        (
            "Why were surgeries postponed on ward 3?",
            ["a flu outbreak among nurses", "a nurse staffing shortage", "closed beds on ward 3",
             "postponed surgeries"],
            ["Ward 3 got new beds in spring.", "The nurses choir performed at the gala."],
        ),
        (
            "What caused the medication delays?",
            ["a pharmacy system upgrade", "an outage of the dispensing cabinets", "manual dispensing",
             "the medication delays"],
            ["The pharmacy moved to the ground floor.", "Dispensing cabinets are cleaned daily."],
        ),
        (
            "Why did emergency waiting times grow?",
            ["a broken CT scanner", "diverted imaging requests", "slower emergency diagnoses",
             "longer emergency waiting times"],
            ["The CT scanner vendor sent a newsletter.", "Emergency staff wear blue uniforms."],
        ),
        (
            "What led to the lab result errors?",
            ["an uncalibrated blood analyser", "skewed potassium readings", "the lab result errors",
             "repeated blood draws"],
            ["The blood bank opened a new donor room.", "Lab results are available in the portal."],
        ),
        (
            "Why were patients readmitted?",
            ["rushed discharge briefings", "confused patients at home", "post-operative infections",
             "the patient readmissions"],
            ["Follow-up appointments can be booked online.", "Discharge forms were redesigned."],
        ),
        (
            "Why did the infection rate rise on ward 7?",
            ["a shortage of hand sanitiser", "lapses in hand hygiene", "the spread of a resistant bacterium",
             "the higher infection rate on ward 7"],
            ["Ward 7 celebrated its tenth anniversary.", "Hand sanitiser dispensers are white."],
        ),
    ],
    "finance": [
        (
            "Why did the quarterly profit fall?",
            ["the euro depreciation", "higher import costs", "squeezed gross margins",
             "the quarterly profit decline"],
            ["The quarterly report has a new cover.", "The euro coins were redesigned."],
        ),
        (
            "What caused the cash shortfall?",
            ["late payments from the largest customer", "overdue receivables", "a drained cash buffer",
             "the cash shortfall"],
            ["The largest customer opened a store in Lyon.", "Cash registers were replaced."],
        ),
        (
            "Why was the bond rating downgraded?",
            ["the failed refinancing", "rising short-term debt", "weaker debt coverage",
             "the bond rating downgrade"],
            ["The bond desk moved to the fifth floor.", "Rating agencies publish annual outlooks."],
        ),
        (
            "Why were vendor invoices paid twice?",
            ["a duplicated vendor record", "double invoice matching", "duplicate vendor payments",
             "a reconciliation gap"],
            ["Vendor invoices arrive by e-mail.", "The reconciliation team uses spreadsheets."],
        ),
        (
            "What led to the audit finding?",
            ["an unapproved journal entry", "a misstated revenue figure", "the audit finding",
             "a delayed annual report"],
            ["The annual report is printed on recycled paper.", "Journal entries are numbered."],
        ),
        (
            "Why did the budget overrun?",
            ["an unplanned software licence renewal", "higher IT spending", "the budget overrun",
             "a hiring freeze"],
            ["Software licences are listed in the asset register.", "IT spending is reported monthly."],
        ),
    ],
    "customer-support": [
        (
            "Why did ticket volume spike?",
            ["a confusing billing e-mail", "a wave of billing questions", "the ticket volume spike",
             "slower first responses"],
            ["Billing e-mails are sent on the first of the month.", "The ticket tool got dark mode."],
        ),
        (
            "Why did Lopez Logistics churn?",
            ["repeated CSV export timeouts", "a stalled month-end close at Lopez Logistics",
             "an escalation from Lopez Logistics", "the Lopez Logistics churn"],
            ["Lopez Logistics opened a depot in Valencia.", "CSV exports support semicolons."],
        ),
        (
            "What caused the satisfaction score drop?",
            ["an understaffed night shift", "long chat queues", "abandoned chats",
             "the satisfaction score drop"],
            ["The night shift has a new coffee machine.", "Chat transcripts are kept for a year."],
        ),
        (
            "Why were refunds delayed?",
            ["a payment provider migration", "failed refund API calls", "a refund backlog",
             "the delayed refunds"],
            ["The payment provider sponsors a conference.", "Refund policies are on the website."],
        ),
        (
            "What led to the wrong answers from the help bot?",
            ["an outdated help centre article", "a wrong help bot answer about VAT",
             "misinformed customers", "a rise in VAT complaints"],
            ["The help centre has 300 articles.", "VAT rates are set by each country."],
        ),
        (
            "Why did the enterprise renewal slip?",
            ["the missing SSO feature", "a stalled rollout at Sato Robotics", "low adoption at Sato Robotics",
             "the slipped enterprise renewal"],
            ["Sato Robotics builds warehouse robots.", "SSO settings live under security."],
        ),
    ],
}  # fmt: skip


@dataclass(frozen=True)
class DemoFact:
    domain: str
    chain: int  # index of the chain in its domain; -1 for a distractor
    step: int  # position in the chain (0 = the root cause's fact)
    agent: str
    session: str
    content: str


def _fact_text(step: int, cause: str, effect: str) -> str:
    template = TEMPLATES[step % len(TEMPLATES)]
    return template.format(
        C=cause[0].upper() + cause[1:], c=cause, E=effect[0].upper() + effect[1:], e=effect
    )


def facts(domains: list[str] | None = None) -> list[DemoFact]:
    """Every fact of the datasets: chain facts (one per causal step) and distractors."""
    out: list[DemoFact] = []
    for domain, chains in CHAINS.items():
        if domains is not None and domain not in domains:
            continue
        first, second = AGENTS[domain]
        for index, (_question, events, distractors) in enumerate(chains):
            for step, (cause, effect) in enumerate(itertools.pairwise(events)):
                agent = first if step % 2 == 0 else second
                session = f"{domain}-{index}-{step}"
                out.append(
                    DemoFact(domain, index, step, agent, session, _fact_text(index + step, cause, effect))
                )
            for n, text in enumerate(distractors):
                out.append(
                    DemoFact(domain, -1, n, second if n % 2 else first, f"{domain}-{index}-x{n}", text)
                )
    return out


@dataclass(frozen=True)
class Case:
    """One labelled question: its domain, the gold chain (fact texts, cause first)."""

    domain: str
    question: str
    root: str
    outcome: str
    gold: tuple[str, ...]


def cases() -> list[Case]:
    out = []
    all_facts = facts()
    for domain, chains in CHAINS.items():
        for index, (question, events, _distractors) in enumerate(chains):
            gold = tuple(
                f.content for f in sorted(
                    (f for f in all_facts if f.domain == domain and f.chain == index), key=lambda f: f.step
                )
            )  # fmt: skip
            out.append(Case(domain, question, events[0], events[-1], gold))
    return out
