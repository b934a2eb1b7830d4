from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from governance.services.demo import demo_seed


class Command(BaseCommand):
    help = (
        "Create (or refresh) the demo tenant, one user per role, two agents and their memories; "
        "print the logins."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--force", action="store_true", help="allow seeding in production")
        parser.add_argument(
            "--graph-tenant",
            metavar="SLUG",
            help="only load the demo graph datasets into this existing tenant (no demo users)",
        )
        parser.add_argument("--graph-domains", help="comma-separated domains (default: all)")
        parser.add_argument(
            "--extract-now", action="store_true", help="with --graph-tenant: extract here, without a worker"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.PRODUCTION and not options["force"]:
            raise CommandError("refusing to create demo users in production; pass --force if you mean it")
        if options["graph_tenant"]:
            self._graph(options)
            return
        data = demo_seed()
        self.stdout.write(self.style.SUCCESS(f"Demo tenant '{data['tenant']}' is ready."))
        self.stdout.write("Console logins (username / password / role):")
        for username, info in data["users"].items():
            self.stdout.write(f"  {username:<14} {info['password']:<16} {info['role']}")
        self.stdout.write("Agent keys (Authorization: Bearer <key>):")
        for name, info in data["agents"].items():
            self.stdout.write(f"  {name:<14} {info['id']}  {info['key']}")
        self.stdout.write(f"Demo memories: {data['memories']} (seeded once; reruns add only what is missing)")

    def _graph(self, options: dict[str, Any]) -> None:
        # The graph datasets belong to the memory app, which governance does not import.
        call_command(
            "fedmem_graph_demo",
            tenant=options["graph_tenant"],
            domains=options["graph_domains"],
            extract_now=options["extract_now"],
            stdout=self.stdout,
        )
