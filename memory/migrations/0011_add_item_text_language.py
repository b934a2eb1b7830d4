from django.db import migrations, models

BATCH = 2000


def detect_languages(apps, schema_editor):
    """Every existing item's language, from its content (as a write detects it now)."""
    from memory.retrieval.language import detect

    item = apps.get_model("memory", "MemoryItem")
    batch = []
    for row in item.objects.only("id", "content").order_by("id").iterator(chunk_size=BATCH):
        language = detect(row.content)
        if language != "simple":
            row.text_language = language
            batch.append(row)
        if len(batch) >= BATCH:
            item.objects.bulk_update(batch, ["text_language"])
            batch = []
    if batch:
        item.objects.bulk_update(batch, ["text_language"])


def forget_languages(apps, schema_editor):
    """Nothing to undo: reversing this migration drops the column right after.

    (Resetting the rows here would leave the table with pending trigger events in
    the transaction that then alters it, which PostgreSQL refuses.)"""


class Migration(migrations.Migration):
    """Full text in each item's own language, step 1: the language of every item.

    Detected from the content before the generated column is rebuilt (0012), so the
    rebuild reads each row's language once. Its own migration, so its own
    transaction: the updates' deferred foreign-key checks fire at its commit, before
    0012 alters the table (PostgreSQL refuses an ALTER TABLE with pending trigger
    events in the same transaction).
    """

    dependencies = [
        ("memory", "0010_add_item_session_order_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="memoryitem",
            name="text_language",
            field=models.CharField(default="simple", editable=False, max_length=16),
        ),
        migrations.RunPython(detect_languages, forget_languages, elidable=False),
    ]
