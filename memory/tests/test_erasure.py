"""Erasure of a subject: the catalog-wide canary proof, holds, fence, certificate, idempotence."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from pgvector.django import CosineDistance

from governance.models import AuditEvent, ErasureFence, ErasureRequest, Job
from governance.services.audit import subject_hash
from governance.services.erasure import erasure_fenced, erasure_request_create, erasure_run, subject_deleters
from governance.services.holds import legal_hold_place
from memory.models import ItemSentence, MemoryHistory, MemoryItem, SessionMessage
from memory.tests.conftest import memories_url, remember

SUBJECT = "cust-erase-me"
TEXT_TYPES = ("text", "character varying", "jsonb", "json", "tsvector", "ARRAY")


def _catalog_hits(needle: str) -> dict[str, int]:
    """Every text-like column of every table in the database, listed from the catalog."""
    hits: dict[str, int] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.table_name, c.column_name FROM information_schema.columns c
            JOIN information_schema.tables t USING (table_schema, table_name)
            WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' AND c.data_type = ANY(%s)
            """,
            [list(TEXT_TYPES)],
        )
        columns = cursor.fetchall()
        assert len(columns) > 50  # the catalog really was read
        for table, column in columns:
            cursor.execute(
                f'SELECT count(*) FROM "{table}" WHERE lower("{column}"::text) LIKE %s',
                [f"%{needle.lower()}%"],
            )
            count = cursor.fetchone()[0]
            if count:
                hits[f"{table}.{column}"] = count
    return hits


def _nearest_copies(vectors: list, *, k: int = 5) -> dict[str, int]:
    """Nearest-neighbour search with each of the subject's embeddings over every vector
    column of every table (listed from the catalog): how many of the k nearest rows
    carry that very embedding (cosine distance ~0), i.e. are the subject's data."""
    found: dict[str, int] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.table_name, c.column_name FROM information_schema.columns c
            JOIN information_schema.tables t USING (table_schema, table_name)
            WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' AND c.udt_name = 'vector'
            """
        )
        columns = cursor.fetchall()
        assert ("memory_item", "embedding") in columns
        for table, column in columns:
            for vector in vectors:
                literal = "[" + ",".join(f"{x:.9g}" for x in vector) + "]"
                cursor.execute(
                    f'SELECT count(*) FROM (SELECT "{column}" <=> %s::vector AS d FROM "{table}" '
                    f'WHERE "{column}" IS NOT NULL ORDER BY "{column}" <=> %s::vector LIMIT %s) n '
                    "WHERE d < 1e-6",
                    [literal, literal, k],
                )
                count = cursor.fetchone()[0]
                if count:
                    found[f"{table}.{column}"] = found.get(f"{table}.{column}", 0) + count
    return found


def _erase(world, *, subject: str = SUBJECT, **fields) -> ErasureRequest:
    fields.setdefault("scope", "tenant")
    request = erasure_request_create(
        tenant=world.tenant, actor=world.officer, subject=subject, reason="GDPR art. 17", **fields
    )
    return erasure_run(request_id=request.pk)


def _write_everywhere(world, as_agent, canary: str) -> list[uuid.UUID]:
    """The canary for the subject through every write path of the builtin memory."""
    client = as_agent(world.agent)
    one = client.post(
        memories_url(world.agent),
        {"content": f"Account note {canary}", "user_id": SUBJECT},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k-one",
    )
    assert one.status_code == 201, one.content
    batch = client.post(
        memories_url(world.agent, "/batch"),
        # Two sentences: the item also gets a vector per sentence.
        {
            "items": [
                {"content": f"Batch fact {canary}. It came up twice.", "user_id": SUBJECT, "scope": "agent"}
            ]
        },
        format="json",
        HTTP_IDEMPOTENCY_KEY="k-batch",
    )
    assert batch.status_code == 201, batch.content
    item_id = one.json()["item"]["id"] if "item" in one.json() else one.json()["id"]
    patched = client.patch(
        memories_url(world.agent, f"/{item_id}"),
        {"content": f"Account note, revised {canary}. The refund went out on Monday."},
        format="json",
    )
    assert patched.status_code == 200, patched.content
    doomed = client.post(
        memories_url(world.agent), {"content": f"Short-lived {canary}", "user_id": SUBJECT}, format="json"
    ).json()
    doomed_id = doomed["item"]["id"] if "item" in doomed else doomed["id"]
    assert client.delete(memories_url(world.agent, f"/{doomed_id}")).status_code in (200, 204)
    message = client.post(
        f"/v1/memory/agents/{world.agent.pk}/sessions/s-1/messages",
        {"role": "user", "content": f"Chat line {canary}", "user_id": SUBJECT},
        format="json",
    )
    assert message.status_code == 201, message.content
    return list(MemoryItem.objects.filter(user_id=SUBJECT).values_list("pk", flat=True))


def test_erasure_leaves_no_trace_of_the_canary_in_any_table(world, as_agent, access):
    canary = f"canary{uuid.uuid4().hex}"
    remember(access, "Someone else's note", user_id="cust-keep")
    ids = _write_everywhere(world, as_agent, canary)
    # The graph derived from those items (what the extraction task writes after commit).
    from memory.extraction.pipeline import extract_item

    for item_id in ids:
        extract_item(item_id)
    vectors = list(MemoryItem.objects.filter(pk__in=ids).values_list("embedding", flat=True))
    sentences = list(ItemSentence.objects.filter(item_id__in=ids).values_list("embedding", flat=True))
    assert len(sentences) == 4  # the batch fact's two and the revised note's two
    vectors += sentences
    before = _catalog_hits(canary)
    assert {"memory_item.content", "memory_history.new_content", "memory_session_message.content"} <= set(
        before
    )
    from memory.models.graph import Entity, Mention

    subject_entities = set(Mention.objects.filter(item_id__in=ids).values_list("entity_id", flat=True))
    assert subject_entities  # the graph really holds the subject's derived rows

    before_nn = _nearest_copies(vectors)
    # The search can find them: each item's own row and each sentence's.
    assert before_nn.get("memory_item.embedding", 0) >= len(vectors) - len(sentences)
    assert before_nn.get("memory_item_sentence.embedding", 0) >= len(sentences)

    request = _erase(world)

    after_nn = _nearest_copies(vectors)
    assert _catalog_hits(canary) == {}
    assert not MemoryItem.objects.filter(user_id=SUBJECT).exists()
    # Entities only the subject's memories named are gone with them (a name can be personal data).
    assert not Entity.objects.filter(pk__in=subject_entities, mentions__isnull=True).exists()
    assert not Mention.objects.filter(item_id__in=ids).exists()
    assert MemoryItem.objects.filter(user_id="cust-keep").count() == 1
    # A nearest-neighbour search with the subject's own embeddings (captured before the
    # erasure) finds none of their items: before, each found its own row; after, no
    # row in any vector column carries any of those embeddings, and no neighbour is
    # the subject's or holds the canary.
    assert after_nn == {}
    for vector in vectors:
        nearest = list(MemoryItem.objects.order_by(CosineDistance("embedding", vector))[:5])
        assert nearest and all(n.user_id != SUBJECT and canary not in n.content for n in nearest)
    assert request.status == "completed"
    assert request.subject == ""
    certificate = request.certificate
    assert certificate["deleted"]["memory_item"] == 2
    assert certificate["deleted"]["memory_item_sentence"] == 4
    assert certificate["deleted"]["memory_session_message"] == 1
    assert certificate["deleted"]["memory_idempotency"] == 2
    assert certificate["deleted"]["memory_history"] >= 4
    assert certificate["held"] == []
    assert certificate["subject_hash"] == subject_hash(SUBJECT)
    # The subject id itself is gone from the erasure's own rows and from the audit trail.
    assert SUBJECT not in str(list(AuditEvent.objects.values_list("data", flat=True)))
    assert not ErasureRequest.objects.filter(subject=SUBJECT).exists()


def test_erasure_keeps_held_data_byte_identical_and_reports_the_hold(world, access):
    held = remember(access, "Disputed refund promise", user_id=SUBJECT).item
    free = remember(access, "Free fact", user_id=SUBJECT, scope="agent").item
    hold = legal_hold_place(
        tenant=world.tenant, actor=world.officer, target="item", item_id=held.pk, reason="r"
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT row_to_json(m)::text FROM memory_item m WHERE id = %s", [held.pk])
        before = cursor.fetchone()

    request = _erase(world)

    with connection.cursor() as cursor:
        cursor.execute("SELECT row_to_json(m)::text FROM memory_item m WHERE id = %s", [held.pk])
        assert cursor.fetchone() == before
    assert MemoryHistory.objects.filter(item_id=held.pk).exists()
    assert not MemoryItem.objects.filter(pk=free.pk).exists()
    assert request.certificate["held"] == [
        {
            "table": "memory_item",
            "count": 1,
            "holds": [str(hold.pk)],
            "by_hold": {str(hold.pk): 1},
            "flagged": 0,
        }
    ]
    [summary] = request.certificate["holds"]
    assert summary["hold"] == str(hold.pk) and summary["target"] == "item"
    assert summary["rows"] == {"memory_item": 1}
    assert request.certificate["deleted"]["memory_item"] == 1
    event = AuditEvent.objects.get(action="legal_hold.blocked", data__operation="erasure")
    assert event.data["holds"] == [str(hold.pk)]


def test_a_subject_hold_keeps_session_messages_too(world, access):
    from memory.services.sessions import session_message_append

    session_message_append(access=access, session_id="s", role="user", content="kept words", user_id=SUBJECT)
    legal_hold_place(tenant=world.tenant, actor=world.officer, target="subject", subject=SUBJECT, reason="r")
    request = _erase(world)
    assert SessionMessage.objects.filter(user_id=SUBJECT).count() == 1
    assert {h["table"] for h in request.certificate["held"]} == {"memory_session_message"}


def test_agent_scope_erases_only_that_agent(world, access):
    from memory.enforcement import system_access

    remember(access, "On support-bot", user_id=SUBJECT)
    remember(system_access(world.sibling), "On ops-agent", user_id=SUBJECT)
    request = _erase(world, scope="agent", agent=world.agent)
    assert list(MemoryItem.objects.filter(user_id=SUBJECT).values_list("agent_id", flat=True)) == [
        world.sibling.pk
    ]
    assert request.certificate["agent"] == str(world.agent.pk)


def test_erasure_is_idempotent_and_tracks_progress(world, access):
    remember(access, "One fact", user_id=SUBJECT)
    request = _erase(world)
    job = Job.objects.get(pk=request.job_id)
    assert job.status == "succeeded" and job.progress == job.total == len(subject_deleters()) + 1
    again = erasure_run(request_id=request.pk)
    assert again.certificate == request.certificate
    assert AuditEvent.objects.filter(action="erasure.completed").count() == 1


def test_the_fence_covers_copies_captured_before_and_erased_content(world, access):
    from django.utils import timezone

    from memory.text import content_hash

    captured = timezone.now()
    remember(access, "Likes green tea", user_id=SUBJECT)
    _erase(world)
    fence = ErasureFence.objects.get()
    assert fence.subject_hash == subject_hash(SUBJECT)
    assert content_hash("Likes green tea") in fence.content_hashes
    assert erasure_fenced(tenant_id=world.tenant.pk, subject=SUBJECT, captured_at=captured)
    later = timezone.now()
    assert not erasure_fenced(tenant_id=world.tenant.pk, subject=SUBJECT, captured_at=later)
    assert erasure_fenced(
        tenant_id=world.tenant.pk,
        subject=SUBJECT,
        captured_at=later,
        content_hash=content_hash("Likes green tea"),
    )
    assert not erasure_fenced(tenant_id=world.tenant.pk, subject="someone-else", captured_at=captured)
    assert not erasure_fenced(tenant_id=world.other_tenant.pk, subject=SUBJECT, captured_at=captured)


@pytest.mark.parametrize("path", ["", "/certificate"])
def test_certificate_download(world, as_user, access, path):
    remember(access, "One fact", user_id=SUBJECT)
    request = _erase(world)
    response = as_user(world.auditor).get(f"/v1/memory/erasure-requests/{request.pk}{path}")
    assert response.status_code == 200, response.content
    if path:
        assert response["Content-Disposition"].startswith("attachment;")
        assert response.json()["deleted"]["memory_item"] == 1
    else:
        body = response.json()
        assert (
            body["status"] == "completed" and body["progress"] == body["total"] == len(subject_deleters()) + 1
        )


def test_erasure_removes_the_span_links_of_the_subjects_facts(world, access):
    from memory.models import CausalEdge, SpanLink
    from memory.tests.graph_helpers import fact

    mine = fact(access, "Verbose debug logging led to a full disk on db-1.", user_id=SUBJECT, scope="user")
    theirs = fact(access, "The database crash happened because of a full disk on db-1.", user_id="cust-keep",
                  scope="user")  # fmt: skip
    later = fact(access, "The database crash caused checkout failures.", user_id="cust-keep", scope="user")
    assert SpanLink.objects.filter(source__item=mine, target__item=theirs).exists()

    request = _erase(world)

    assert not SpanLink.objects.filter(source__item_id=mine.pk).exists()
    assert not CausalEdge.objects.filter(item_id=mine.pk).exists()
    assert request.certificate["deleted"]["memory_span_link"] == 1
    # The other subject's facts keep their own link.
    assert SpanLink.objects.filter(source__item=theirs, target__item=later).exists()
