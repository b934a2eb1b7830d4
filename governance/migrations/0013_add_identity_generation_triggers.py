from django.db import migrations

# What a web process copies per API key and per agent (governance.authentication,
# memory.enforcement): the key, its agent, user and tenant, the agent's policy
# versions. The key's last use and a user's last login are bookkeeping nobody
# authorizes by, so changing only them keeps every copy.
TABLES = {
    "governance_apikey": ("last_used_at",),
    "governance_agent": (),
    "governance_user": ("last_login",),
    "governance_tenant": (),
    "governance_agentpolicyversion": (),
}
BUMP = "EXECUTE FUNCTION core_generation_bump('governance')"


def _forward(table: str, ignore: tuple[str, ...]) -> str:
    name = f"{table}_generation"
    statements = [f"CREATE TRIGGER {name}_truncate AFTER TRUNCATE ON {table} FOR EACH STATEMENT {BUMP};"]
    if not ignore:
        statements.append(
            f"CREATE TRIGGER {name} AFTER INSERT OR UPDATE OR DELETE ON {table} FOR EACH STATEMENT {BUMP};"
        )
        return "\n".join(statements)
    removed = " - ".join(f"'{column}'" for column in ignore)
    statements += [
        f"CREATE TRIGGER {name} AFTER INSERT OR DELETE ON {table} FOR EACH STATEMENT {BUMP};",
        f"CREATE TRIGGER {name}_update AFTER UPDATE ON {table} FOR EACH ROW "
        f"WHEN ((to_jsonb(OLD) - {removed}) IS DISTINCT FROM (to_jsonb(NEW) - {removed})) {BUMP};",
    ]
    return "\n".join(statements)


def _reverse(table: str) -> str:
    name = f"{table}_generation"
    return "\n".join(
        f"DROP TRIGGER IF EXISTS {trigger} ON {table};"
        for trigger in (name, f"{name}_update", f"{name}_truncate")
    )


class Migration(migrations.Migration):
    """Every change to keys, agents, users, tenants and policies moves the
    ``governance`` generation in the same transaction (core.generations)."""

    dependencies = [
        ("governance", "0012_add_erasure_request_datasets"),
        ("core", "0004_add_generation"),
    ]

    operations = [
        migrations.RunSQL(
            "\n".join(_forward(table, ignore) for table, ignore in TABLES.items()),
            "\n".join(_reverse(table) for table in TABLES),
        ),
        migrations.RunSQL(
            "INSERT INTO core_generation (name, value) VALUES "
            "('governance', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint) "
            "ON CONFLICT (name) DO NOTHING",
            migrations.RunSQL.noop,
        ),
    ]
