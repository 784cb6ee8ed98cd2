"""``manage.py eid_reencrypt``: re-encrypt stored national identity numbers under the first key.

Rotation: put the new key first in ``DJANGO_EID["ENCRYPTION_KEYS"]`` (keep the
old ones after it), deploy, run this command, then remove the old keys. The
lookup hash is recomputed under the new key at the same time, and so is the key of the
row's ``ONE_ACCOUNT_PER_PERSON`` claim on the number, so that new identifications (which
claim under the new key) still collide with it.

A row no configured key decrypts (its key was removed too early) is never rewritten: the
others are moved, and the command then fails naming how many it could not read, and
which (ids only), so that the key can be put back and the command run again.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import models, transaction
from django.db.models.functions import Cast

from django_eid import claims, crypto
from django_eid.models import Identification


class Command(BaseCommand):
    help = "Re-encrypt every stored national identity number under the first ENCRYPTION_KEYS key."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch-size",
            type=int,
            default=500,
            help="Rows read per query (default 500); each row is then rewritten on its own.",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Only count rows not yet under the first key."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # Cast to a plain text field reads the ciphertext without decrypting it, so
        # rows already under the first key are skipped without a write.
        ciphertexts = (
            Identification.objects.filter(social_security_number__isnull=False)
            .annotate(ciphertext=Cast("social_security_number", models.TextField()))
            .order_by("pk")
            .values_list("pk", "ciphertext")
        )
        stale: list[int] = []
        unreadable: list[int] = []
        for pk, text in ciphertexts.iterator(options["batch_size"]):
            if text and not crypto.is_current(text):
                (stale if crypto.readable(text) else unreadable).append(pk)
        if options["dry_run"]:
            self.stdout.write(f"{len(stale)} identification(s) are not under the first key.")
            self._fail_on(unreadable)
            return
        done = 0
        for pk in stale:
            with transaction.atomic():
                row = Identification.objects.select_for_update().filter(pk=pk).first()
                if row is None or not row.social_security_number:
                    if row is not None and row.has_unreadable_number:  # its key went meanwhile
                        unreadable.append(pk)
                    continue  # None: purged meanwhile
                row.save(update_fields=["social_security_number"])
                claims.rekey(row)
                done += 1
        self.stdout.write(f"Re-encrypted {done} identification(s) under the first key.")
        self._fail_on(sorted(unreadable))

    def _fail_on(self, unreadable: list[int]) -> None:
        if unreadable:
            raise CommandError(
                f"{crypto.unreadable_summary(unreadable)} They were not rewritten. "
                f"{crypto.LOST_KEY_ADVICE}"
            )
