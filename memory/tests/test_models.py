"""The schema the engine relies on: indexes, generated columns, constraints."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from memory.models import MemoryHistory, MemoryItem
from memory.services.items import memory_forget
from memory.tests.conftest import remember


def _indexdef(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [name])
        row = cursor.fetchone()
    assert row, f"index {name} is missing"
    return row[0]


def test_embedding_has_an_hnsw_cosine_index(db):
    definition = _indexdef("memory_item_embedding_hnsw")
    assert "USING hnsw" in definition
    assert "vector_cosine_ops" in definition


def test_full_text_vector_is_generated_and_gin_indexed(access):
    item = remember(access, "Deployments froze because the build cache was corrupted").item
    with connection.cursor() as cursor:
        cursor.execute("SELECT search_vector::text FROM memory_item WHERE id = %s", [item.pk])
        (vector,) = cursor.fetchone()
    assert "'deploy'" in vector and "'corrupt'" in vector  # stemmed by the english configuration
    definition = _indexdef("memory_item_search_gin")
    assert "USING gin" in definition
    # A bounded pending list: searches never wade through megabytes of unmerged entries.
    assert "gin_pending_list_limit='256'" in definition


def test_embedding_column_is_384_dimensions(db):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'memory_item'::regclass AND attname = 'embedding'"
        )
        assert cursor.fetchone()[0] == "vector(384)"


def test_full_text_vector_follows_content_changes(access):
    item = remember(access, "The printer on floor two jams").item
    MemoryItem.objects.filter(pk=item.pk).update(content="The scanner on floor three is fine")
    assert MemoryItem.objects.filter(pk=item.pk, search_vector="scanner").exists()
    assert not MemoryItem.objects.filter(pk=item.pk, search_vector="printer").exists()


def test_an_item_needs_at_least_one_scope(access):
    item = remember(access, "scoped").item
    with pytest.raises(IntegrityError), transaction.atomic():
        MemoryItem.objects.filter(pk=item.pk).update(scopes=[])


def test_history_outlives_the_item(access):
    item = remember(access, "Temporary note about the staging database").item
    memory_forget(access=access, item_id=item.pk)
    events = list(MemoryHistory.objects.filter(item_id=item.pk).values_list("event", "old_content"))
    assert events == [("created", ""), ("deleted", "Temporary note about the staging database")]


def test_deleting_an_agent_with_memory_is_refused(access, world):
    from django.db.models import ProtectedError

    remember(access, "kept safe")
    with pytest.raises(ProtectedError):
        world.agent.delete()


def test_vector_migration_depends_on_pgvector():
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(None, ignore_no_migrations=True)
    first = loader.get_migration("memory", "0001_add_memory_items")
    assert ("core", "0001_enable_pgvector") in first.dependencies
    hnsw = loader.get_migration("memory", "0002_add_item_embedding_hnsw")
    assert [type(op).__name__ for op in hnsw.operations] == ["AddIndex"]


def test_admin_shows_memory_read_only_without_its_content(access, client):
    from governance.tests.factories import UserFactory

    admin_user = UserFactory(username="root", is_staff=True, is_superuser=True)
    item = remember(access, "Never shown in the admin").item
    client.force_login(admin_user)
    assert client.get("/admin/memory/memoryitem/").status_code == 200
    page = client.get(f"/admin/memory/memoryitem/{item.pk}/change/")
    assert page.status_code == 200 and str(item.pk).encode() in page.content
    assert b"Never shown in the admin" not in page.content
    assert client.post(f"/admin/memory/memoryitem/{item.pk}/delete/", {"post": "yes"}).status_code == 403
    assert MemoryItem.objects.filter(pk=item.pk).exists()
