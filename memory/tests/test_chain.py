"""The backward chain walk an answer states (memory/reasoning/chain.py, strict rules):
thematic progression by word position, siblings, direction, opposite changes, given
before new, the bar after an asserted link, hubs per language."""

# Turkish and Dutch sentences: their letters are not look-alikes here.
# ruff: noqa: RUF001, RUF003

from __future__ import annotations

import numpy as np
import pytest

from memory.extraction.clauses import WORD, stems
from memory.extraction.cues import cue_relations
from memory.models import MemoryItem
from memory.reasoning.chain import (
    FALL_OFF,
    FLOOR,
    LINK_BONUS,
    NAMED_BONUS,
    REVERSE_MARGIN,
    Pool,
    Profile,
    _derived,
    _presupposes,
    _roots,
    _states,
    cause_score,
    read_words,
    walk_back,
)
from memory.tests.graph_helpers import fact
from memory.text import normalize


def profile(pk: str, vector: list[float], *, theme: set[str], rheme: set[str], english: bool = False,
            cause_vector: list[float] | None = None, text: str | None = None) -> Profile:  # fmt: skip
    # Stems as the pool reads them from the text (memory.extraction.clauses.stems).
    words = stems(WORD.findall(text)) if text else frozenset(theme | rheme)
    return Profile(
        pk=pk, text=text or pk, vector=np.asarray(vector, dtype=np.float32),
        cause_vector=None if cause_vector is None else np.asarray(cause_vector, dtype=np.float32),
        changes=False, subject="", predicate=words, cause_side=frozenset(), words=words, session=None,
        english=english, theme=frozenset(theme), rheme=frozenset(rheme),
    )  # fmt: skip


# Two facts 0.8 apart in embedding space (cosine 0.8), above the step floor either way.
A, B = [1.0, 0.0], [0.8, 0.6]


def test_thematic_progression_links_in_any_language():
    # "La fenêtre ouverte a laissé entrer la pluie." -> "La pluie a inondé le sol du salon."
    cause = profile("window", A, theme={"fenetr", "ouvert"}, rheme={"laiss", "entrer", "pluie"})
    effect = profile("flood", B, theme={"pluie", "inond"}, rheme={"sol", "salon"})
    strict = cause_score(cause, effect, {}, set(), strict=True)
    assert strict == pytest.approx(0.8 + LINK_BONUS, abs=1e-6)
    # The reverse reading has no progression and no longer ties with the forward one.
    assert cause_score(effect, cause, {}, set(), strict=True) == 0.0
    assert cause_score(effect, cause, {}, set()) > 0  # the lenient walk (ranking) takes it


def test_a_sibling_on_the_same_theme_is_no_step():
    # "The pump is serviced by a contractor." is no cause of "The pump failed on Monday."
    sibling = profile("serviced", A, theme={"pump"}, rheme={"servic", "contractor"})
    effect = profile("failed", B, theme={"pump"}, rheme={"fail", "monday"})
    assert cause_score(sibling, effect, {}, set()) >= FLOOR  # what the ranking walk did
    assert cause_score(sibling, effect, {}, set(), strict=True) == 0.0


def test_the_reverse_reading_may_not_win_unless_the_effect_names_its_cause():
    # Reverse 0.8 + link against forward 0.8: the lenient walk allowed 0.05 of margin.
    cause = profile("c", A, theme={"alpha"}, rheme={"beta"})
    effect = profile("e", B, theme={"gamma"}, rheme={"alpha", "delta"})
    assert cause_score(cause, effect, {}, set(), strict=True) == 0.0
    # An effect with an edge of its own was compared with its cause span: that decides.
    named = profile("e2", B, theme={"gamma"}, rheme={"alpha", "delta"}, cause_vector=A)
    named = Profile(**{**named.__dict__, "cause_side": frozenset({"beta"})})
    assert cause_score(cause, named, {}, set(), strict=True) == pytest.approx(1.0 + LINK_BONUS, abs=1e-6)


def test_in_the_ranking_walk_a_named_cause_span_decides_over_the_reverse_reading():
    # "Der SSD-Laufwerk hat eine Schreibgeschwindigkeit von 550 MB/s erreicht." ->
    # "Da die SSD die maximale Schreibgeschwindigkeit erreicht hat, ...": the forward
    # reading compares the cause with the effect's short cause span, the reverse one two
    # whole sentences (higher on their own scale); the span decides.
    span, whole = [1.0, 0.0], [0.7, 0.71414284]
    cause = profile("c", [0.8, 0.6], theme={"ssd"}, rheme={"schreib"})
    effect = profile("e", whole, theme={"ssd", "maximal"}, rheme={"durchsatz"}, cause_vector=span)
    forward = cause_score(cause, effect, {}, set())
    assert forward == pytest.approx(0.8, abs=1e-6)
    # ... though the reverse reading, two whole sentences, scores higher by more than
    # the lenient margin (which vetoed the step before a span was allowed to decide).
    assert cause_score(effect, cause, {}, set()) > forward + REVERSE_MARGIN


@pytest.mark.parametrize(
    "sibling",
    [
        "Das 5G-Netz verbessert auch die Mobilfunkabdeckung.",
        "The network also improves rural coverage.",
        "La red también mejora la cobertura rural.",
    ],
)
def test_a_fact_that_adds_one_more_thing_is_a_sibling_unless_what_it_adds_goes_on(sibling):
    # E names its cause ("den Ausbau des 5G-Netzes"); the fact with an additive particle
    # names it too, as its theme: a sibling of the fact E continues, no cause of E.
    text = "Durch den Ausbau des 5G-Netzes erhöht sich die Netzwerkgeschwindigkeit."
    effect = profile(
        "speed", B, theme={"ausbau", "netz"}, rheme={"netzwerkgeschwind"}, cause_vector=A, text=text
    )
    effect = Profile(**{**effect.__dict__, "cause_side": frozenset({"ausba", "netz"})})
    also = profile("also", A, theme={"netz"}, rheme={"mobilfunkabdeck"}, text=sibling)
    also = Profile(**{**also.__dict__, "words": also.words | {"netz"}})
    plain = Profile(**{**also.__dict__, "text": sibling.replace(" auch", "").replace(" also", "")
                       .replace(" también", "")})  # fmt: skip
    assert cause_score(plain, effect, {}, set(), strict=True) > 0  # named in E's cause span
    assert cause_score(also, effect, {}, set(), strict=True) == 0.0
    # What it adds progressing into E's theme still makes it a cause.
    onward = Profile(**{**also.__dict__, "rheme": frozenset({"ausbau"})})
    assert cause_score(onward, effect, {}, set(), strict=True) > 0
    assert cause_score(also, effect, {}, set()) > 0  # the ranking's lenient walk keeps it


def test_a_cause_stating_the_whole_named_cause_span_gains_the_named_bonus():
    # "Vanwege het inlogprobleem vroeg de medewerker ..." names "het inlogprobleem" as
    # its cause; "De klant meldde een inlogprobleem via een ticket." states all of it.
    text = "Vanwege het inlogprobleem vroeg de medewerker de klant om een reset."
    effect = profile("reset", B, theme={"inlogproblem"}, rheme={"reset"}, cause_vector=A, text=text)
    effect = Profile(**{**effect.__dict__, "cause_side": frozenset({"het", "inlog"}),
                        "named": frozenset({"inlog"})})  # fmt: skip
    cause = profile("report", A, theme={"klant", "meld"}, rheme={"inlogproblem", "ticket"},
                    text="De klant meldde een inlogprobleem via een ticket.")  # fmt: skip
    partial = Profile(**{**effect.__dict__, "named": frozenset({"inlog", "wacht"})})
    full = cause_score(cause, effect, {}, set(), strict=True)
    assert full == pytest.approx(cause_score(cause, partial, {}, set(), strict=True) + NAMED_BONUS, abs=1e-6)
    # The ranking's lenient walk does not read it.
    assert cause_score(cause, effect, {}, set()) == cause_score(cause, partial, {}, set())


def test_a_named_span_cut_at_its_connective_suffix_is_stated_by_the_whole_word():
    # Turkish "-dığı için" is a suffix: the cue extractor cuts "kalktığı" to "kalk", and
    # "Ayşe sabah erken kalktı." states it as "kalktı".
    (relation,) = cue_relations("Erken kalktığı için kahvaltı yapamadı.", "turkish")
    assert relation.cause == "Erken kalk"
    named = stems(WORD.findall(relation.cause))
    text = "Erken kalktığı için kahvaltı yapamadı."
    effect = profile("skip", B, theme={"kalktık"}, rheme={"kahval"}, cause_vector=A, text=text)
    effect = Profile(**{**effect.__dict__, "cause_side": named, "named": named})
    cause = profile("woke", A, theme={"ayşe", "sabah"}, rheme={"kalktı"}, text="Ayşe sabah erken kalktı.")
    other = profile("slept", A, theme={"ayşe", "sabah"}, rheme={"uyudu"}, text="Ayşe sabah erken uyudu.")
    stated = cause_score(cause, effect, {}, set(), strict=True)
    # Only the word the span cut differs: the bonus is what tells the two apart.
    assert stated == pytest.approx(cause_score(other, effect, {}, set(), strict=True) + NAMED_BONUS, abs=1e-6)
    # A word that merely begins like the span's cut stem is no statement of it.
    assert not _states(frozenset({"kalk"}), frozenset({"kal", "sabah"}))
    assert _states(frozenset({"kalk", "erken"}), frozenset({"kalkt", "erken"}))


def test_a_fact_sharing_only_what_the_named_cause_is_about_is_a_sibling():
    # "When the CPU temperature rises, ..." names its cause; "The CPU temperature was
    # monitored by a sensor." says something else of the same thing (its theme), not
    # that it rose: no link, a sibling. A fact stating the rise links.
    text = "When the CPU temperature rises, the system throttles performance."
    effect = profile("throttle", B, theme={"cpu", "temperatur"}, rheme={"rise", "system", "throttl"},
                     cause_vector=A, text=text)  # fmt: skip
    span = stems(WORD.findall("the CPU temperature rises"))
    effect = Profile(**{**effect.__dict__, "cause_side": span, "named": span})
    monitored = profile("sensor", A, theme={"cpu", "temperatur"}, rheme={"monitor", "sensor"},
                        text="The CPU temperature was monitored by a sensor.")  # fmt: skip
    rising = profile("load", A, theme={"heavi", "load"}, rheme={"made", "cpu", "temperatur", "rise"},
                     text="Heavy load made the CPU temperature rise.")  # fmt: skip
    assert cause_score(monitored, effect, {}, set(), strict=True) == 0.0
    assert cause_score(rising, effect, {}, set(), strict=True) >= FLOOR
    # The ranking's lenient walk keeps weighing it by its embedding.
    assert cause_score(monitored, effect, {}, set()) > 0


def test_two_versions_of_one_statement_are_no_step():
    # "The vendor raised the licence fee by 10%." / "The vendor cut the licence fee by 10%."
    raised = profile("raised", A, theme={"vendor", "raise"}, rheme={"licenc", "fee"})
    cut = profile("cut", B, theme={"vendor", "cut"}, rheme={"licenc", "fee"})
    raised = Profile(**{**raised.__dict__, "rheme": frozenset({"licenc", "fee", "vendor"})})
    assert cause_score(raised, cut, {}, set()) >= FLOOR  # the ranking walk takes it
    assert cause_score(raised, cut, {}, set(), strict=True) == 0.0
    assert cause_score(cut, raised, {}, set(), strict=True) == 0.0


def test_theme_and_rheme_are_the_halves_of_the_sentence_by_word_position(access):
    item = fact(access, "The night shift forgot to close the loading gate before the storm.")
    pool = Pool(access.tenant_id, [item.pk])
    theme, rheme = pool.halves[item.pk]
    assert {"night", "shift", "forgot"} <= theme and {"gate", "storm"} <= rheme
    assert not theme & rheme
    # The English rules read a text's words once (the answer's walk weighs it many times).
    reading = read_words(pool.profiles([item.pk])[item.pk].text)
    assert reading is read_words(item.content) and {"gate", "storm"} <= reading.referred


def test_a_pool_counts_no_number_it_never_uses(access, monkeypatch):
    from memory.retrieval import lexical

    item = fact(access, "Order 4521 left dock 12 two hours late.")
    asked: list[tuple[str, str]] = []
    real = lexical.tenant_stats

    def spy(tenant_id, terms):
        asked.extend(terms)
        return real(tenant_id, terms)

    monkeypatch.setattr(lexical, "tenant_stats", spy)
    pool = Pool(access.tenant_id, [item.pk])
    # The words are counted and may be terms; the numbers are neither.
    counted, terms = {lexeme for _lang, lexeme in asked}, pool.terms[item.pk]
    assert {"order", "dock"} <= counted and {"order", "dock"} <= terms
    assert not any(lexeme.isdigit() for lexeme in counted | terms)


def test_the_middle_word_of_an_odd_count_is_in_the_rheme(access):
    # Nine words: "agua" is the fifth, what the sentence says of the drought.
    item = fact(access, "La sequía redujo el agua disponible para las plantas.")
    assert item.text_language == "spanish"
    theme, rheme = Pool(access.tenant_id, [item.pk]).halves[item.pk]
    assert "sequ" in theme and {"agu", "plant"} <= rheme


def test_words_derived_from_one_word_meet_and_compounds_do_not():
    assert _derived(_roots(frozenset({"acquir", "rival"})), _roots(frozenset({"acquisit", "expand"})))
    assert _derived(_roots(frozenset({"öksürük"})), _roots(frozenset({"öksürüğe"})))
    # A compound names another thing; short lexemes have no crude stem at all.
    assert not _derived(_roots(frozenset({"klant"})), _roots(frozenset({"klantenservic"})))
    assert not _derived(_roots(frozenset({"rate"})), _roots(frozenset({"rated"})))
    assert not _derived(_roots(frozenset({"acquir"})), _roots(frozenset({"market"})))


def test_a_derived_word_joins_two_facts_and_carries_the_progression():
    # "The increased capital allowed the firm to acquire a rival." -> "The acquisition
    # expanded its market share by 15%.": no lexeme in common, one word derived.
    cause = profile("capital", A, theme={"increas", "capit", "allow"}, rheme={"firm", "acquir", "rival"})
    effect = profile("share", B, theme={"acquisit", "expand"}, rheme={"market", "share"})
    assert cause_score(cause, effect, {}, set(), strict=True) == pytest.approx(0.8 + LINK_BONUS, abs=1e-6)
    assert [pk for pk, _ in walk_back("share", _Pool([effect, cause]), {}, set(), strict=True)] == [  # type: ignore[arg-type]
        "capital",
        "share",
    ]
    # The same two facts through a compound ("klantenservice" / "klant"): never weighed.
    compound = profile("service", A, theme={"klantenservic"}, rheme={"chat", "optie"})
    customer = profile("customer", B, theme={"klant", "meld"}, rheme={"inlogproblem", "ticket"})
    assert [pk for pk, _ in walk_back("customer", _Pool([customer, compound]), {}, set(), strict=True)] == [  # type: ignore[arg-type]
        "customer"
    ]


def test_a_named_cause_span_is_its_content_words(access):
    # "Cette panne a entraîné ..." names "Cette panne": the demonstrative is no word of
    # what it names, and a fact stating "une panne" states all of it.
    effect = fact(access, "Cette panne a entraîné une perte de connexion Internet.", session_id="fr1")
    cause = fact(access, "Le client a signalé une panne de son routeur.", session_id="fr2")
    assert effect.text_language == "french"
    assert effect.causal_edges.get().cause == "Cette panne"
    pool = Pool(access.tenant_id, [effect.pk, cause.pk], per_language=True)
    profiles = pool.profiles([effect.pk, cause.pk])
    assert profiles[effect.pk].named == stems(["panne"])
    assert _states(profiles[effect.pk].named, profiles[cause.pk].words)


def test_hubs_are_counted_among_the_items_of_their_language(access):
    # Nine German facts share "Lieferung"; with hundreds of English items it would be
    # specific tenant-wide, but among the German items it is a hub and bridges nothing.
    german = [fact(access, f"Die Lieferung Nummer {n} kam am Hafen {name} an.", session_id=f"g{n}")
              for n, name in enumerate(["Kiel", "Bremen", "Emden", "Rostock", "Wismar", "Lübeck",
                                        "Husum", "Leer", "Stade"])]  # fmt: skip
    MemoryItem.objects.bulk_create(
        MemoryItem(
            tenant_id=access.tenant_id, agent=access.agent, scope="agent", scopes=["agent"],
            content_hash=f"h{n}", content=f"Shipment log entry {n} was filed by the harbour office.",
            embedding=[0.0] * 383 + [1.0],
        )
        for n in range(200)
    )  # fmt: skip
    assert MemoryItem.objects.filter(tenant_id=access.tenant_id, text_language="german").count() >= 9
    ids = [item.pk for item in german]
    tenant_wide = Pool(access.tenant_id, ids)
    per_language = Pool(access.tenant_id, ids, per_language=True)
    assert any("liefer" in terms for terms in tenant_wide.terms.values())
    assert not any("liefer" in terms for terms in per_language.terms.values())


def test_a_change_the_other_way_is_no_cause():
    # "The company increased its marketing budget." cannot be why "Lower marketing spend
    # led to fewer new customer acquisitions."; "... reduced its marketing budget" can.
    effect = profile(
        "fewer",
        B,
        theme={"lower", "market", "spend"},
        rheme={"fewer", "custom", "acqui"},
        english=True,
        text="Lower marketing spend led to fewer new customer acquisitions.",
    )
    increased = profile(
        "increased",
        A,
        theme={"compa", "incre"},
        rheme={"market", "budge"},
        english=True,
        text="The company increased its marketing budget.",
    )
    reduced = profile(
        "reduced",
        A,
        theme={"compa", "reduc"},
        rheme={"market", "budge"},
        english=True,
        text="The company reduced its marketing budget by 20%.",
    )
    assert cause_score(increased, effect, {}, set()) >= FLOOR  # the ranking walk takes it
    assert cause_score(increased, effect, {}, set(), strict=True) == 0.0
    assert cause_score(reduced, effect, {}, set(), strict=True) >= FLOOR
    # A change denied is none: "did not increase" is no change the other way.
    denied = profile(
        "denied",
        A,
        theme={"compa", "incre"},
        rheme={"market", "budge"},
        english=True,
        text="The company did not increase its marketing budget.",
    )
    assert cause_score(denied, effect, {}, set(), strict=True) >= FLOOR  # fmt: skip
    # The words are English: in another language the rule does not read them.
    foreign = [Profile(**{**p.__dict__, "english": False}) for p in (increased, effect)]
    assert cause_score(*foreign, {}, set(), strict=True) >= FLOOR
    # Another quantity going the other way is no contradiction: cheaper prices, more demand.
    cut = profile(
        "cut", A, theme={"store", "cut"}, rheme={"price"}, english=True, text="The store cut its prices."
    )
    demand = profile(
        "demand",
        B,
        theme={"higher", "deman"},
        rheme={"price", "queue"},
        english=True,
        text="Higher demand after the price change lengthened the queues.",
    )
    assert cause_score(cut, demand, {}, set(), strict=True) >= FLOOR  # fmt: skip


def test_what_names_with_the_what_the_effect_brings_in_with_a_comes_after_it():
    deployed = profile(
        "deployed",
        A,
        theme={"data", "cente", "deplo"},
        rheme={"gpu", "clust"},
        english=True,
        text="The data center deployed a new GPU cluster.",
    )
    bill = profile(
        "bill",
        B,
        theme={"gpu", "clust"},
        rheme={"data", "cente", "elect", "bill"},
        english=True,
        text="The GPU cluster also raised the data center's electricity bill.",
    )
    assert cause_score(bill, deployed, {}, set()) >= FLOOR  # the ranking walk takes it
    assert cause_score(bill, deployed, {}, set(), strict=True) == 0.0
    # The other way round the rule has nothing against it.
    assert cause_score(deployed, bill, {}, set(), strict=True) >= FLOOR
    # One word of a longer phrase is no reference to it: "the power grid" / "a power outage".
    grid = profile(
        "grid",
        B,
        theme={"power", "grid"},
        rheme={"faile"},
        english=True,
        text="The power grid failed at noon.",
    )
    outage = profile(
        "outage",
        A,
        theme={"storm"},
        rheme={"power", "outag"},
        english=True,
        text="The storm caused a power outage.",
    )
    assert not _presupposes(grid, outage) and _presupposes(bill, deployed)
    # A capital "A" inside a sentence is a name, not an article.
    company = profile(
        "company",
        A,
        theme={"compa"},
        rheme={"faile", "deliv"},
        english=True,
        text="Company A failed to deliver the goods.",
    )
    lawsuit = profile(
        "lawsuit",
        B,
        theme={"compa"},
        rheme={"lawsu"},
        english=True,
        text="The failed delivery led Company B to file a lawsuit.",
    )
    assert not _presupposes(lawsuit, company)
    opening = Profile(**{**company.__dict__, "text": "A failed delivery hit Company A."})
    assert _presupposes(lawsuit, opening)
    # Brought in with "a" and named with "the" in the effect too: it was known already.
    known = Profile(
        **{**deployed.__dict__, "text": "The data center deployed a new GPU cluster beside the GPU cluster."}
    )
    assert cause_score(bill, known, {}, set(), strict=True) >= FLOOR  # fmt: skip


class _Pool:
    """What walk_back reads of a pool: ids, specific terms and profiles."""

    def __init__(self, profiles: list[Profile]) -> None:
        self.ids = [p.pk for p in profiles]
        self.terms = {p.pk: p.words for p in profiles}
        self.roots = {p.pk: _roots(p.words) for p in profiles}
        self.said = {p.pk: normalize(p.text) for p in profiles}
        self._profiles = {p.pk: p for p in profiles}

    def profiles(self, pks: list[str]) -> dict[str, Profile]:
        return {pk: self._profiles[pk] for pk in pks}


def test_after_an_asserted_link_the_stated_chain_needs_a_strong_cause():
    # anchor <- root by a stored span link (score 1.3); a weak implicit cause (cosine 0.7,
    # no link bonus, under FALL_OFF) before the root: the ranking walk takes it, the
    # stated chain stops at the root.
    anchor = profile("anchor", [0.0, 1.0], theme={"runtim"}, rheme={"short"})
    root = profile("root", [1.0, 0.0], theme={"firmw"}, rheme={"power"})
    weak = profile("weak", [0.7, 0.71414], theme={"suppo"}, rheme={"power"})
    pool = _Pool([anchor, root, weak])
    asserted = {("root", "anchor"): (1.3, None)}
    assert FLOOR <= cause_score(weak, root, asserted, set()) < FALL_OFF
    assert [pk for pk, _ in walk_back("anchor", pool, asserted, set())] == ["weak", "root", "anchor"]  # type: ignore[arg-type]
    assert [pk for pk, _ in walk_back("anchor", pool, asserted, set(), strict=True)] == ["root", "anchor"]  # type: ignore[arg-type]
    # A strong one (cosine 0.9) is still taken.
    strong = Profile(
        **{**weak.__dict__, "pk": "strong", "vector": np.asarray([0.9, 0.43589], dtype=np.float32)}
    )
    pool = _Pool([anchor, root, strong])
    assert [pk for pk, _ in walk_back("anchor", pool, asserted, set(), strict=True)] == [
        "strong",
        "root",
        "anchor",
    ]  # type: ignore[arg-type]


@pytest.mark.parametrize("strict", [False, True])
def test_a_sentence_stored_twice_is_stated_once(strict):
    # "Ayşe stand früh auf." written twice: each copy reads as the other's cause
    # (one vector, one theme), and a chain through both states it twice.
    effect = profile("effect", B, theme={"fruh"}, rheme={"kahvalt"}, text="Ayşe frühstückte in Ruhe.")
    first = profile("first", A, theme={"ayse"}, rheme={"fruh"}, text="Ayşe stand früh auf.")
    copy = Profile(**{**first.__dict__, "pk": "copy", "text": "ayşe  stand früh auf."})
    pool = _Pool([effect, first, copy])
    assert cause_score(copy, first, {}, set()) >= FLOOR  # the copy would be a step
    assert [pk for pk, _ in walk_back("effect", pool, {}, set(), strict=strict)] == ["first", "effect"]  # type: ignore[arg-type]
