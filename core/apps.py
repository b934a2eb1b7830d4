from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "fedmem core"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from core.database import check_pgvector

        checked: set[str] = set()

        def on_connect(sender, connection, **kwargs):  # type: ignore[no-untyped-def]
            # Once per process and alias: the answer cannot change while we run.
            if connection.alias in checked or connection.vendor != "postgresql":
                return
            check_pgvector(connection)
            checked.add(connection.alias)

        connection_created.connect(on_connect, weak=False, dispatch_uid="fedmem-pgvector-check")
