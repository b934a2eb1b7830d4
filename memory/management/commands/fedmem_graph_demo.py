"""Load the demo graph datasets (causal chains per domain) into an existing tenant."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from governance.models import Tenant
from memory.graph_datasets import CHAINS
from memory.services.graph_demo import graph_demo_load


class Command(BaseCommand):
    help = "Load the demo graph datasets into an existing tenant (fedmem_demo --graph-tenant calls it)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--tenant", required=True, metavar="SLUG")
        parser.add_argument("--domains", help="comma-separated domains (default: all)")
        parser.add_argument("--extract-now", action="store_true", help="extract here, without a worker")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"no tenant with slug {options['tenant']!r}")
        domains = [d for d in (options["domains"] or "").split(",") if d] or None
        unknown = sorted(set(domains or []) - set(CHAINS))
        if unknown:
            raise CommandError(f"unknown domain {unknown[0]!r} (one of {', '.join(CHAINS)})")
        result = graph_demo_load(tenant=tenant, domains=domains, extract_now=options["extract_now"])
        self.stdout.write(
            f"Demo graph datasets in '{tenant.slug}': {result['facts']} facts "
            f"({result['created']} new) in {', '.join(result['domains'])}; "
            f"agents: {', '.join(result['agents'])}"
        )
