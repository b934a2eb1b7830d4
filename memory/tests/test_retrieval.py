"""Ranked retrieval: hybrid quality on a labelled set, filters applied before ranking, knobs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from governance.services.policies import policy_version_create
from memory.enforcement import Keys, system_access
from memory.models import MemoryItem
from memory.retrieval.hybrid import RecallQuery, retrieve
from memory.services.items import MemoryDraft, memory_remember, memory_remember_batch
from memory.tests.conftest import remember
from memory.tests.data.retrieval_set import MEMORIES, QUERIES


def _recall(access, query, *, mode="hybrid", top_k=5, scopes=("user",), user_id="cust-1", **extra):
    keys = Keys(user_id=user_id, session_id=extra.pop("session_id", None), narrow=True)
    return retrieve(
        access, RecallQuery(query=query, scopes=scopes, keys=keys, top_k=top_k, mode=mode, **extra)
    )


def _cosine(hit):
    """The cosine a hit's fused score uses: its own, its best sentence's weighed in."""
    weight = settings.FEDMEM_HYBRID_SENTENCE_WEIGHT
    return (1 - weight) * hit.similarity + weight * hit.signals.get("sentence", hit.similarity)


def _contents(hits):
    return [hit.item.content for hit in hits]


def test_hybrid_beats_vector_only_and_keyword_only_on_the_labelled_set(access):
    by_id = {}
    for key, content in MEMORIES.items():
        by_id[remember(access, content).item.pk] = key

    def quality(mode):
        reciprocal_ranks, first = [], 0
        for query, relevant in QUERIES:
            ranked = [by_id[hit.item.pk] for hit in _recall(access, query, mode=mode, top_k=5)]
            rank = next((i for i, key in enumerate(ranked, 1) if key in relevant), None)
            reciprocal_ranks.append(1 / rank if rank else 0.0)
            first += rank == 1
        return sum(reciprocal_ranks) / len(QUERIES), first

    hybrid, vector, keyword = quality("hybrid"), quality("vector"), quality("keyword")
    # Mean reciprocal rank, then how many queries have the relevant memory first.
    assert hybrid[0] > vector[0] and hybrid[0] > keyword[0], (hybrid, vector, keyword)
    assert hybrid[1] > vector[1] and hybrid[1] > keyword[1], (hybrid, vector, keyword)


def test_each_mode_reports_its_own_signals(access):
    remember(access, "Checkout fails with error ERR-4471 when the coupon field is left empty.")
    [hybrid] = _recall(access, "ERR-4471 checkout", top_k=1)
    assert hybrid.vector_rank == 1 and hybrid.keyword_rank == 1
    # Linear fusion: dense weight x cosine + (1 - dense weight) x BM25 coverage.
    assert hybrid.score == pytest.approx(0.6 * _cosine(hybrid) + 0.4 * hybrid.signals["lexical"], rel=1e-4)
    [vector] = _recall(access, "ERR-4471 checkout", mode="vector", top_k=1)
    assert vector.score == pytest.approx(vector.similarity) and 0 < vector.score <= 1
    [keyword] = _recall(access, "ERR-4471 checkout", mode="keyword", top_k=1)
    assert keyword.similarity is None and 0 < keyword.score < 1


def test_hits_carry_the_columns_asked_for_and_rank_as_whole_rows(access):
    for content in MEMORIES.values():
        remember(access, content)
    for query, _relevant in QUERIES[:4]:
        whole = _recall(access, query, top_k=8)
        light = _recall(access, query, top_k=8, columns=("content", "session_id"))
        ranked = [(h.item.pk, h.score, h.signals) for h in whole]
        assert [(h.item.pk, h.score, h.signals) for h in light] == ranked
        for hit in light:
            deferred = hit.item.get_deferred_fields()
            assert {"content", "session_id", "created_at", "id"}.isdisjoint(deferred)
            assert {"metadata", "provenance", "scopes", "updated_at"} <= deferred
        assert not whole[0].item.get_deferred_fields() & {"metadata", "provenance", "scopes"}
    with pytest.raises(ValueError, match="no item column"):
        _recall(access, "boiler", columns=("content", "embedding"))


def test_other_tenants_and_agents_never_rank_even_when_closer(access, world):
    remember(access, "The invoice template uses the blue logo")
    # Word-for-word the query, but in another tenant / another agent.
    remember(system_access(world.foreign_agent), "Which logo does the invoice template use")
    remember(system_access(world.sibling), "Which logo does the invoice template use")
    hits = _recall(access, "Which logo does the invoice template use", scopes=("user", "agent"))
    assert _contents(hits) == ["The invoice template uses the blue logo"]


def test_expired_retired_and_too_classified_items_are_filtered_in_sql(access, world):
    remember(access, "Backups run at midnight")
    expired = remember(access, "Backups run at noon").item
    retired = remember(access, "Backups run hourly").item
    secret = remember(access, "Backups run from the vault at 3am").item
    MemoryItem.objects.filter(pk=expired.pk).update(retention_until=timezone.now() - timedelta(minutes=1))
    MemoryItem.objects.filter(pk=retired.pk).update(invalid_at=timezone.now() - timedelta(minutes=1))
    # Above the default policy's maximum (confidential): stored, but never read by this agent.
    MemoryItem.objects.filter(pk=secret.pk).update(classification=3)
    for mode in ("hybrid", "vector", "keyword"):
        assert _contents(_recall(access, "when do backups run", mode=mode)) == ["Backups run at midnight"]


def test_session_and_user_memory_need_their_keys(access):
    remember(access, "Asked about the refund in this chat", scope="session", session_id="chat-1")
    remember(access, "Lives in Lisbon", scope="user", user_id="cust-1")
    remember(access, "Lives in Oslo", scope="user", user_id="cust-2")
    remember(access, "Support hours are 9 to 5", scope="agent")
    scopes = ("session", "user", "agent")
    no_keys = _contents(
        _recall(access, "where does the customer live", scopes=scopes, user_id=None, top_k=10)
    )
    assert no_keys == ["Support hours are 9 to 5"]
    cust_1 = _contents(
        _recall(access, "where does the customer live", scopes=scopes, session_id="chat-1", top_k=10)
    )
    assert "Lives in Lisbon" in cust_1 and "Asked about the refund in this chat" in cust_1
    assert "Lives in Oslo" not in cust_1


def test_min_score_is_a_similarity_floor(access):
    remember(access, "The office plants are watered on Fridays")
    remember(access, "Kubernetes upgrades happen in the maintenance window")
    hits = _recall(access, "when are cluster upgrades done", min_score=0.3)
    assert _contents(hits) == ["Kubernetes upgrades happen in the maintenance window"]
    assert all(hit.similarity >= 0.3 for hit in hits)


def test_recency_weight_prefers_newer_memories(access):
    old = remember(access, "The team lunch is on Thursday").item
    remember(access, "The team lunch moved to Friday")
    MemoryItem.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=120))
    query = "team lunch Thursday"
    assert _contents(_recall(access, query, top_k=1)) == ["The team lunch is on Thursday"]
    assert _contents(_recall(access, query, top_k=1, recency_weight=3.0)) == [
        "The team lunch moved to Friday"
    ]


def test_search_filters_apply_before_ranking(access):
    remember(access, "Prefers invoices by e-mail", kind="preference")
    remember(access, "Invoices are sent on the first of the month", kind="fact")
    hits = _recall(access, "invoices", kinds=("preference",))
    assert _contents(hits) == ["Prefers invoices by e-mail"]
    assert _contents(_recall(access, "invoices", created_after=timezone.now() + timedelta(minutes=1))) == []


@pytest.mark.parametrize("query", ["a & b | !c", "':* (x) <-> y", "\\' OR 1=1 --", "!!!", "\u0000?"])
def test_keyword_queries_cannot_inject_tsquery_syntax(access, query):
    remember(access, "A memory about x and y")
    for mode in ("keyword", "hybrid"):
        _recall(access, query, mode=mode)  # no error is the assertion


def test_scopes_outside_the_read_policy_are_refused(world):
    from memory.enforcement import PolicyViolation, read_scopes

    policy_version_create(agent=world.agent, policy={"read_scopes": ["agent"]})
    access = system_access(world.agent)
    with pytest.raises(PolicyViolation) as caught:
        read_scopes(access, ["user"])
    assert caught.value.rule == "read_scopes"


def test_the_reranker_slot_reorders_with_a_local_cross_encoder(access, settings, tmp_path):
    from sentence_transformers import CrossEncoder

    from memory.embeddings import packaged_model_path
    from memory.retrieval import rerank

    # A cross-encoder head on the packaged MiniLM encoder, built and saved offline:
    # the real loading and scoring path runs without fetching anything.
    CrossEncoder(str(packaged_model_path()), num_labels=1, device="cpu").save(str(tmp_path))
    settings.FEDMEM_RERANKER_MODEL = str(tmp_path)
    try:
        remember(access, "Escalate outages to the on-call engineer")
        remember(access, "Outage reports go to the status page")
        hits = _recall(access, "who handles outages", top_k=2)
        assert len(hits) == 2
        assert all("fused_score" in hit.signals for hit in hits)
        assert hits[0].score >= hits[1].score
    finally:
        rerank._loaded.clear()


def test_policy_max_classification_filters_reads(world):
    access = system_access(world.agent)
    memory_remember(
        access=access,
        draft=MemoryDraft(content="Salary bands for 2025", classification="confidential", user_id="cust-1"),
    )
    policy_version_create(agent=world.agent, policy={"max_classification": "internal"})
    stricter = system_access(world.agent)
    assert _contents(_recall(stricter, "salary bands")) == []


# --- session context -------------------------------------------------------------------

CONVERSATION = [
    "Joanna: Practice is everything, isn't it? So what's your favourite video game?",
    "Nate: Right now it's Xenoblade Chronicles, I play it every night.",
    "Joanna: Nice, I should try it some time.",
]
# Closer to the question by wording, but no answer to it.
DISTRACTORS = [
    "Nate: Video games are a great escape after a long day.",
    "Nate: My favourite snack while watching a film is popcorn.",
]


def _session(access, said, *, session="s1"):
    """``said`` written in one batch, in order, to one session of the agent's memory."""
    written = memory_remember_batch(
        access=access, drafts=[MemoryDraft(content=c, scope="agent", session_id=session) for c in said]
    )
    return [r.outcome.item for r in written]


def _conversation(access, *, session="s1"):
    items = _session(access, CONVERSATION, session=session)
    for n, content in enumerate(DISTRACTORS):
        remember(access, content, scope="agent", session_id=f"other-{n}")
    return items


def test_a_batch_keeps_its_request_order_in_created_at(access):
    items = _conversation(access)
    stored = [MemoryItem.objects.get(pk=item.pk).created_at for item in items]
    assert stored == sorted(stored) and len(set(stored)) == len(stored)


def test_a_reply_gains_the_score_of_the_turn_it_answers(access, settings):
    question, reply, _ = _conversation(access)
    query = "What is Nate's favourite video game?"
    hits = _recall(access, query, scopes=("agent",), top_k=5)
    by_pk = {hit.item.pk: hit for hit in hits}
    hit = by_pk[reply.pk]
    # Own fused score + context weight x the lead of the better neighbour's fused score.
    own = 0.6 * _cosine(hit) + 0.4 * hit.signals["lexical"]
    weight = settings.FEDMEM_HYBRID_CONTEXT_WEIGHT
    assert hit.signals["context"] > own
    # Plus the lead of the turns two apart, and the bonus of the speaker the query names.
    far = settings.FEDMEM_HYBRID_CONTEXT_FAR_WEIGHT * max(hit.signals.get("context_far", own) - own, 0)
    assert hit.signals["speaker"] == "Nate"
    speaker = settings.FEDMEM_HYBRID_SPEAKER_WEIGHT
    assert hit.score == pytest.approx(own + weight * (hit.signals["context"] - own) + far + speaker, rel=1e-4)
    neighbour = by_pk[question.pk]
    assert hit.signals["context"] >= 0.6 * _cosine(neighbour) + 0.4 * neighbour.signals["lexical"] - 1e-6
    # The turn that words the question has only weaker neighbours: it keeps its own score.
    neighbour_own = 0.6 * _cosine(neighbour) + 0.4 * neighbour.signals["lexical"]
    assert neighbour.signals.get("context_far", 0) <= neighbour_own
    assert neighbour.score == pytest.approx(neighbour_own, rel=1e-4)
    with_context = _contents(hits).index(reply.content)
    settings.FEDMEM_HYBRID_CONTEXT_WEIGHT = 0.0
    without = _recall(access, query, scopes=("agent",), top_k=5)
    assert all("context" not in h.signals for h in without)
    # The reply climbs past merely similar lines only with its session's context.
    assert _contents(without).index(reply.content) > with_context


def test_a_turn_two_apart_lends_its_lead_too(access, settings):
    said = [
        "Joanna: So what's your favourite video game these days?",
        "Nate: Hmm, let me think about that one.",
        "Nate: Xenoblade Chronicles, no doubt, I play it every night.",
        "Joanna: Nice, I should try it some time.",
    ]
    question, _, answer, _ = _session(access, said)
    query = "What is Joanna's favourite video game these days?"
    hits = {h.item.pk: h for h in _recall(access, query, scopes=("agent",), top_k=10)}
    hit = hits[answer.pk]
    own = 0.6 * _cosine(hit) + 0.4 * hit.signals.get("lexical", 0)
    # The question is two turns before the answer: its lead lifts the answer by the far weight.
    far = hit.signals["context_far"]
    assert far >= 0.6 * _cosine(hits[question.pk]) + 0.4 * hits[question.pk].signals["lexical"] - 1e-6
    near = settings.FEDMEM_HYBRID_CONTEXT_WEIGHT * max(hit.signals["context"] - own, 0)
    lifted = own + near + settings.FEDMEM_HYBRID_CONTEXT_FAR_WEIGHT * (far - own)
    assert hit.score == pytest.approx(lifted, rel=1e-4)
    settings.FEDMEM_HYBRID_CONTEXT_FAR_WEIGHT = 0.0
    without = {h.item.pk: h for h in _recall(access, query, scopes=("agent",), top_k=10)}
    assert all("context_far" not in h.signals for h in without.values())
    assert without[answer.pk].score < hit.score


def _unworded_answer(access):
    """A question, a pause, an answer sharing no word with the question, and a turn
    three places away, in one session; distractors that word the question better in
    other sessions. The question's own turn leads both candidate lists."""
    said = [
        "Joanna: So what is your favourite video game these days?",
        "Nate: Hmm, let me think about that one.",
        "Nate: Xenoblade Chronicles, no doubt, every single night.",
        "Nate: Also Hollow Knight, when there is time left.",
    ]
    items = _session(access, said)
    for n, content in enumerate(
        [
            "Joanna: Video games are a great escape after a long day.",
            "Nate: My favourite snack while watching a film is popcorn.",
            "Joanna: These days I mostly play board games with friends.",
        ]
    ):
        remember(access, content, scope="agent", session_id=f"other-{n}")
    return items


def test_the_neighbours_of_the_best_candidates_join_the_candidates(access, settings):
    question, pause, answer, third = _unworded_answer(access)
    # Lists of three: the answer, worded like nothing in the query, is in neither.
    settings.FEDMEM_RETRIEVAL_CANDIDATES = 3
    query = "favourite video game these days"
    settings.FEDMEM_HYBRID_NEIGHBOUR_ANCHORS = 0
    without = {h.item.pk: h for h in _recall(access, query, scopes=("agent",), top_k=10)}
    assert answer.pk not in without and pause.pk not in without
    assert without[question.pk].vector_rank == 1 and without[question.pk].keyword_rank == 1
    settings.FEDMEM_HYBRID_NEIGHBOUR_ANCHORS = 1
    hits = {h.item.pk: h for h in _recall(access, query, scopes=("agent",), top_k=10)}
    # Both turns after the question (as far as the context terms reach) are candidates
    # now, in neither list, scored like any other candidate: own score and the lifts.
    hit = hits[answer.pk]
    assert hit.vector_rank is None and hit.keyword_rank is None
    own = 0.6 * _cosine(hit) + 0.4 * hit.signals.get("lexical", 0)
    near = settings.FEDMEM_HYBRID_CONTEXT_WEIGHT * max(hit.signals["context"] - own, 0)
    far = settings.FEDMEM_HYBRID_CONTEXT_FAR_WEIGHT * max(hit.signals["context_far"] - own, 0)
    assert hit.score == pytest.approx(own + near + far, rel=1e-4)
    assert pause.pk in hits
    # Three places away is beyond what the context terms lift: never a candidate.
    assert third.pk not in hits
    # Every candidate of before is still ranked, by the same score.
    for pk, before in without.items():
        assert hits[pk].score == pytest.approx(before.score, rel=1e-6)


def test_an_invisible_neighbour_never_joins_the_candidates(access, settings):
    question, pause, answer, _ = _unworded_answer(access)
    settings.FEDMEM_RETRIEVAL_CANDIDATES = 3
    MemoryItem.objects.filter(pk=answer.pk).update(invalid_at=timezone.now() - timedelta(minutes=1))
    query = "favourite video game these days"
    hits = {h.item.pk for h in _recall(access, query, scopes=("agent",), top_k=10)}
    assert question.pk in hits and pause.pk in hits and answer.pk not in hits


def test_another_users_turn_never_joins_the_candidates(access, settings):
    """One session, two users: the answer was said to another user (user scope),
    so a reader of cust-1's memory neither scores it nor has it lend a lift."""
    said = [
        ("agent", "", "Joanna: So what is your favourite video game these days?"),
        ("user", "cust-2", "Nate: Xenoblade Chronicles, no doubt, every single night."),
        ("agent", "", "Nate: Also Hollow Knight, when there is time left."),
    ]
    written = memory_remember_batch(
        access=access,
        drafts=[MemoryDraft(content=c, scope=sc, user_id=u, session_id="s1") for sc, u, c in said],
    )
    question, answer, after = [r.outcome.item for r in written]
    settings.FEDMEM_RETRIEVAL_CANDIDATES = 1
    query = "favourite video game these days"
    hits = {h.item.pk: h for h in _recall(access, query, scopes=("agent", "user"), top_k=10)}
    assert answer.pk not in hits
    # The visible turn after the question is its next neighbour now, and joins.
    assert question.pk in hits and after.pk in hits
    assert hits[after.pk].vector_rank is None and hits[after.pk].keyword_rank is None
    # cust-2 reads the answer: for that reader it joins as the question's neighbour.
    theirs = {h.item.pk for h in _recall(access, query, scopes=("agent", "user"), user_id="cust-2", top_k=10)}
    assert answer.pk in theirs


def test_items_without_a_session_or_a_visible_neighbour_get_no_context(access):
    remember(access, "Nate: Right now it's Xenoblade Chronicles, I play it every night.", scope="agent")
    [hit] = _recall(access, "Xenoblade Chronicles", scopes=("agent",), top_k=1)
    assert "context" not in hit.signals
    question, reply, after = _conversation(access, session="s2")
    # A retired neighbour is invisible: it lends the reply no score.
    retired = timezone.now() - timedelta(minutes=1)
    MemoryItem.objects.filter(pk__in=[question.pk, after.pk]).update(invalid_at=retired)
    hits = {h.item.pk: h for h in _recall(access, "favourite video game", scopes=("agent",), top_k=10)}
    assert "context" not in hits[reply.pk].signals


@pytest.mark.django_db(transaction=True)
def test_the_hnsw_settings_are_set_once_per_server_connection():
    """Each request takes a connection from the pool (Django sends connection_created
    every time); the HNSW breadth and iterative scan are session settings the
    connection keeps, so they cost a statement once per server connection, not once
    per request."""
    from django.conf import settings
    from django.db import connection

    statements: list[str] = []

    def record(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        statements.append(sql)
        return execute(sql, params, many, context)

    servers = set()
    # More requests than the pool holds connections (side reads may have filled it):
    # some server connection is taken twice.
    cycles = settings.DATABASES["default"]["OPTIONS"]["pool"]["max_size"] + 1
    with connection.execute_wrapper(record):
        for _ in range(cycles):
            connection.close()  # back to the pool, as at the end of a request
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan'), "
                    "pg_backend_pid()"
                )
                ef_search, scan, pid = cursor.fetchone()
            assert (ef_search, scan) == (str(settings.FEDMEM_HNSW_EF_SEARCH), "relaxed_order")
            servers.add(pid)
    tunings = sum("set_config('hnsw.ef_search'" in sql for sql in statements)
    assert tunings <= len(servers) < cycles
