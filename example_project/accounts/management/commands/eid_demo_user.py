"""``manage.py eid_demo_user``: create or reset the demo user and print how to log in.

Idempotent: a second run finds the user and sets the same password again.
``--clear`` also forgets the user's identifications, for a fresh start.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from django_eid.models import Identification
from example_project.accounts.models import Profile

DEFAULT_USERNAME = "demo"
#: Only for DEBUG=True: a laptop demo whose password is printed anyway.
DEFAULT_PASSWORD = "try-django-eid"


class Command(BaseCommand):
    help = "Create or reset the demo user of the example project and print its credentials."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default=DEFAULT_USERNAME)
        parser.add_argument(
            "--password",
            default=None,
            help=f"Default: {DEFAULT_PASSWORD!r} (required when DEBUG is False).",
        )
        parser.add_argument(
            "--clear",
            action="store_true",
            help="Also delete the user's identifications and reset the profile.",
        )
        parser.add_argument(
            "--admin", action="store_true", help="Make the user a superuser (for /admin/)."
        )

    def handle(self, *args: Any, username: str, password: str | None, **options: Any) -> None:
        if password is None:
            if not settings.DEBUG:
                raise CommandError("DEBUG is False: choose a password with --password.")
            password = DEFAULT_PASSWORD
        if not username:
            raise CommandError("The username must not be empty.")
        user_model = get_user_model()
        with transaction.atomic():
            lookup: dict[str, Any] = {user_model.USERNAME_FIELD: username}
            user, created = user_model._default_manager.get_or_create(**lookup)
            user.set_password(password)
            user.is_active = True
            if options["admin"]:
                user.is_staff = user.is_superuser = True
            user.save()
            if options["clear"]:
                Identification.objects.filter(user=user).delete()
                Profile.objects.filter(user=user).delete()
        action = "Created" if created else "Reset"
        self.stdout.write(self.style.SUCCESS(f"{action} the demo user."))
        self.stdout.write(f"  username: {username}")
        self.stdout.write(f"  password: {password}")
