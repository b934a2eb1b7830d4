"""Cause -> effect from connectives in languages the English parser cannot read
(memory.extraction.cues): every table, both directions of wording, and the write
path storing edges and span links for them."""

# Sentences in other alphabets are the point of these tests.
# ruff: noqa: RUF001, RUF003

from __future__ import annotations

import pytest

from memory.extraction.causal import extract_relations, rule_relations
from memory.extraction.cues import CUES, cue_relations, span_terms
from memory.extraction.nlp import parse
from memory.models import CausalEdge, SpanLink
from memory.retrieval.language import detect
from memory.tests.graph_helpers import fact

# (language, sentence, cause, effect): sentences written for these tests, one or more
# per connective kind of each table.
CASES = [
    ("german", "Der volle Datenträger führt dazu, dass der Dienst abstürzt.", "Der volle Datenträger",
     "der Dienst abstürzt"),
    ("german", "Der Stromausfall verursachte einen Datenverlust im Lager.", "Der Stromausfall",
     "einen Datenverlust im Lager"),
    ("german", "Wenn der Speicher voll ist, stürzt der Dienst ab.", "der Speicher voll ist",
     "stürzt der Dienst ab"),
    ("german", "Der Flug wurde gestrichen, weil der Pilot krank war.", "der Pilot krank war",
     "Der Flug wurde gestrichen"),
    ("german", "Die Lieferung kam wegen des Streiks zu spät.", "des Streiks zu spät", "Die Lieferung kam"),
    ("german", "Die Platte lief voll, was zu einem Absturz des Dienstes führte.", "Die Platte lief voll",
     "einem Absturz des Dienstes"),
    ("dutch", "De koeling viel uit, wat tot een hogere temperatuur leidde.", "De koeling viel uit",
     "een hogere temperatuur"),
    ("dutch", "De volle schijf leidde tot een crash van de database.", "De volle schijf",
     "een crash van de database"),
    ("dutch", "Omdat de server oververhit raakte, viel de website uit.", "de server oververhit raakte",
     "viel de website uit"),
    ("dutch", "De vlucht werd geannuleerd vanwege de storm.", "de storm", "De vlucht werd geannuleerd"),
    ("french", "La panne du routeur a entraîné une perte de connexion.", "La panne du routeur",
     "une perte de connexion"),
    ("french", "Lorsque la mémoire est pleine, le service redémarre.", "la mémoire est pleine",
     "le service redémarre"),
    ("french", "Le vol a été annulé à cause de la tempête.", "la tempête", "Le vol a été annulé"),
    ("french", "La coupure a été provoquée par un orage violent.", "un orage violent", "La coupure"),
    ("spanish", "La sequía provocó una caída de la cosecha.", "La sequía", "una caída de la cosecha"),
    ("spanish", "Cuando sube la temperatura, el sistema reduce la frecuencia.", "sube la temperatura",
     "el sistema reduce la frecuencia"),
    ("spanish", "El pedido llegó tarde debido a la huelga.", "la huelga", "El pedido llegó tarde"),
    ("spanish", "El apagón fue causado por una tormenta.", "una tormenta", "El apagón"),
    ("italian", "La siccità ha causato un calo del raccolto.", "La siccità", "un calo del raccolto"),
    ("italian", "Il volo è stato cancellato a causa della nebbia.", "nebbia",
     "Il volo è stato cancellato"),
    ("portuguese", "A falta de chuva provocou uma queda na produção.", "A falta de chuva",
     "uma queda na produção"),
    ("portuguese", "O voo atrasou devido ao nevoeiro.", "nevoeiro", "O voo atrasou"),
    # Preposed causal phrases: German and Dutch end them at the finite verb, no comma.
    ("german", "Durch den Ausfall des Kühlsystems stieg die Temperatur im Serverraum.",
     "den Ausfall des Kühlsystems", "stieg die Temperatur im Serverraum"),
    ("german", "Wegen der hohen Last auf dem Server brach die Verbindung ab.",
     "der hohen Last auf dem Server", "brach die Verbindung ab"),
    ("dutch", "Door de storing in het netwerk kon het magazijn geen orders verwerken.",
     "de storing in het netwerk", "kon het magazijn geen orders verwerken"),
    ("dutch", "Vanwege de drukte in de winkel belde de klant het bedrijf opnieuw.", "de drukte in de winkel",
     "belde de klant het bedrijf opnieuw"),
    ("french", "À cause de la grève, les colis sont arrivés en retard.", "la grève",
     "les colis sont arrivés en retard"),
    # Elided connectives: the next word follows the apostrophe, straight or curly.
    ("french", "Le camion a été bloqué sur l'autoroute à cause d'un accident.", "un accident",
     "Le camion a été bloqué sur l'autoroute"),
    ("french", "Le vol a été annulé à cause d’une tempête.", "une tempête", "Le vol a été annulé"),
    ("french", "Lorsqu'il pleut, les routes de la région deviennent glissantes.", "il pleut",
     "les routes de la région deviennent glissantes"),
    ("french", "La livraison a été retardée parce qu'il manquait un camion.", "il manquait un camion",
     "La livraison a été retardée"),
    ("french", "Le client est parti, si bien qu'il a annulé la commande.", "Le client est parti",
     "il a annulé la commande"),
    ("french", "La route a été fermée, ce qui a entraîné qu'il a fallu un détour.", "La route a été fermée",
     "il a fallu un détour"),
    ("italian", "Il volo è stato cancellato a causa dell'uragano.", "uragano", "Il volo è stato cancellato"),
    ("italian", "Le vendite sono cresciute grazie al nuovo prodotto.", "nuovo prodotto",
     "Le vendite sono cresciute"),
    # The copula before a backward cue is no part of the effect.
    ("french", "Le retard est dû au mauvais temps.", "mauvais temps", "Le retard"),
    ("spanish", "El retraso del tren fue debido a la nieve.", "la nieve", "El retraso del tren"),
    ("italian", "Il ritardo del volo è dovuto al maltempo.", "maltempo", "Il ritardo del volo"),
    # "à" is "a" + "a": "devido à tempestade", "graças à chuva".
    ("portuguese", "O atraso do voo foi devido à tempestade.", "tempestade", "O atraso do voo"),
    ("portuguese", "Graças à chuva, a colheita foi boa.", "chuva", "a colheita foi boa"),
    ("spanish", "Gracias a la lluvia, el embalse se llenó.", "la lluvia", "el embalse se llenó"),
    ("italian", "A causa della neve, la strada è stata chiusa.", "neve", "la strada è stata chiusa"),
    ("portuguese", "Por causa da greve, o porto parou.", "greve", "o porto parou"),
    # A modal is part of the connective: the cause is what comes before it.
    ("dutch", "Een beschadigd endotheel kan leiden tot een verharding van de bloedvaten.",
     "Een beschadigd endotheel", "een verharding van de bloedvaten"),
    ("dutch", "Een hoge bloeddruk kan ook leiden tot nierfalen bij oudere patiënten.", "Een hoge bloeddruk",
     "nierfalen bij oudere patiënten"),
    ("dutch", "Een tekort aan slaap kan tot ernstige concentratieproblemen leiden.", "Een tekort aan slaap",
     "ernstige concentratieproblemen"),
    # the second link's cause is the first one's effect
    ("dutch", "De storing in het magazijn kan leiden tot vertraging, wat tot klachten zal leiden.",
     "vertraging", "klachten"),
    ("german", "Ein Mangel an Vitamin D kann zu einer schwachen Knochenstruktur führen.",
     "Ein Mangel an Vitamin D", "einer schwachen Knochenstruktur"),
    ("turkish", "Fırtına yüzünden uçuş iptal edildi.", "Fırtına", "uçuş iptal edildi"),
    ("turkish", "Yağmur yağdığı için maç ertelendi.", "Yağmur yağ", "maç ertelendi"),
    ("turkish", "Yağmur yağınca maç ertelendi.", "Yağmur yağ", "maç ertelendi"),
    ("turkish", "Aşırı ısınma, sunucunun kapanmasına neden oldu.", "Aşırı ısınma", "sunucunun kapanmasına"),
]  # fmt: skip


@pytest.mark.parametrize(("language", "text", "cause", "effect"), CASES)
def test_connectives_give_cause_and_effect_in_both_directions(language, text, cause, effect):
    found = [(r.cause, r.effect) for r in cue_relations(text, language)]
    assert (cause, effect) in found, found


def test_every_table_is_tested_and_detected_as_itself():
    # A table no detected text ever reaches would be dead: each language of CASES is
    # told apart by the detector from its own test sentences.
    assert {language for language, *_ in CASES} == set(CUES)
    for language, text, *_ in CASES:
        if len(text.split()) >= 6:
            assert detect(text) == language, text


@pytest.mark.parametrize(
    ("language", "text"),
    [
        ("german", "Der Techniker hat die Leitungen des Kunden überprüft."),
        ("french", "Le client a signalé une panne de son routeur."),
        ("spanish", "La causa del problema sigue sin estar clara."),  # "causa" the noun
        ("dutch", "De monteur heeft de kabels gecontroleerd."),
        ("turkish", "Teknisyen kabloları kontrol etti."),
        # "-ınca" endings that say no "when": a postposition, an adverb, "as far as".
        ("turkish", "Toplantı süresince telefon kapalı kaldı."),
        ("turkish", "Ekip yeterince test yapmadı."),
        ("turkish", "Bildiğince anlattı."),
        ("german", "Wenn möglich"),  # an opening with no clause after it
        # A preposed phrase with no verb after it and no comma: nothing is guessed.
        ("german", "Durch den Tunnel zum Bahnhof"),
        ("dutch", "Door de regen"),
        # The preposition inside a sentence is no opening ("door" of the passive agent).
        ("dutch", "De rentetarieven zijn door de Centrale Bank verhoogd."),
    ],
)
def test_no_connective_no_relation(language, text):
    assert cue_relations(text, language) == []


def test_a_sentence_states_each_connective_once():
    text = (
        "La liberación de insulina provoca que las células absorban glucosa, lo que lleva a la hipoglucemia"
    )
    found = [(r.cause, r.effect, r.cue) for r in cue_relations(text, "spanish")]
    assert ("La liberación de insulina", "las células absorban glucosa", "provoca que") in found
    assert any(e == "la hipoglucemia" and cue == "lo que lleva a" for _c, e, cue in found), found
    # "lo que lleva a" is one connective, not also "lleva a" inside it.
    assert len(found) == 2


_DE_CHAIN = "Der Server ist abgestürzt, was zu einem Ausfall führte, der zu Beschwerden der Kunden führte."
_ES_CHAIN = "El proveedor se retrasó, lo que provocó una parada de la producción, lo que causó cancelaciones."
_FR_CHAIN = (
    "Le fournisseur a pris du retard, ce qui a entraîné l'arrêt de l'usine, ce qui a provoqué un report."
)
_NL_CHAIN = "De leverancier was te laat, wat leidde tot een productiestop, wat leidde tot annuleringen."


@pytest.mark.parametrize(
    ("language", "text", "links"),
    [
        ("german", _DE_CHAIN,
         [("Der Server ist abgestürzt", "einem Ausfall"), ("einem Ausfall", "Beschwerden der Kunden")]),
        ("spanish", _ES_CHAIN,
         [("El proveedor se retrasó", "una parada de la producción"),
          ("una parada de la producción", "cancelaciones")]),
        ("french", _FR_CHAIN,
         [("Le fournisseur a pris du retard", "l'arrêt de l'usine"), ("l'arrêt de l'usine", "un report")]),
        # the same connective twice, and a cause named only by the relative pronoun
        ("dutch", _NL_CHAIN,
         [("De leverancier was te laat", "een productiestop"), ("een productiestop", "annuleringen")]),
    ],
)  # fmt: skip
def test_a_sentence_chaining_connectives_states_each_link(language, text, links):
    assert [(r.cause, r.effect) for r in cue_relations(text, language)] == links


def test_a_cause_only_naming_an_earlier_effect_is_no_continuation_of_it():
    # "la sequía del sur" holds the first link's effect but not its connective: its own.
    found = cue_relations("El calor provocó la sequía, y la sequía del sur provocó incendios.", "spanish")
    assert [(r.cause, r.effect) for r in found] == [
        ("El calor", "la sequía"),
        ("la sequía del sur", "incendios"),
    ]


def test_a_verb_final_clause_after_a_comma_has_the_clause_before_as_cause():
    # Not the whole sentence before it.
    found = cue_relations("Am Montag stieg die Last, was zu einer höheren Latenz führt.", "german")
    assert [(r.cause, r.effect) for r in found] == [("Am Montag stieg die Last", "einer höheren Latenz")]
    found = cue_relations(
        "Nach dem Update, am Montag, stieg die Last, was zu einer höheren Latenz führt.", "german"
    )
    assert [(r.cause, r.effect) for r in found] == [("stieg die Last", "einer höheren Latenz")]


def test_the_english_rules_leave_other_languages_to_the_tables():
    german = "Wenn der Speicherverbrauch so hoch ist, reduziert das System die Zuweisung."
    # Read through the English parse, "so" was taken for the connective of "X, so Y".
    assert any(r.cue == "so" for r in rule_relations(parse([german])[0]))
    found = extract_relations(german, parse([german])[0])
    assert [(name, r.cue) for name, r in found] == [("cues", "wenn")]
    english = "When the queue backs up, the workers time out."
    assert [name for name, _ in extract_relations(english, parse([english])[0])] == ["rules"]


def test_span_terms_drop_the_languages_stopwords():
    assert span_terms("die Antwortzeiten der Anwendung steigen", "german") == ["antwo", "anwen", "steig"]
    assert span_terms("la pérdida de la cosecha", "spanish") == ["cosec", "pérdi"]


def test_a_german_chain_is_stored_with_its_edges_and_span_link(world, access):
    first = fact(
        access, "Der Stromausfall im Rechenzentrum führte zu einem Ausfall der Kühlung.", session_id="1"
    )
    second = fact(access, "Der Ausfall der Kühlung verursachte eine Überhitzung der Server.", session_id="b")
    edges = {e.item_id: e for e in CausalEdge.objects.filter(item__in=[first, second])}
    assert (edges[first.pk].cause, edges[first.pk].effect, edges[first.pk].extractor) == (
        "Der Stromausfall im Rechenzentrum", "einem Ausfall der Kühlung", "cues",
    )  # fmt: skip
    assert edges[second.pk].cue == "verursachte"
    # The first's effect span and the second's cause span name one event: linked by terms.
    assert edges[first.pk].effect_terms == ["ausfa", "kühlu"]
    link = SpanLink.objects.get(source=edges[first.pk], target=edges[second.pk])
    assert link.method == "terms"


def test_a_postposition_ending_like_a_converb_is_no_connective():
    # "gün boyunca" ("all day long") ends as "-unca" ("when") does: the one connective
    # of the sentence is "yol açtı", and "boyunca" stays in its effect.
    text = "Kahvaltıyı atlamaması, gün boyunca enerjik hissetmesine yol açtı."
    found = [(r.cause, r.effect, r.cue) for r in cue_relations(text, "turkish")]
    assert found == [("Kahvaltıyı atlamaması", "gün boyunca enerjik hissetmesine", "yol açtı")]
