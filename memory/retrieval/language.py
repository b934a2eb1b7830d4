"""The text-search configuration an item's full text is analysed with, guessed offline.

Stemming with the wrong language loses most of what full text is for: the English
stemmer leaves "Lieferungen" and "Lieferung" apart and keeps "der", "und", "nicht"
as words. Each item's language is guessed when it is written, cheaply and without
a model, from the words PostgreSQL's own configurations drop:

* every word found in a language's stopword list is evidence for it, shared out
  among the lists holding it ("de" counts a little for seven languages, "the" fully
  for English);
* letters only some of these languages write (ß, ñ, ı, ø, ő, ã, ...; the accented
  vowels é, á, ó, à, ô, ... too, shared out among the languages writing them) and
  scripts one configuration covers (Greek, Arabic, Tamil) are weaker evidence of
  the same kind, so a sentence without stopwords can still be placed, and a short
  one whose few function words several Romance lists share ("la", "del") is told
  apart by its accents;
* the language with the most such words wins; when two hold as many, the one whose
  words fewer lists share must lead by ``MIN_LEAD``; with no lead the deployment's
  language (``FEDMEM_TEXT_SEARCH_FALLBACK``) wins when it is one of those tied;
  otherwise, and with no evidence in other letters than Latin, the text is
  ``simple`` (split and lower-cased, no stemming, no stopwords), which is right for
  identifiers, names and code, and never stems with the wrong rules.

Mixed text takes the language most of its function words belong to. Only the
first ``MAX_WORDS`` words are read: the language of a long document is settled
long before that, and the cost of a write stays bounded.
"""

# Letters of other alphabets are the point of this module.
# ruff: noqa: RUF001, RUF002

from __future__ import annotations

import re
from collections import defaultdict

from memory.retrieval.stopwords import FUNCTION_WORDS, STOPWORDS

SIMPLE = "simple"
# Every configuration an item may be stored with: the order is the generated
# column's CASE order, so changing it needs a migration.
CONFIGS: tuple[str, ...] = (*sorted(STOPWORDS), "arabic", "greek", "tamil", SIMPLE)
MAX_WORDS = 400
MIN_EVIDENCE = 1.0
# Between two languages with as many function words, the lead in shared-out
# evidence the winner needs: below it the text is too short to tell, and no
# stemming is safer than the wrong one.
MIN_LEAD = 1.25
# A word holding a telling letter counts this much (a stopword counts 1).
LETTER_WEIGHT = 0.5

_WORD = re.compile(r"\w+")
_OWNERS: dict[str, tuple[str, ...]] = {}
for _lists in (STOPWORDS, FUNCTION_WORDS):
    for _language, _words in _lists.items():
        for _w in _words:
            if _language not in _OWNERS.get(_w, ()):
                _OWNERS[_w] = (*_OWNERS.get(_w, ()), _language)
# Letters of the Latin alphabet that only a few of the configured languages use.
_LETTERS: dict[str, tuple[str, ...]] = {
    "ß": ("german",),
    "ñ": ("spanish",),
    "ı": ("turkish",),
    "ğ": ("turkish",),
    "ş": ("turkish",),
    "ø": ("danish", "norwegian"),
    "æ": ("danish", "norwegian"),
    "å": ("danish", "norwegian", "swedish"),
    "ő": ("hungarian",),
    "ű": ("hungarian",),
    "ã": ("portuguese",),
    "õ": ("portuguese",),
    "ä": ("german", "swedish", "finnish"),
    "ö": ("german", "swedish", "finnish", "hungarian", "turkish"),
    "ü": ("german", "turkish", "hungarian"),
    "è": ("french", "italian"),
    "ê": ("french", "portuguese"),
    "ç": ("french", "portuguese", "turkish"),
    "é": ("french", "spanish", "portuguese", "italian", "hungarian"),
    "á": ("spanish", "portuguese", "hungarian"),
    "í": ("spanish", "portuguese", "hungarian"),
    "ó": ("spanish", "portuguese", "hungarian"),
    "ú": ("spanish", "portuguese", "hungarian"),
    "à": ("french", "italian", "portuguese"),
    "ù": ("french", "italian"),
    "â": ("french", "portuguese"),
    "ô": ("french", "portuguese"),
    "î": ("french",),
    "û": ("french",),
    "ë": ("french", "dutch"),
    "ï": ("french", "dutch"),
    "œ": ("french",),
}
# Scripts a single configuration covers: (first, last code point, configuration).
_SCRIPTS = (
    (0x0370, 0x03FF, "greek"),
    (0x0600, 0x06FF, "arabic"),
    (0x0B80, 0x0BFF, "tamil"),
    (0x0400, 0x04FF, "russian"),
    (0x0900, 0x097F, "nepali"),
)


def fallback() -> str:
    from django.conf import settings

    return str(getattr(settings, "FEDMEM_TEXT_SEARCH_FALLBACK", "english"))


def detect(text: str) -> str:
    """The configuration to analyse ``text`` with: a name in CONFIGS."""
    # Per language: (words of its lists, evidence shared out among the lists).
    hits: dict[str, float] = defaultdict(float)
    shared: dict[str, float] = defaultdict(float)
    for n, match in enumerate(_WORD.finditer(text.lower())):
        if n >= MAX_WORDS:
            break
        word = match.group()
        owners = _OWNERS.get(word)
        if owners:
            for language in owners:
                hits[language] += 1
                shared[language] += 1 / len(owners)
            continue
        if word.isascii():
            continue
        script = _script(word)
        if script is not None:
            # The script alone is weaker evidence than a function word, as a telling
            # letter is (Russian and Nepali stopwords were counted above).
            hits[script] += LETTER_WEIGHT
            shared[script] += LETTER_WEIGHT
            continue
        letters = [owners for letter, owners in _LETTERS.items() if letter in word]
        for owners in letters:
            for language in owners:
                hits[language] += LETTER_WEIGHT / len(letters)
                shared[language] += LETTER_WEIGHT / len(owners) / len(letters)
    # Too little to tell: Latin-letter text takes the deployment's language.
    undecided = fallback() if text.isascii() else SIMPLE
    if not hits:
        return undecided
    # Most function words first; among equals, the words fewer lists share.
    ranked = sorted(hits, key=lambda lang: (-hits[lang], -shared[lang], lang))
    best = ranked[0]
    if hits[best] < MIN_EVIDENCE:
        return undecided
    if len(ranked) > 1:
        second = ranked[1]
        if hits[second] == hits[best] and shared[best] < MIN_LEAD * shared[second]:
            # No lead: the deployment's language when it is among the leaders ("Fog also
            # delayed flights in Hamburg": "also" and "in" are German words too), else
            # no stemming.
            default = fallback()
            return default if hits.get(default) == hits[best] else SIMPLE
    return best


def _script(word: str) -> str | None:
    code = ord(word[0])
    for first, last, language in _SCRIPTS:
        if first <= code <= last:
            return language
    return None
