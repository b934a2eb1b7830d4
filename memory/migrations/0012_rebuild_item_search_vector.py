import django.contrib.postgres.indexes
import django.contrib.postgres.search
from django.db import migrations, models

# The configurations of memory.retrieval.language.CONFIGS when this migration was
# written, frozen here: the generated column below must not change with the code.
CONFIGS = (
    "danish", "dutch", "english", "finnish", "french", "german", "hungarian", "italian", "nepali",
    "norwegian", "portuguese", "russian", "spanish", "swedish", "turkish", "arabic", "greek", "tamil",
)  # fmt: skip


class Migration(migrations.Migration):
    """Full text in each item's own language, step 2: the generated column.

    Dropped and added again with a CASE over the configurations (a generated column
    cannot be altered in place, and it must be immutable, which a text-to-regconfig
    cast is not), then its GIN index and the (tenant, language) index for the
    corpus statistics are built. Reversed, the English-only column comes back.
    """

    dependencies = [
        ("memory", "0011_add_item_text_language"),
    ]

    operations = [
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
