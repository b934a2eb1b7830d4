from typing import Any

from django.core.management.base import BaseCommand, CommandError

from governance.services.audit import audit_anchor_export, audit_chains, audit_verify


class Command(BaseCommand):
    help = "Verify the audit trail's hash chains; exits non-zero at the first tampered event."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--chain", help="one chain (a tenant id, or 'platform'); default: all")
        parser.add_argument(
            "--anchor", action="store_true", help="after a clean verification, export the signed heads"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # Chains with events, heads or exported anchors: a chain dropped from the
        # database still has its anchor file.
        chains = [options["chain"]] if options["chain"] else audit_chains()
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
        if options["anchor"]:
            self.stdout.write(f"Anchored {audit_anchor_export()} chain(s).")
