"""Which entities may bridge two facts, and how much a bridge through one is worth.

An entity named by a large share of the tenant's facts ("the service", "March")
joins facts that have nothing else in common; one named by few joins facts that
are about the same thing. The weight is IDF-like, ``log(N / df)`` over the
tenant's items, and these never bridge at all: pronouns, dates and times
(months, weekdays, years), numbers and quantities, and generic nouns standing
alone ("the system", "the company", "people").
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

# Labels of spans that name quantities and times.
NON_BRIDGE_LABELS = {"CARDINAL", "ORDINAL", "QUANTITY", "MONEY", "PERCENT", "DATE", "TIME"}
PRONOUNS = {
    "i", "me", "my", "mine", "we", "us", "our", "ours", "you", "your", "yours", "he", "him", "his",
    "she", "her", "hers", "it", "its", "they", "them", "their", "theirs", "this", "that", "these",
    "those", "who", "whom", "what", "which", "someone", "something", "anyone", "anything", "everyone",
    "everything", "nobody", "nothing", "one", "ones", "myself", "yourself", "himself", "herself",
    "itself", "ourselves", "themselves", "there", "here",
}  # fmt: skip
TIME_WORDS = {
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct",
    "nov", "dec", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
    "today", "yesterday", "tomorrow", "tonight", "morning", "afternoon", "evening", "night", "day",
    "days", "week", "weeks", "weekend", "month", "months", "year", "years", "hour", "hours", "minute",
    "minutes", "time", "times", "date", "moment", "quarter", "season", "spring", "summer", "autumn",
    "fall", "winter", "am", "pm", "last", "next", "ago", "now", "later", "earlier", "first", "second",
    "third", "st", "nd", "rd", "th", "mid", "early", "late",
}  # fmt: skip
GENERIC_NOUNS = {
    "thing", "things", "stuff", "way", "ways", "lot", "lots", "kind", "sort", "type", "part", "parts",
    "people", "person", "man", "woman", "guy", "guys", "friend", "friends", "team", "company", "system",
    "user", "users", "customer", "customers", "group", "place", "area", "case", "issue", "problem",
    "fact", "point", "result", "results", "change", "changes", "number", "level", "amount", "side",
    "end", "idea", "question", "answer", "reason", "example", "process", "work", "job", "use",
    "information", "data", "value", "state", "life", "world", "home", "everyone", "others", "other",
    "all", "both", "each", "some", "many", "much", "more", "most", "few", "none",
}  # fmt: skip
_NUMBERISH = re.compile(r"^[\d\s.,:/%°+-]*(st|nd|rd|th|s|am|pm|k|m|h|c|f|kg|km|ms)?$")

# An entity named by more than this share of the tenant's items is a hub, not a bridge
# (above a floor, so a tiny tenant's entities can still bridge).
HUB_SHARE = 0.05
HUB_FLOOR = 8


def never_bridges(normalized: str, label: str = "") -> bool:
    """Pronouns, dates/times, numbers and lone generic nouns name nothing specific."""
    if label in NON_BRIDGE_LABELS:
        return True
    words = normalized.split()
    if not words or _NUMBERISH.match(normalized):
        return True
    content = [w for w in words if w not in PRONOUNS and w not in ("the", "a", "an")]
    if not content:
        return True
    if all(w in TIME_WORDS or _NUMBERISH.match(w) for w in content):
        return True
    return len(content) == 1 and content[0] in GENERIC_NOUNS


_TOKEN = re.compile(r"[\w./-]+")


def identifiers(normalized: str) -> frozenset[str]:
    """The tokens of a name that hold a digit: what tells "order 1234" from "order 1235",
    "Flight BA117" from "BA118", "Q3 2024" from "Q4 2024". Embeddings put such names
    close together (cosine 0.9 and more with MiniLM), yet they are different things."""
    tokens = (m.group().strip("./-") for m in _TOKEN.finditer(normalized.lower()))
    return frozenset(t for t in tokens if any(ch.isdigit() for ch in t))


# Words that tell two otherwise alike names apart: places and sides, order, age and
# version, direction of flow, size, environment, honorifics. MiniLM puts "the north
# warehouse" / "the south warehouse" at 0.80, "the old server" / "the new server" at
# 0.89, "the east wing" / "the west wing" at 0.86: near in embedding, different things.
DISTINGUISHING = {
    "north", "south", "east", "west", "northern", "southern", "eastern", "western", "northeast",
    "northwest", "southeast", "southwest", "central", "upper", "lower", "left", "right", "front",
    "back", "rear", "top", "bottom", "inner", "outer", "first", "second", "third", "fourth", "fifth",
    "last", "next", "previous", "primary", "secondary", "old", "new", "older", "newer", "former",
    "current", "legacy", "internal", "external", "inbound", "outbound", "incoming", "outgoing",
    "input", "output", "upstream", "downstream", "small", "large", "big", "little", "high", "low",
    "min", "max", "minimum", "maximum", "production", "staging", "sandbox", "replica", "standby",
    "backup", "mr", "mrs", "ms", "miss", "senior", "junior", "morning", "evening", "night", "day",
    "before", "after", "pre", "post", "start", "end", "opening", "closing",
}  # fmt: skip


@lru_cache(maxsize=65536)
def distinctions(normalized: str) -> frozenset[str]:
    """What tells this name from alike ones: its identifiers and its distinguishing words."""
    words = {w.strip(".") for w in normalized.lower().split()}
    return identifiers(normalized) | frozenset(words & DISTINGUISHING)


def may_be_one(a: str, b: str) -> bool:
    """Whether two normalized names may name one thing by their wording alone: not when
    their identifiers or distinguishing words differ (precision first: "the depot" and
    "the north depot" are kept apart too); a close embedding still decides whether
    they do."""
    return distinctions(a) == distinctions(b)


def bridge_weight(normalized: str, label: str, df: int, documents: int) -> float:
    """The weight of a bridge through this entity: 0 (none) or ``log(N / df)``-like, > 0."""
    if never_bridges(normalized, label):
        return 0.0
    documents = max(documents, 1)
    if df > max(HUB_FLOOR, HUB_SHARE * documents):
        return 0.0
    return math.log(1 + documents / max(df, 1))


def session_weight(size: int, documents: int) -> float:
    """The weight of the bridge a session makes between its facts, ``log(1 + N / size)``
    like an entity's: the fewer facts one session holds, the more they are one matter."""
    return math.log(1 + max(documents, 1) / max(size, 1))
