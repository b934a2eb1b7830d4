"""Full text in each item's own language: detection at write time, the generated
column's configuration, BM25 terms per language, the console's filter and the
backfill of existing rows."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps as global_apps
from django.db import connection

from memory.enforcement import Keys
from memory.models import MemoryItem
from memory.retrieval import lexical
from memory.retrieval.hybrid import RecallQuery, keyword_query, retrieve
from memory.retrieval.language import CONFIGS, SIMPLE, detect
from memory.services.items import memory_update
from memory.tests.conftest import remember


def _keyword(access, query, top_k=5):
    rq = RecallQuery(query=query, scopes=("agent",), keys=Keys(narrow=True), top_k=top_k, mode="keyword")
    return [hit.item.content for hit in retrieve(access, rq)]


def _hybrid(access, query, top_k=5):
    rq = RecallQuery(query=query, scopes=("agent",), keys=Keys(narrow=True), top_k=top_k)
    return retrieve(access, rq)


def _stored_vector(pk) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT search_vector::text FROM memory_item WHERE id = %s", [pk])
        return cursor.fetchone()[0]


# --- detection ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("The retailer routes its northern orders through the Leeds depot.", "english"),
        ("Tom also bought a new coffee mug.", "english"),
        ("Die Lieferungen an den Kunden verzögerten sich um zwei Tage.", "german"),
        ("El servidor se reinició porque la memoria estaba llena.", "spanish"),
        ("Le serveur a redémarré parce que la mémoire était pleine.", "french"),
        ("De server werd herstart omdat het geheugen vol was.", "dutch"),
        ("Сервер перезапустился, потому что память была заполнена.", "russian"),
        ("Ο διακομιστής επανεκκινήθηκε.", "greek"),  # noqa: RUF001 - Greek on purpose
    ],
)
def test_detects_the_language_of_a_sentence(text, language):
    assert detect(text) == language


@pytest.mark.parametrize(
    ("text", "language"),
    [
        # "les" is no word of PostgreSQL's French list but one of its Spanish one.
        ("Les colis sont arrivés dans les entrepôts.", "french"),
        # Two function words shared by French, Italian and Spanish; the accents decide.
        ("La reparación del compresor tardó dos días.", "spanish"),
        ("La inflamación del hígado causa ictericia.", "spanish"),
    ],
)
def test_short_sentences_are_told_apart_by_their_letters_and_articles(text, language):
    assert detect(text) == language


@pytest.mark.parametrize("text", ["", "ERR-4471", "CPU temperature exceeded 85 degrees", "Lisbon, Porto"])
def test_latin_text_without_evidence_takes_the_deployment_language(text, settings):
    assert detect(text) == "english"
    settings.FEDMEM_TEXT_SEARCH_FALLBACK = "simple"
    assert detect(text) == SIMPLE


@pytest.mark.parametrize("text", ["Fog also delayed flights in Hamburg.", "I bought a new bike."])
def test_a_tie_that_holds_the_deployment_language_takes_it(text, settings):
    # "also" / "in" are German and Dutch words too, "i" / "a" Italian ones: no lead.
    assert detect(text) == "english"
    settings.FEDMEM_TEXT_SEARCH_FALLBACK = "simple"
    assert detect(text) == SIMPLE


def test_a_tie_without_the_deployment_language_stems_nothing():
    # Italian and Spanish hold "a" and "le" alike; French has no "a" in its list.
    assert detect("Marie a repeint le salon le mois dernier.") == SIMPLE


def test_text_without_evidence_in_other_letters_is_simple():
    # A guessed language never stems words it could not have written.
    assert detect("Žižkov") == SIMPLE


def test_mixed_text_takes_the_language_most_function_words_belong_to():
    german_with_english_terms = (
        "Nach dem Deployment ist der Load Balancer ausgefallen, und die Requests wurden nicht "
        "mehr an das Backend weitergeleitet."
    )
    assert detect(german_with_english_terms) == "german"
    english_quoting_german = 'The sign at the depot said "Einfahrt verboten" and the drivers waited outside.'
    assert detect(english_quoting_german) == "english"


@pytest.mark.django_db
def test_every_detected_language_has_a_postgres_configuration():
    with connection.cursor() as cursor:
        cursor.execute("SELECT cfgname FROM pg_ts_config")
        shipped = {row[0] for row in cursor.fetchall()}
    assert set(CONFIGS) <= shipped


# --- write path and generated column -----------------------------------------------------------


def test_an_item_is_stemmed_with_its_own_language(access):
    item = remember(access, "Die Lieferungen an den Kunden verzögerten sich.", scope="agent").item
    item.refresh_from_db()
    assert item.text_language == "german"
    vector = _stored_vector(item.pk)
    # German stems and German stopwords dropped (the English configuration keeps "die", "den").
    assert "'liefer'" in vector and "'kund'" in vector
    assert "'die'" not in vector and "'den'" not in vector


def test_an_update_detects_the_language_of_the_new_content(access):
    item = remember(access, "The shipment left the warehouse on time.", scope="agent").item
    memory_update(access=access, item_id=item.pk, content="Die Sendung verließ das Lager pünktlich.")
    item.refresh_from_db()
    assert item.text_language == "german"
    assert "'lag'" in _stored_vector(item.pk)


def test_a_german_item_is_found_by_another_form_of_its_words(access):
    remember(access, "Die Lieferungen an den Kunden verzögerten sich um zwei Tage.", scope="agent")
    remember(access, "The deliveries to the customer were delayed by two days.", scope="agent")
    remember(access, "Der Lagerbestand wurde im März gezählt.", scope="agent")
    # "Lieferung" (singular) and "Kunde" meet "Lieferungen" and "Kunden" through the
    # German stemmer; the English one keeps them apart.
    assert _keyword(access, "Warum kam die Lieferung beim Kunde zu spät?")[0] == (
        "Die Lieferungen an den Kunden verzögerten sich um zwei Tage."
    )
    # English stays English: "delivery" meets "deliveries".
    assert _keyword(access, "why was the delivery late")[0] == (
        "The deliveries to the customer were delayed by two days."
    )


def test_hybrid_reads_the_lexical_signal_of_a_foreign_language_item(access):
    remember(access, "La entrega al cliente se retrasó dos días.", scope="agent")
    remember(access, "El inventario se contó en marzo.", scope="agent")
    [hit, *_] = _hybrid(access, "¿Por qué se retrasaron las entregas?")
    assert hit.item.content == "La entrega al cliente se retrasó dos días."
    assert hit.keyword_rank == 1 and hit.signals["lexical"] > 0


def test_statistics_count_terms_per_language(access):
    remember(access, "Die Lieferung kam zu spät.", scope="agent")
    remember(access, "Die Lieferung war vollständig.", scope="agent")
    remember(access, "The delivery was complete.", scope="agent")
    lexical.cache.clear()
    terms = lexical.query_lexemes("Lieferung", ["german", "english"])
    stats = lexical.tenant_stats(access.tenant_id, terms)
    assert stats.df[("german", "liefer")] == 2
    # The English configuration's lexeme of the same word counts English items only.
    assert stats.df[("english", "lieferung")] == 0
    assert stats.languages == {"german": 2, "english": 1}


def test_statistics_are_read_again_once_the_tenant_has_grown(
    access, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(lexical, "GROWTH_CHECK_SECONDS", 0.0)
    remember(access, "Die Lieferung kam zu spät.", scope="agent")
    lexical.cache.clear()
    term = ("german", "liefer")
    assert lexical.tenant_stats(access.tenant_id, [term]).df[term] == 1
    # Fewer writes than the growth floor: the cached statistics stand (within the TTL).
    with django_capture_on_commit_callbacks(execute=True):
        remember(access, "Die Lieferung Nummer 2 war vollständig.", scope="agent")
    stats = lexical.tenant_stats(access.tenant_id, [term])
    assert stats.df[term] == 1 and stats.languages == {"german": 1}
    # Written but not yet committed: not counted, so nothing is read again.
    with django_capture_on_commit_callbacks(execute=False) as pending:
        for n in range(lexical.GROWTH_FLOOR):
            remember(access, f"Die Lieferung Nummer {n + 3} kam am Hafen an.", scope="agent")
    assert lexical.tenant_stats(access.tenant_id, [term]).df[term] == 1
    # Committed (the callbacks run): the next query counts every item and term again.
    for callback in pending:
        callback()
    stats = lexical.tenant_stats(access.tenant_id, [term])
    assert stats.df[term] == lexical.GROWTH_FLOOR + 2
    assert stats.languages == {"german": lexical.GROWTH_FLOOR + 2}


def test_a_write_is_stored_when_its_growth_count_fails(
    access, monkeypatch, django_capture_on_commit_callbacks
):
    from django.db import transaction

    def counters_down(tenant_id, count):
        raise ConnectionError("counters backend unreachable")

    monkeypatch.setattr(lexical, "note_written", counters_down)
    after = []
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        outcome = remember(access, "Die Lieferung kam zu spät.", scope="agent")
        transaction.on_commit(lambda: after.append("ran"))
    assert len(callbacks) >= 2
    # The write stands, and a hook registered after the failing count still ran.
    assert MemoryItem.objects.filter(pk=outcome.item.pk).exists()
    assert after == ["ran"]


def test_statistics_are_read_when_the_shared_count_is_unreadable(access, monkeypatch):
    from django.core.cache import caches

    monkeypatch.setattr(lexical, "GROWTH_CHECK_SECONDS", 0.0)
    remember(access, "Die Lieferung kam zu spät.", scope="agent")
    lexical.cache.clear()

    def unreachable(*args, **kwargs):
        raise ConnectionError("counters backend unreachable")

    monkeypatch.setattr(caches["counters"], "get", unreachable)
    term = ("german", "liefer")
    # Read, then kept for their TTL: the growth check cannot look, so it does not refresh.
    assert lexical.tenant_stats(access.tenant_id, [term]).df[term] == 1
    assert lexical.tenant_stats(access.tenant_id, [term]).df[term] == 1
    rq = RecallQuery(query="Lieferung", scopes=("agent",), keys=Keys(narrow=True), top_k=3)
    assert [hit.item.content for hit in retrieve(access, rq)] == ["Die Lieferung kam zu spät."]


def test_growth_counted_by_another_process_is_seen_too(access, monkeypatch):
    monkeypatch.setattr(lexical, "GROWTH_CHECK_SECONDS", 0.0)
    remember(access, "Die Lieferung kam zu spät.", scope="agent")
    lexical.cache.clear()
    term = ("german", "liefer")
    assert lexical.tenant_stats(access.tenant_id, [term]).df[term] == 1
    # Rows this process did not write; the other process's write path counts them on
    # the shared counters.
    MemoryItem.objects.bulk_create(
        MemoryItem(
            tenant_id=access.tenant_id, agent=access.agent, scope="agent", scopes=["agent"],
            content_hash=f"h{n}", content=f"Die Lieferung Nummer {n} kam an.", text_language="german",
            embedding=[0.0] * 383 + [1.0],
        )
        for n in range(30)
    )  # fmt: skip
    assert lexical.tenant_stats(access.tenant_id, [term]).df[term] == 1
    lexical.note_written(access.tenant_id, 30)
    assert lexical.tenant_stats(access.tenant_id, [term]).df[term] == 31
    # Looked at once per GROWTH_CHECK_SECONDS: within it, a later bump waits.
    monkeypatch.setattr(lexical, "GROWTH_CHECK_SECONDS", 3600.0)
    MemoryItem.objects.filter(tenant_id=access.tenant_id, content_hash="h0").delete()
    lexical.note_written(access.tenant_id, 100)
    assert lexical.tenant_stats(access.tenant_id, [term]).df[term] == 31


def test_a_query_in_a_language_new_to_the_tenant_is_still_analysed_in_it(access):
    remember(access, "The warehouse opened in March.", scope="agent")
    lexical.cache.clear()
    assert lexical.query_languages(access.tenant_id, "warehouse") == ["english"]
    # The cached languages do not list German yet; the query's own language is added.
    remember(access, "Die Lieferungen verzögerten sich.", scope="agent")
    assert "german" in lexical.query_languages(access.tenant_id, "Warum verzögerten sich die Lieferungen?")
    assert _keyword(access, "Warum verzögerte sich die Lieferung?") == ["Die Lieferungen verzögerten sich."]


def test_the_console_filter_matches_each_language_by_its_own_stems(access):
    german = remember(access, "Die Lieferungen an den Kunden verzögerten sich.", scope="agent").item
    english = remember(access, "The deliveries were delayed.", scope="agent").item
    mine = MemoryItem.objects.filter(tenant_id=access.tenant_id)
    assert list(mine.filter(search_vector=keyword_query("Lieferung Kunde", require_all=True))) == [german]
    assert list(mine.filter(search_vector=keyword_query("delivery delayed", require_all=True))) == [english]
    # Every word required: a German word and an English word are in no single item.
    assert not mine.filter(search_vector=keyword_query("Lieferung delayed", require_all=True)).exists()


# --- backfill migration -------------------------------------------------------------------------


def test_the_migration_backfills_the_language_of_existing_items(access):
    migration = importlib.import_module("memory.migrations.0011_add_item_text_language")  # the backfill step
    german = remember(access, "Die Lieferungen an den Kunden verzögerten sich.", scope="agent").item
    english = remember(access, "The deliveries were delayed.", scope="agent").item
    code = remember(access, "ERR-4471", scope="agent").item
    # Rows as they were before the migration: no language, so the simple configuration.
    MemoryItem.objects.filter(pk__in=[german.pk, english.pk]).update(text_language=SIMPLE)
    assert "'lieferungen'" in _stored_vector(german.pk)

    migration.detect_languages(global_apps, None)
    languages = dict(MemoryItem.objects.values_list("pk", "text_language"))
    assert languages[german.pk] == "german" and languages[english.pk] == "english"
    assert languages[code.pk] == "english"  # no sign of a language: the deployment's
    # The generated column follows the language: German stems once backfilled.
    assert "'liefer'" in _stored_vector(german.pk)


def test_idf_is_taken_among_the_items_of_the_terms_language():
    # "what" in three of four unstemmed items is common there, however large the
    # tenant's English side; "forklift" in three of a thousand English items is rare.
    stats = lexical.Stats(
        documents=1004,
        avg_length=8.0,
        df={("simple", "what"): 3, ("english", "forklift"): 3},
        languages={"english": 1000, "simple": 4},
    )
    assert stats.idf(("simple", "what")) < 0.5 < stats.idf(("english", "forklift"))
