"""Room on each page of memory_item for a row's next version.

Recall stamps ``last_recalled_at`` on the items it returns (at most hourly). With full
pages (fillfactor 100, the default) that update cannot stay on the row's page, so it
is not a HOT update: every index of the table gets an entry for the new version, the
HNSW graph and the GIN index included. At 100k items that was half of a recall's time
(the fused statement 16.7 ms with stamps written against 8.0 ms without, docs/
performance.md) and left dead entries in the HNSW graph. A row is about 700 bytes
(the embedding lives in TOAST), so 15% of a page holds one more version, and page
pruning frees it again for the next. Setting it is instant; pages written before keep
their fill until rewritten.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("memory", "0014_add_item_clauses")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE memory_item SET (fillfactor = 85)",
            reverse_sql="ALTER TABLE memory_item RESET (fillfactor)",
        )
    ]
