import weakref
from typing import Any

from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Builtin memory"

    def ready(self) -> None:
        from django.conf import settings
        from django.db.backends.signals import connection_created

        from governance.authz import register_agent_job_kind
        from governance.services.demo import register_demo_memory_seeder
        from governance.services.erasure import register_dataset_checker, register_subject_deleter
        from memory.embeddings import check_dimension, configured_model_path
        from memory.erasure import check_erasable_datasets, erase_subject_memory
        from memory.models import EMBEDDING_DIMENSIONS
        from memory.retrieval.vectors import planned_per_run
        from memory.services.demo import memory_demo_seed
        from memory.services.knowledge import GRAPH_JOB, INGEST_JOB, erase_subject_ingests

        # Queued ingests first: a batch being stored commits before the memory deleter reads.
        register_subject_deleter("knowledge_ingests", erase_subject_ingests)
        register_subject_deleter("memory", erase_subject_memory)
        register_dataset_checker("memory", check_erasable_datasets)
        register_demo_memory_seeder(memory_demo_seed)
        # An agent that queued an ingest or a graph build follows it at /v1/jobs/{id}.
        register_agent_job_kind(INGEST_JOB)
        register_agent_job_kind(GRAPH_JOB)

        # Fail at start-up, not on the first write, when the configured embedding
        # model cannot fill the vector column. Reads the model's config files only.
        check_dimension(configured_model_path(), EMBEDDING_DIMENSIONS)

        # The server connections already tuned. Django sends connection_created each
        # time a request takes a connection from the pool, so without this every
        # request paid one more statement for settings its connection still holds
        # (session-level, and the pool does not reset them).
        tuned: weakref.WeakSet[Any] = weakref.WeakSet()

        def tune_hnsw(sender, connection, **kwargs):  # type: ignore[no-untyped-def]
            # Once per connection, not per query: filtered vector searches keep
            # scanning the graph until they have enough rows that pass the filters.
            if connection.vendor != "postgresql" or connection.connection in tuned:
                return
            tuned.add(connection.connection)
            # Nearest-neighbour searches keep a plan made for their values (see there).
            raw = connection.connection
            raw.cursor_factory = planned_per_run(raw.cursor_factory)
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT set_config('hnsw.ef_search', %s, false), "
                    "set_config('hnsw.iterative_scan', 'relaxed_order', false)",
                    [str(settings.FEDMEM_HNSW_EF_SEARCH)],
                )

        connection_created.connect(tune_hnsw, weak=False, dispatch_uid="fedmem-hnsw-tuning")

        from core.tasks import enqueue_on_commit
        from memory.services.hooks import on_items_written
        from memory.tasks import extract_items

        def enqueue_extraction(item_ids: list[object], inputs: dict[str, object]) -> None:
            # One task per write (a batch is one task): the outbox row commits with the items.
            # The write's parse travels as offsets (memory.extraction.handoff), never as text.
            if inputs:
                enqueue_on_commit(extract_items, [str(pk) for pk in item_ids], inputs=inputs)
            else:
                enqueue_on_commit(extract_items, [str(pk) for pk in item_ids])

        on_items_written(enqueue_extraction)
