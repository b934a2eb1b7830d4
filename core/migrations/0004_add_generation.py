from django.db import migrations, models

FUNCTION = """
CREATE FUNCTION core_generation_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- The larger of +1 and the clock: the number never returns to an earlier value,
    -- not after a rollback, not after the table was emptied (core.generations).
    INSERT INTO core_generation (name, value)
    VALUES (TG_ARGV[0], (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)
    ON CONFLICT (name) DO UPDATE SET value = greatest(core_generation.value + 1, EXCLUDED.value);
    RETURN NULL;
END
$$;
"""


class Migration(migrations.Migration):
    """Generations of process-local caches (core.generations) and the trigger
    function that bumps them."""

    dependencies = [("core", "0003_add_shared_counters")]

    operations = [
        migrations.CreateModel(
            name="Generation",
            fields=[
                ("name", models.CharField(max_length=63, primary_key=True, serialize=False)),
                ("value", models.BigIntegerField()),
            ],
        ),
        migrations.RunSQL(FUNCTION, "DROP FUNCTION IF EXISTS core_generation_bump();"),
    ]
