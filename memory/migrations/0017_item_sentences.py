import django.db.models.deletion
import pgvector.django.vector
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0016_item_session_order_with_id"),
    ]

    operations = [
        migrations.CreateModel(
            name="ItemSentence",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("position", models.PositiveSmallIntegerField()),
                ("start", models.PositiveIntegerField()),
                ("end", models.PositiveIntegerField()),
                ("embedding", pgvector.django.vector.VectorField(dimensions=384)),
                (
                    "item",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="sentences",
                        to="memory.memoryitem",
                    ),
                ),
            ],
            options={
                "db_table": "memory_item_sentence",
                "constraints": [
                    models.UniqueConstraint(fields=("item", "position"), name="memory_item_sentence_position")
                ],
            },
        ),
    ]
