from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Builtin memory"

    def ready(self) -> None:
        # Fail at start-up, not on the first write, when the configured embedding
        # model cannot fill the vector column. Reads the model's config files only.
        from memory.embeddings import check_dimension, configured_model_path
        from memory.models import EMBEDDING_DIMENSIONS

        check_dimension(configured_model_path(), EMBEDDING_DIMENSIONS)
