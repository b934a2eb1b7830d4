from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "fedmem core"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created
        from django.db.models.signals import post_migrate, pre_migrate

        from core.database import check_pgvector
        from core.lookups import register

        register()

        checked: set[str] = set()

        def on_connect(sender, connection, **kwargs):  # type: ignore[no-untyped-def]
            # Once per process and alias: the answer cannot change while we run.
            if connection.alias in checked or connection.vendor != "postgresql":
                return
            check_pgvector(connection)
            checked.add(connection.alias)

        connection_created.connect(on_connect, weak=False, dispatch_uid="fedmem-pgvector-check")
        # Sent once per migrate run for this app config (before the first and after
        # the last migration of every app).
        pre_migrate.connect(_unseal, sender=self, weak=False, dispatch_uid="fedmem-audit-unseal")
        post_migrate.connect(_seal, sender=self, weak=False, dispatch_uid="fedmem-audit-seal")


def _superuser_for(using: str):  # type: ignore[no-untyped-def]
    """A superuser connection to the migrated database, when fedmem runs the server
    itself; on an external server the operator seals (docs/operations.md)."""
    from django.conf import settings
    from django.db import connections

    from core.database import SUPERUSER, superuser_connection

    params = connections[using].settings_dict
    if not getattr(settings, "EMBEDDED_DATABASE", False) or params["USER"] == SUPERUSER:
        return None
    return superuser_connection(params)


def _unseal(sender, using="default", **kwargs):  # type: ignore[no-untyped-def]
    from core.database import unseal

    conn = _superuser_for(using)
    if conn is not None:
        with conn:
            unseal(conn)


def _seal(sender, using="default", **kwargs):  # type: ignore[no-untyped-def]
    from django.conf import settings

    from core.database import seal

    conn = _superuser_for(using)
    if conn is not None:
        with conn:
            seal(conn, truncate=settings.AUDIT_TABLE_TRUNCATE_GRANT)
