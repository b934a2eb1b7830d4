"""The items whose extraction has not settled, in a table of their own.

The partial index ``memory_item_extraction_pending`` (``WHERE extraction_status =
'pending'``) let the extraction sweep find pending items, but an index whose condition
holds the status makes the update that settles an item a non-HOT update: PostgreSQL
then writes a new entry for the item in every index of memory_item, the HNSW graph
and the GIN index included (0 HOT updates of 300 with the index, about half without
it at 100k items; docs/performance.md). Triggers keep ``memory_extraction_pending``
in the statement that inserts, updates or deletes an item, so every write path, raw
SQL included, keeps it true; the rows pending now are copied in.
"""

import django.db.models.deletion
from django.db import migrations, models

SYNC = """
CREATE FUNCTION memory_extraction_pending_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM memory_extraction_pending WHERE item_id = OLD.id;
    ELSIF NEW.extraction_status = 'pending' THEN
        INSERT INTO memory_extraction_pending (item_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
    ELSE
        DELETE FROM memory_extraction_pending WHERE item_id = NEW.id;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER memory_item_pending_insert AFTER INSERT ON memory_item
    FOR EACH ROW WHEN (NEW.extraction_status = 'pending')
    EXECUTE FUNCTION memory_extraction_pending_sync();
CREATE TRIGGER memory_item_pending_update AFTER UPDATE OF extraction_status ON memory_item
    FOR EACH ROW WHEN (OLD.extraction_status IS DISTINCT FROM NEW.extraction_status)
    EXECUTE FUNCTION memory_extraction_pending_sync();
CREATE TRIGGER memory_item_pending_delete AFTER DELETE ON memory_item
    FOR EACH ROW WHEN (OLD.extraction_status = 'pending')
    EXECUTE FUNCTION memory_extraction_pending_sync();
INSERT INTO memory_extraction_pending (item_id)
    SELECT id FROM memory_item WHERE extraction_status = 'pending';
"""

UNSYNC = """
DROP TRIGGER memory_item_pending_delete ON memory_item;
DROP TRIGGER memory_item_pending_update ON memory_item;
DROP TRIGGER memory_item_pending_insert ON memory_item;
DROP FUNCTION memory_extraction_pending_sync();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0017_item_sentences"),
    ]

    operations = [
        migrations.CreateModel(
            name="PendingExtraction",
            fields=[
                (
                    "item",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="memory.memoryitem",
                    ),
                ),
            ],
            options={
                "db_table": "memory_extraction_pending",
            },
        ),
        migrations.RunSQL(SYNC, reverse_sql=UNSYNC),
        migrations.RemoveIndex(
            model_name="memoryitem",
            name="memory_item_extraction_pending",
        ),
    ]
