"""``manage.py eid_link``: link the accounts verified before links existed.

A verification links its account to the person from this release on (``LINK_ON_VERIFY``);
the accounts verified before it, or while the setting was off, have no link, and a site
that turns eID login on would ask each of them to verify again. This command gives every
verified identification still stored (``SUCCESS``, not anonymized, with the person's
unique id at their eID) the link it would make today: the oldest such identification of
a person links its account, an account keeps the links it has, and a person already
linked to another account stays with that one. Run it once after upgrading; running it
again links only what is new.

It reads the identifications in batches of ``--batch-size`` in the order they were
started, only the four columns a link needs, and writes each batch's links in one
``INSERT`` that skips a person already linked: memory and locks stay those of one batch
at a million rows, and a run stopped anywhere is finished by the next.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_eid.flows.link import new_link
from django_eid.models import Identification, LinkedIdentity

#: A progress line after every this many batches (every 10,000 rows by default).
PROGRESS_EVERY = 10


class Command(BaseCommand):
    help = "Link each account to the persons its stored verified identifications name."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch-size",
            type=int,
            default=1000,
            help="Identifications read per batch, each batch its own INSERT (default 1000).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        batch_size = options["batch_size"]
        if batch_size < 1:
            raise CommandError(f"--batch-size: {batch_size} is not a positive number of rows")
        before = LinkedIdentity.objects.count()
        rows = (
            Identification.objects.verified()
            .exclude(identity_provider_unique_id="")
            .exclude(identity_provider="")
            .only("pk", "user_id", "identity_provider", "identity_provider_unique_id")
            .order_by("pk")
        )
        read = batches = 0
        last: Any = None
        while True:
            page = list((rows if last is None else rows.filter(pk__gt=last))[:batch_size])
            if not page:
                break
            last = page[-1].pk
            read += len(page)
            links: dict[str, LinkedIdentity] = {}
            for row in page:
                made = new_link(row)
                if made is not None:
                    # The oldest identification of a person in the batch links first.
                    links.setdefault(made.key, made)
            LinkedIdentity.objects.bulk_create(links.values(), ignore_conflicts=True)
            batches += 1
            if batches % PROGRESS_EVERY == 0:
                self.stdout.write(f"... {read} verified identification(s) read")
        made_now = LinkedIdentity.objects.count() - before
        self.stdout.write(
            f"eid_link: {read} verified identification(s) read, {made_now} link(s) made."
        )
