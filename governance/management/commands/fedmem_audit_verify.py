from typing import Any

from django.core.management.base import BaseCommand, CommandError

from governance.models import AuditChainHead
from governance.services.audit import audit_verify


class Command(BaseCommand):
    help = "Verify the audit trail's hash chains; exits non-zero at the first tampered event."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--chain", help="one chain (a tenant id, or 'platform'); default: all")

    def handle(self, *args: Any, **options: Any) -> None:
        chains = (
            [options["chain"]]
            if options["chain"]
            else list(AuditChainHead.objects.values_list("chain", flat=True))
        )
        broken = []
        for chain in chains:
            result = audit_verify(chain=chain)
            if result.ok:
                self.stdout.write(f"{chain}: ok ({result.checked} events)")
            else:
                self.stdout.write(f"{chain}: BROKEN at event {result.broken_at}: {result.reason}")
                broken.append(chain)
        if broken:
            raise CommandError(f"{len(broken)} audit chain(s) failed verification")
