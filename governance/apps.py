from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "governance"
    verbose_name = "Governance"

    def ready(self) -> None:
        from governance import authentication, schema  # noqa: F401  (login signal receivers; OpenAPI auth extension)
        from governance.services.candidates import erase_subject_candidates
        from governance.services.erasure import register_subject_deleter

        register_subject_deleter("candidates", erase_subject_candidates)
