from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "governance"
    verbose_name = "Governance"

    def ready(self) -> None:
        from core.demo import register_demo_seeder
        from governance import (  # noqa: F401  (restrict() gates, login signal receivers, OpenAPI auth extension)
            authentication,
            authz,
            schema,
        )
        from governance.services.candidates import erase_subject_candidates
        from governance.services.demo import demo_seed
        from governance.services.erasure import register_subject_deleter

        register_subject_deleter("candidates", erase_subject_candidates)
        register_demo_seeder(demo_seed)
