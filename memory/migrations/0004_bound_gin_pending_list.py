import django.contrib.postgres.indexes
from django.db import migrations


class Migration(migrations.Migration):
    """Bound the full-text index's fast-update pending list to 256 kB.

    Every search reads the whole pending list; at the 4 MB default a busy table
    made keyword lookups several times slower. ALTER INDEX changes the setting in
    place (no rebuild of a large index); the state operations tell Django the
    index now carries the parameter.
    """

    dependencies = [
        ("memory", "0003_add_entities_and_causal_edges"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    "ALTER INDEX memory_item_search_gin SET (gin_pending_list_limit = 256)",
                    reverse_sql="ALTER INDEX memory_item_search_gin RESET (gin_pending_list_limit)",
                ),
            ],
            state_operations=[
                migrations.RemoveIndex(model_name="memoryitem", name="memory_item_search_gin"),
                migrations.AddIndex(
                    model_name="memoryitem",
                    index=django.contrib.postgres.indexes.GinIndex(
                        fields=["search_vector"], gin_pending_list_limit=256, name="memory_item_search_gin"
                    ),
                ),
            ],
        ),
    ]
