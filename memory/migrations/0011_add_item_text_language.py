import django.contrib.postgres.indexes
import django.contrib.postgres.search
from django.db import migrations, models

# The configurations of memory.retrieval.language.CONFIGS when this migration was
# written, frozen here: the generated column below must not change with the code.
CONFIGS = (
    "danish", "dutch", "english", "finnish", "french", "german", "hungarian", "italian", "nepali",
    "norwegian", "portuguese", "russian", "spanish", "swedish", "turkish", "arabic", "greek", "tamil",
)  # fmt: skip
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
    # Back to the column's default; the column itself is dropped by the step before.
    apps.get_model("memory", "MemoryItem").objects.exclude(text_language="simple").update(
        text_language="simple"
    )


class Migration(migrations.Migration):
    """Full text in each item's own language.

    The language is detected from the content before the generated column is
    rebuilt (so the rewrite of the table happens once, with the right
    configuration), the column is dropped and added again with a CASE over the
    configurations (a generated column cannot be altered in place), then its GIN
    index and the (tenant, language) index for the corpus statistics are built.
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
        migrations.RemoveIndex(model_name="memoryitem", name="memory_item_search_gin"),
        migrations.RemoveField(model_name="memoryitem", name="search_vector"),
        migrations.AddField(
            model_name="memoryitem",
            name="search_vector",
            field=models.GeneratedField(
                db_persist=True,
                expression=models.Case(
                    *(
                        models.When(
                            text_language=config,
                            then=django.contrib.postgres.search.SearchVector("content", config=config),
                        )
                        for config in CONFIGS
                    ),
                    default=django.contrib.postgres.search.SearchVector("content", config="simple"),
                ),
                output_field=django.contrib.postgres.search.SearchVectorField(),
            ),
        ),
        migrations.AddIndex(
            model_name="memoryitem",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["search_vector"], gin_pending_list_limit=256, name="memory_item_search_gin"
            ),
        ),
        migrations.AddIndex(
            model_name="memoryitem",
            index=models.Index(fields=["tenant", "text_language"], name="memory_item_tenant_language"),
        ),
    ]
