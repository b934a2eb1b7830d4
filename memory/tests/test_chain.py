"""The backward chain walk an answer states (memory/reasoning/chain.py, strict rules):
thematic progression by word position, siblings, direction, hubs per language."""

from __future__ import annotations

import numpy as np
import pytest

from memory.models import MemoryItem
from memory.reasoning.chain import FLOOR, LINK_BONUS, Pool, Profile, cause_score
from memory.tests.graph_helpers import fact


def profile(pk: str, vector: list[float], *, theme: set[str], rheme: set[str], english: bool = False,
            cause_vector: list[float] | None = None) -> Profile:  # fmt: skip
    words = frozenset(theme | rheme)
    return Profile(
        pk=pk, text=pk, vector=np.asarray(vector, dtype=np.float32),
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
