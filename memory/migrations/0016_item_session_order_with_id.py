from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0015_item_fillfactor"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="memoryitem",
            name="memory_item_session_order",
        ),
        migrations.AddIndex(
            model_name="memoryitem",
            index=models.Index(
                fields=["agent", "session_id", "created_at", "id"], name="memory_item_session_order"
            ),
        ),
    ]
