from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from governance.services.demo import demo_seed


class Command(BaseCommand):
    help = (
        "Create (or refresh) the demo tenant, one user per role, two agents and their memories; "
        "print the logins."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--force", action="store_true", help="allow seeding in production")

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.PRODUCTION and not options["force"]:
            raise CommandError("refusing to create demo users in production; pass --force if you mean it")
        data = demo_seed()
        self.stdout.write(self.style.SUCCESS(f"Demo tenant '{data['tenant']}' is ready."))
        self.stdout.write("Console logins (username / password / role):")
        for username, info in data["users"].items():
            self.stdout.write(f"  {username:<14} {info['password']:<16} {info['role']}")
        self.stdout.write("Agent keys (Authorization: Bearer <key>):")
        for name, info in data["agents"].items():
            self.stdout.write(f"  {name:<14} {info['id']}  {info['key']}")
        self.stdout.write(f"Demo memories: {data['memories']} (seeded once; reruns add only what is missing)")
