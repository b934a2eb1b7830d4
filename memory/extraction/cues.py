"""Cause -> effect relations from connectives in languages the parser does not read.

The packaged spaCy model parses English; on a German or Turkish sentence its
dependency labels mean nothing, and the English rules (:mod:`memory.extraction.causal`)
found nothing there, or worse, read "so" in "so hoch" as a connective. For the
languages below, a sentence's connectives are read from its surface instead, and
its spans are cut at the clause boundaries around the connective (commas,
semicolons, the sentence's ends):

* ``FORWARD``: the cause comes before the connective, the effect after it
  ("Die verringerte CPU-Zuweisung *führt dazu, dass* die Antwortzeiten steigen",
  "La sequía *provocó* la pérdida de la cosecha", "Yağmur *yüzünden* maç ertelendi");
* ``BACKWARD``: the effect comes first ("Le vol a été annulé *à cause de* la tempête");
* ``OPENING``: a sentence opening on a conditional or causal subordinator, its
  clause ending at the first comma ("*Wenn* der Speicher voll ist, stürzt der
  Dienst ab", "*Cuando* sube la glucosa, el páncreas libera insulina");
* ``PREPOSED``: a sentence opening on a causal preposition, its phrase the cause and
  the rest of the clause the effect ("*À cause de* la tempête, le vol a été annulé").
  German and Dutch put the finite verb right after the phrase, with no comma ("*Durch*
  die Zinssenkung steigt die Investitionsbereitschaft", "*Door* de lekke band kon de
  vrachtwagen niet verder rijden"): the phrase ends before that verb
  (:func:`_preposed_phrase_end`).

A sentence states as many relations as it has connectives that do not overlap,
each pattern read wherever it occurs (the order: opening, the language's multi-word
and passive connectives, then single words). The cue stored is the
connective as written, lower-cased. These are the common connectives of each
language's grammar, not a list fitted to any data; anything subtler (implicit
causation, a cause named only by a pronoun) is left to the chain walk's scorer.

Span terms (what span linking compares, :func:`span_terms`) are the spans' crude
stems (:func:`memory.extraction.clauses.stems`) without the language's stopwords:
the English lemmatizer would keep "der" and "die" as terms.
"""

# Letters of other alphabets are the point of this module.
# ruff: noqa: RUF001, RUF003

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from memory.extraction.clauses import WORD, stems
from memory.extraction.relation import Relation

FORWARD, BACKWARD, OPENING, PREPOSED = "forward", "backward", "opening", "preposed"


@dataclass(frozen=True)
class Cue:
    kind: str
    pattern: str  # a regular expression over the lower-cased sentence


def _verbs(*stems_and_endings: tuple[str, str]) -> str:
    return "(?:" + "|".join(f"{stem}(?:{endings})" for stem, endings in stems_and_endings) + ")"


# Per text-search configuration (the names memory.retrieval.language.detect returns).
# Each pattern is matched on word boundaries; the longer readings come first so a
# multi-word connective is not cut at its first word.
CUES: dict[str, tuple[Cue, ...]] = {
    "german": (
        Cue(OPENING, r"wenn|weil|da|sobald|nachdem|falls"),
        Cue(PREPOSED, r"durch|wegen|aufgrund|infolge|dank"),
        # Subordinate clauses put the verb last: "..., was zu X führt", "..., die zu X führten".
        Cue(FORWARD, r"(?<=[,;] )(?:was|die|der|das) zu (?P<effect>[^,;]+?) (?:führt|führte|führen|führten)"),
        Cue(FORWARD, r"(?:führ(?:t|te|en|ten)|hat|hatte|haben) (?:dazu|geführt),? dass"),
        Cue(FORWARD, r"sorg(?:t|te|en|ten) dafür,? dass|hat(?:te)? zur folge,? dass|so ?dass|sodass"),
        # With a modal the verb goes last: "X kann zu Y führen".
        Cue(
            FORWARD,
            r"(?:kann|können|konnte|konnten|könnte|könnten|wird|werden|würde|würden)(?: auch)? zu"
            r" (?P<effect>[^,;]+?) führen",
        ),
        Cue(FORWARD, r"führ(?:t|te|en|ten) zu(?:r|m)?|geführt"),
        Cue(FORWARD, r"(?<=[,;] )(?:deshalb|daher|deswegen|folglich|dadurch|weshalb|wodurch|infolgedessen)"),
        Cue(BACKWARD, r"(?:verursacht|ausgelöst|bewirkt) durch"),
        Cue(
            BACKWARD,
            r"(?<=[,;] )(?:weil|da|wenn|sobald)|wegen"
            r"|aufgrund (?:von |des |der )?|infolge (?:von |des |der )?",
        ),
        Cue(FORWARD, _verbs(("verursach", "t|te|en|ten"), ("bewirk", "t|te|en|ten"), ("auslös", "t|te|en"))),
    ),
    "dutch": (
        Cue(OPENING, r"als|wanneer|omdat|doordat|zodra|nadat"),
        Cue(PREPOSED, r"door|vanwege|wegens|dankzij|als gevolg van"),
        Cue(
            FORWARD,
            r"(?<=[,;] )(?:wat|die|dat) tot (?P<effect>[^,;]+?)"
            r" (?:(?:kan|kunnen|kon|konden|zal|zullen|zou|zouden) )?(?:leidt|leidde|leiden|leidden)",
        ),
        Cue(FORWARD, r"zorg(?:t|de|den|en) ervoor dat|heeft tot gevolg dat|met als gevolg dat|zodat"),
        # A modal before the verb belongs to the connective, not to the cause: "X kan
        # (ook) leiden tot Y", and verb-final "X kan tot Y leiden".
        Cue(FORWARD, r"(?:kan|kunnen|kon|konden|zal|zullen|zou|zouden) tot (?P<effect>[^,;]+?) leiden"),
        Cue(
            FORWARD,
            r"(?:(?:kan|kunnen|kon|konden|zal|zullen|zou|zouden)(?: ook)? )?leid(?:t|de|den|en) tot"
            r"|geleid tot|resulteer(?:t|de|den|en) in",
        ),
        Cue(FORWARD, r"veroorzaak(?:t|te|ten|en)|(?<=[,;] )(?:waardoor|daardoor|daarom|dus|hierdoor)"),
        Cue(BACKWARD, r"(?:wordt|werd|worden|werden|is|zijn) (?:veroorzaakt|teweeggebracht) door"),
        Cue(BACKWARD, r"(?<=[,;] )(?:omdat|doordat|als|wanneer)|vanwege|wegens|als gevolg van|dankzij"),
    ),
    "french": (
        Cue(OPENING, r"lorsqu(?:e|')|quand|comme|puisqu(?:e|')|parce qu(?:e|')|si|s'"),
        Cue(
            PREPOSED,
            r"à cause d(?:e|u|es|')|en raison d(?:e|u|es|')|grâce aux?|suite à|du fait d(?:e|u|es)",
        ),
        Cue(FORWARD, r"ce qui (?:a )?(?:entraîn|provoqu|caus|condui|déclench)\w*(?: à| que)?"),
        Cue(
            FORWARD,
            (
                r"a pour conséquence|donne lieu à|(?:a |ont )?(?:conduit|mené"
                r"|mènent|mène|conduisent) à"
            ),
        ),
        Cue(
            FORWARD,
            r"(?<=[,;] )(?:donc|par conséquent|c'est pourquoi|si bien qu(?:e|')|de sorte qu(?:e|')|d'où)",
        ),
        Cue(
            BACKWARD,
            (
                r"(?:est|sont|a été|ont été|était|étaient) (?:causée?s?"
                r"|provoquée?s?|entraînée?s?|déclenchée?s?) par"
            ),
        ),
        Cue(
            BACKWARD,
            r"parce qu(?:e|')|à cause d(?:e|u|es|')|en raison d(?:e|u|es|')|grâce à|grâce aux?"
            r"|du fait d(?:e|u|es)|suite à|(?<=[,;] )car|puisqu(?:e|')|(?:dû|due|dus|dues) (?:à|aux?)"
            r"|lorsqu(?:e|')|quand",
        ),
        Cue(
            FORWARD,
            r"(?:a |ont |avait )?"
            + _verbs(
                ("entraîn", "e|ent|é|ée|ait|aient|era"),
                ("provoqu", "e|ent|é|ée|ait|aient|era"),
                ("déclench", "e|ent|é|ée|ait"),
                ("caus", "e|ent|é|ée|ait|aient"),
                ("génèr", "e|ent"),
                ("généré", "|e"),
            ),
        ),
    ),
    "spanish": (
        Cue(OPENING, r"cuando|como|si|al|ya que|puesto que|porque|debido a|tras"),
        Cue(PREPOSED, r"a causa de(?:l)?|por culpa de(?:l)?|gracias a(?:l)?"),
        Cue(
            FORWARD,
            (
                r"lo que (?:provoc|caus|llev|gener|produ|ocasion)\w*(?: a"
                r"| que)?|(?:da|dio|dan) lugar a"
            ),
        ),
        Cue(
            FORWARD,
            (
                r"(?<=[,;] )(?:por lo que|así que|por eso|por lo tanto"
                r"|por ende|de modo que|de ahí que)"
            ),
        ),
        Cue(FORWARD, r"hace que|hizo que|han hecho que|ha hecho que"),
        Cue(
            BACKWARD,
            (
                r"(?:es|fue|son|fueron|ha sido|han sido|era) (?:causad"
                r"|provocad|ocasionad|generad)[oa]s? por"
            ),
        ),
        Cue(
            BACKWARD,
            r"porque|debido a(?:l)?|a causa de(?:l)?|por culpa de(?:l)?|ya que|puesto que|gracias a(?:l)?"
            r"|(?<=[,;] )cuando",
        ),
        Cue(
            FORWARD,
            r"(?:ha |han |había )?(?<!\bla )(?<!\buna )(?<!\ba )"
            + _verbs(
                ("provoc", "a|an|ó|aron|ado|aba|ará"),
                ("caus", "a|an|ó|aron|ado|aba|ará"),
                ("llev", "a a|an a|ó a|aron a|ado a"),
                ("conduc", "e a|en a"),
                ("conduj", "o a|eron a"),
                ("gener", "a|an|ó|aron|ado"),
                ("ocasion", "a|an|ó|aron|ado"),
                ("result", "a en|ó en"),
            )
            + r"(?: que)?",
        ),
    ),
    "italian": (
        Cue(OPENING, r"quando|poiché|siccome|se|dato che"),
        Cue(
            PREPOSED,
            r"a causa d(?:i|el|ella|ei|egli|ello|ell')|grazie a(?:l|lla|i|gli)?|per via d(?:i|el|ella)",
        ),
        Cue(FORWARD, r"(?<=[,;] )(?:quindi|perciò|pertanto|di conseguenza)"),
        Cue(FORWARD, r"il che (?:ha )?(?:caus|provoc|port)\w*"),
        Cue(BACKWARD, r"(?:è|sono|è stat[oa]|sono stat[ie]|era) (?:causat|provocat)[oaie] da"),
        Cue(
            BACKWARD,
            r"(?<=[,;] )perché|poiché|a causa d(?:i|el|ella|ei|egli|ello|ell')"
            r"|(?:dovut[oaie]|grazie) a(?:l|lla|i|gli|ll')?",
        ),
        Cue(
            FORWARD,
            r"(?:ha |hanno )?"
            + _verbs(("caus", "a|ano|ato|ò"), ("provoc", "a|ano|ato|ò"), ("port", "a a|ano a|ato a|ò a")),
        ),
    ),
    "portuguese": (
        Cue(OPENING, r"quando|como|porque|se|já que|devido a"),
        Cue(PREPOSED, r"por causa d(?:e|o|a|os|as)|graças (?:a(?:o|os|s)?|às?)"),
        Cue(FORWARD, r"(?<=[,;] )(?:portanto|por isso|logo|assim)|o que (?:caus|provoc|lev)\w*(?: a)?"),
        Cue(BACKWARD, r"(?:é|foi|são|foram|era) (?:causad|provocad)[oa]s? por"),
        Cue(
            BACKWARD,
            r"porque|devido (?:a(?:o|os|s)?|às?)|por causa d(?:e|o|a|os|as)"
            r"|graças (?:a(?:o|os|s)?|às?)|já que",
        ),
        Cue(
            FORWARD,
            r"(?:tem |têm )?"
            + _verbs(
                ("caus", "a|am|ou|aram|ado"),
                ("provoc", "a|am|ou|aram|ado"),
                ("lev", "a a|am a|ou a|aram a|ado a"),
                ("result", "a em|ou em"),
            ),
        ),
    ),
    "turkish": (
        # The cause comes first: postpositions follow the phrase they govern, and the
        # clause verbs "neden oldu" / "yol açtı" end the sentence (cause, effect, verb).
        Cue(FORWARD, r"bu (?:yüzden|nedenle|sebeple)|dolayısıyla|sonuç olarak"),
        Cue(FORWARD, r"yüzünden|nedeniyle|sebebiyle|sonucunda|dolayı"),
        # A verb's suffix: the verb stays in the cause ("yağmur yağdığı için", "yağınca").
        Cue(
            FORWARD,
            (
                r"(?P<verb>\w+?)(?:d|t)(?:ığı için|iği için|uğu için|üğü için"
                r"|ığından|iğinden|uğundan|üğünden)"
            ),
        ),
        # Not the postpositions and adverbs of the same ending ("gün boyunca", "toplantı
        # süresince", "yeterince"), nor "-dığınca", "as far as" ("bildiğince").
        Cue(
            FORWARD,
            r"(?!(?:boyunca|süresince|yeterince|kendince)(?!\w))(?!\w*(?:d|t)(?:ığ|iğ|uğ|üğ)(?:ınca|ince|unca|ünce)(?!\w))"
            r"(?P<verb>\w{2,}?)(?:ınca|ince|unca|ünce)",
        ),
        Cue(
            OPENING,
            (
                r"(?:neden|sebep) ol(?:du|ur|muştur|uyor|acak|maktadır)"
                r"|yol aç(?:tı|ar|mıştır|ıyor|acak)"
            ),
        ),
    ),
}

# A sentence ends at ., ! or ? followed by a space (not inside "0,5" or "3.5").
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_CLAUSE = re.compile(r"[,;:]")
# The copula an effect span ends on before a backward cue ("est dû à", "fue debido a").
_COPULA = {
    language: re.compile(rf"\s+(?:{words})$", re.IGNORECASE)
    for language, words in {
        "french": r"est|sont|était|étaient|fut|furent|a été|ont été|avait été|sera|seront",
        "spanish": r"es|son|fue|fueron|era|eran|ha sido|han sido|está|están|estaba|estaban",
        "italian": r"è|sono|era|erano|fu|furono|è stat[oaie]|sono stat[ie]",
        "portuguese": r"é|são|foi|foram|era|eram|está|estão",
    }.items()
}
# Words that open a clause only to introduce it: kept out of the span.
# An elided "qu'" is followed by its word at once ("qu'il a fallu un détour").
_LEADING = re.compile(
    r"^(?:(?:dass|daß|que|dat|che|ki|that|en|et|y|e|und|and|ve)\s+|qu['\u2019]\s*)", re.IGNORECASE
)
MIN_SPAN = 2
# A relative pronoun standing for the clause before it, left as a connective's cause
# when the table matched only the verb after it.
_RELATIVE_ONLY = re.compile(
    r"(?:lo que|lo cual|ce qui|ce que|ciò che|il che|o que|wat|was|die|der|dat|which)", re.IGNORECASE
)


@cache
def _compiled(language: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    out = []
    for cue in CUES.get(language, ()):
        # An elided connective ("d'", "qu'") ends on its apostrophe, straight or curly,
        # and the next word follows it at once: "à cause d'un accident".
        pattern = cue.pattern.replace("'", "['\u2019]")
        if cue.kind in (OPENING, PREPOSED) and language != "turkish":
            # A sentence opening on the subordinator, its clause ending at a comma.
            out.append((cue.kind, re.compile(rf"^(?:{pattern})(?:(?<=['\u2019])|(?=\W))")))
        else:
            out.append((cue.kind, re.compile(rf"(?<!\w)(?:{pattern})(?:(?<=['\u2019])|(?!\w))")))
    return tuple(out)


def languages() -> frozenset[str]:
    return frozenset(CUES)


def _clean(span: str) -> str:
    span = span.strip(" \t\n,;:.!?\"'()")
    previous = None
    while previous != span:
        previous = span
        span = _LEADING.sub("", span).strip(" ,;:")
    return span


def _clause_before(sentence: str, end: int) -> str:
    """The clause that ends at ``end``: back to the previous comma, or the sentence
    start when that would leave nothing. A clause that is only a relative pronoun
    stands for the one before it ("X, lo que causó Y": X)."""
    head = sentence[:end]
    parts = _CLAUSE.split(head)
    # A connective opening its clause right after a comma ("X, was zu Y führt") has
    # nothing before it in its own clause: the clause before the comma is the cause.
    while len(parts) > 1 and not _clean(parts[-1]):
        parts = parts[:-1]
    last = _clean(parts[-1])
    if _RELATIVE_ONLY.fullmatch(last) and len(parts) > 1:
        parts, last = parts[:-1], _clean(parts[-2])
    return last if len(last) >= MIN_SPAN or len(parts) == 1 else _clean(head)


def _clause_after(sentence: str, start: int) -> str:
    return _clean(_CLAUSE.split(sentence[start:])[0])


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


# Words that keep a preposed phrase open (its noun still to come, or a genitive or a
# further phrase attached to it): articles, possessives, prepositions.
_PHRASE_WORDS = {
    "german": _wordset(
        "der die das den dem des ein eine einen einem einer eines kein keine keinen keinem keiner "
        "sein seine seinen seinem seiner ihr ihre ihren ihrem ihrer unser unsere dieser diese diesen "
        "diesem dieses von vom auf im in am an für mit bei zum zur aus nach über unter vor zwischen "
        "gegen ohne um und"
    ),
    "dutch": _wordset(
        "de het een geen zijn haar hun ons onze mijn dit deze dat die van op in aan voor met bij "
        "naar over onder tussen tegen zonder om en"
    ),
}
# Dutch finite verbs too common to miss (the auxiliaries and modals first): a
# preposed phrase ends before one. Any other verb is found by the subject after it.
_DUTCH_FINITE = _wordset(
    "is zijn was waren wordt worden werd werden heeft hebben had hadden kan kunnen kon konden "
    "moet moeten moest moesten zal zullen zou zouden mag mogen mocht mochten gaat gaan ging gingen "
    "komt komen kwam kwamen blijft blijven bleef bleven wil willen wilde wilden krijgt krijgen kreeg "
    "kregen staat staan stond stonden ligt liggen lag lagen neemt nemen nam namen daalt dalen daalde "
    "daalden stijgt stijgen steeg stegen loopt lopen liep liepen raakt raken raakte raakten valt "
    "vallen viel vielen"
)
_DUTCH_SUBJECT = _wordset("de het een er hij zij ze men we wij ik je u dit deze die dat")
_TOKEN = re.compile(r"\S+")


def _preposed_phrase_end(clause: str, language: str) -> int | None:
    """Where the phrase after a German or Dutch causal preposition ends: the offset in
    ``clause`` of the finite verb that follows it (the language puts it second), or
    None. German: the phrase is articles, adjectives and prepositions up to a noun
    (capitalized), and whatever attaches to that noun; the first lower-case word after
    a noun that keeps nothing open is the verb. Dutch writes nouns in lower case: the
    verb is a common finite form, or the word before a subject."""
    keep = _PHRASE_WORDS.get(language)
    if keep is None:
        return None
    words = [(m.start(), m.group(0).strip("\"'()").lower(), m.group(0)) for m in _TOKEN.finditer(clause)]
    if language == "german":
        noun = False
        for start, low, raw in words:
            if low in keep:
                noun = False
            elif any(ch.isupper() for ch in raw) or any(ch.isdigit() for ch in raw):
                noun = True
            elif noun:
                return start
        return None
    content = 0
    for i, (start, low, _raw) in enumerate(words):
        if low in keep and not (content and low in _DUTCH_FINITE):
            continue
        following = words[i + 1][1] if i + 1 < len(words) else ""
        if content and (low in _DUTCH_FINITE or following in _DUTCH_SUBJECT):
            return start
        content += 1
    return None


def _relation(language: str, sentence: str, kind: str, match: re.Match[str]) -> Relation | None:
    low = match.string
    low_cue = match.group(0).strip()
    if kind == OPENING and language == "turkish":
        # "Yağmur, maçın ertelenmesine neden oldu.": cause, then effect, then the verb.
        head = sentence[: match.start()]
        cause, comma, effect = head.partition(",")
        if not comma:
            return None
        cause, effect = _clean(cause), _clean(effect)
    elif kind == OPENING:
        rest = sentence[match.end() :]
        cause, comma, effect = rest.partition(",")
        if not comma:
            return None
        cause, effect = _clean(cause), _clause_after(effect, 0)
    elif kind == PREPOSED:
        rest = sentence[match.end() :]
        clause = _CLAUSE.split(rest)[0]
        end = _preposed_phrase_end(clause, language)
        if end is not None:
            cause, effect = _clean(clause[:end]), _clean(clause[end:])
        else:
            cause, comma, effect = rest.partition(",")
            if not comma:
                return None
            cause, effect = _clean(cause), _clause_after(effect, 0)
    elif kind == FORWARD and "effect" in match.re.groupindex:
        # A verb-final clause holds the effect between its opening and its verb
        # ("..., was zu einer höheren Latenz führt"); the cue is the two around it.
        cause = _clause_before(sentence, match.start())
        effect = _clean(sentence[match.start("effect") : match.end("effect")])
        low_cue = (
            low_cue[: match.start("effect") - match.start()] + "..." + low[match.end("effect") : match.end()]
        )
    elif kind == FORWARD and "verb" in match.re.groupindex:
        # The suffixed verb ends the cause; the cue is its suffix.
        cause = _clause_before(sentence, match.end("verb"))
        effect = _clause_after(sentence, match.end())
        low_cue = "-" + low_cue[match.end("verb") - match.start() :]
    elif kind == FORWARD:
        cause, effect = _clause_before(sentence, match.start()), _clause_after(sentence, match.end())
    else:
        effect, cause = _clause_before(sentence, match.start()), _clause_after(sentence, match.end())
        # "Le retard est dû à X": the copula before the cue is no part of the effect.
        copula = _COPULA.get(language)
        if copula is not None:
            effect = copula.sub("", effect)
    if len(cause) < MIN_SPAN or len(effect) < MIN_SPAN or cause == effect:
        return None
    return Relation(cause[:500], effect[:500], low_cue.lower())


def cue_relations(text: str, language: str) -> list[Relation]:
    """The relations the connectives of ``text`` (in ``language``) state; none for a
    language without a table here."""
    patterns = _compiled(language)
    if not patterns:
        return []
    found = []
    for sentence in _SENTENCE.split(text.strip()):
        low = sentence.lower()
        if len(low) != len(sentence):
            # A letter whose lower case is longer ("İ"): cut the spans from the lower case.
            sentence = low
        taken: list[tuple[int, int]] = []
        links: list[tuple[int, str, str, Relation]] = []
        for kind, pattern in patterns:
            # Every occurrence: a sentence may chain one connective ("X, wat leidde tot
            # Y, wat leidde tot Z"). One inside a connective already read ("lo que
            # provoca" / "provoca") is not another.
            for match in pattern.finditer(low):
                if any(match.start() < e and b < match.end() for b, e in taken):
                    continue
                # Spans are cut from the sentence as written (same offsets, checked above).
                relation = _relation(language, sentence, kind, match)
                if relation is not None:
                    links.append((match.start(), match.group(0).strip(), kind, relation))
                    taken.append(match.span())
        found += _chained(links)
    return list(dict.fromkeys(found))


def _chained(links: list[tuple[int, str, str, Relation]]) -> list[Relation]:
    """A sentence's relations (match start, connective as matched, kind, relation), in
    the order found; where one continues another ("X, lo que provocó Y, lo que causó
    Z"), its cause is the other's effect (Y), not the clause that states that other
    link ("lo que provocó Y"): the cause holds the other's connective and, from it on,
    the other's effect ("was zu einem Ausfall führte" holds its effect inside)."""
    out = []
    for at, _said, kind, rel in links:
        if kind == FORWARD:
            cause = rel.cause.lower()
            before = [
                (start, other) for start, said, _kind, other in links
                if start < at and other.effect != rel.cause and said in cause
                and other.effect.lower() in cause[cause.index(said):]
            ]  # fmt: skip
            if before:
                rel = Relation(max(before, key=lambda b: b[0])[1].effect, rel.effect, rel.cue)
        out.append(rel)
    return out


def span_terms(span: str, language: str) -> list[str]:
    """What span linking compares for a span in ``language``: its content words' crude
    stems, without the language's stopwords."""
    from memory.retrieval.stopwords import STOPWORDS

    stop = STOPWORDS.get(language, frozenset())
    return sorted(stems(w for w in WORD.findall(span.lower()) if w not in stop))
