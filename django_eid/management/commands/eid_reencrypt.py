"""``manage.py eid_reencrypt``: re-encrypt stored national identity numbers (and kept
evidence, ``KEEP_EVIDENCE``) under the first key.

Rotation: put the new key first in ``DJANGO_EID["ENCRYPTION_KEYS"]`` (keep the
old ones after it), deploy, run this command, then remove the old keys. The
lookup hash is recomputed under the new key at the same time, and so is the key of the
row's ``ONE_ACCOUNT_PER_PERSON`` claim on the number, so that new identifications (which
claim under the new key) still collide with it.

It goes through the rows in batches of ``--batch-size``, each one transaction: the
batch's rows still under an old key are locked (``SELECT ... FOR UPDATE``), read again
under the lock, and rewritten with one ``UPDATE``. The lock, not a comparison in the
``UPDATE``, is what keeps a number saved concurrently (a callback, the admin) from being
overwritten with the value read before: that writer either committed before the lock was
taken, and its value is the one rewritten, or it waits for the batch's commit and then
writes its own. Waiting rather than skipping locked rows (``skip_locked``) means a run
leaves no row behind; a live transaction holds a row for milliseconds. A stopped run
leaves whole batches done; rows already under the first key are skipped without a write,
so the next run finishes the rest.

A row no configured key decrypts (its key was removed too early) is never rewritten: the
others are moved, and the command then fails naming how many it could not read, and
which (ids only), so that the key can be put back and the command run again.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections, models, transaction
from django.db.models.functions import Cast

from django_eid import claims, crypto
from django_eid.models import Identification, PersonClaim

#: A progress line after every this many batches.
PROGRESS_EVERY = 10
#: How many unreadable rows the error names (it counts them all).
SHOWN = 20


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored national identity number and kept evidence under the first "
        "ENCRYPTION_KEYS key."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch-size",
            type=int,
            default=1000,
            help="Rows read, and rewritten in one transaction, at a time (default 1000).",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Only count rows not yet under the first key."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        batch_size = options["batch_size"]
        if batch_size < 1:
            raise CommandError(f"--batch-size: {batch_size} is not a positive number of rows")
        self.unreadable: list[int] = []  # the first SHOWN of them, in order
        self.unreadable_count = 0
        dry_run = options["dry_run"]
        stale, done = self._column("social_security_number", batch_size, dry_run=dry_run)
        if dry_run:
            self.stdout.write(f"{stale} identification(s) are not under the first key.")
        else:
            self.stdout.write(f"Re-encrypted {done} identification(s) under the first key.")
        # The evidence (KEEP_EVIDENCE) in a pass of its own: a row is rewritten only for what
        # is stale in it. Said only where a site keeps evidence under an old key.
        stale, done = self._column("evidence", batch_size, dry_run=dry_run)
        if stale and dry_run:
            self.stdout.write(f"The evidence of {stale} identification(s) is not under it.")
        elif stale:
            self.stdout.write(f"Re-encrypted the evidence of {done} identification(s).")
        if self.unreadable_count:
            raise CommandError(
                f"{crypto.unreadable_summary(sorted(set(self.unreadable)), count=self.unreadable_count)} "
                f"They were not rewritten. {crypto.LOST_KEY_ADVICE}"
            )

    def _column(self, field: str, batch_size: int, *, dry_run: bool) -> tuple[int, int]:
        """One encrypted column, batch by batch: how many rows were stale, how many moved."""
        # Cast to a plain text field reads the ciphertext without decrypting it, so
        # rows already under the first key are skipped without a write.
        ciphertexts = (
            Identification.objects.filter(**{f"{field}__isnull": False})
            .annotate(ciphertext=Cast(field, models.TextField()))
            .order_by("pk")
            .values_list("pk", "ciphertext")
        )
        last = 0
        stale_count = done = batches = 0
        while True:
            batch = list(ciphertexts.filter(pk__gt=last)[:batch_size])
            if not batch:
                break
            last = batch[-1][0]
            stale: list[int] = []
            for pk, text in batch:
                if text and not crypto.is_current(text):
                    if crypto.readable(text):
                        stale.append(pk)
                    else:
                        self._unreadable(pk)
            stale_count += len(stale)
            if stale and not dry_run:
                done += self._rewrite(stale, field)
            batches += 1
            if batches % PROGRESS_EVERY == 0 and not dry_run:
                self.stdout.write(f"Re-encrypted {done} identification(s) so far.")
        return stale_count, done

    def _unreadable(self, pk: int) -> None:
        self.unreadable_count += 1
        if len(self.unreadable) < SHOWN:
            self.unreadable.append(pk)

    def _rewrite(self, pks: list[int], field: str) -> int:
        """Re-encrypt ``field`` of the rows ``pks`` under the first key, in one transaction;
        how many."""
        rows = (
            Identification.objects.filter(pk__in=pks, **{f"{field}__isnull": False})
            .annotate(ciphertext=Cast(field, models.TextField()))
            .order_by("pk")
            .values_list("pk", "ciphertext")
        )
        if connections[rows.db].features.has_select_for_update:
            rows = rows.select_for_update()
        with transaction.atomic():
            moved: list[Identification] = []
            # Read again under the lock: what was read before may have changed since.
            for pk, text in rows:
                if not text or crypto.is_current(text):
                    continue  # emptied, or rewritten under the first key, meanwhile
                try:
                    plain = crypto.decrypt(text)
                except crypto.DecryptionError:
                    self._unreadable(pk)  # its key was removed meanwhile
                    continue
                if field != "social_security_number":
                    moved.append(Identification(pk=pk, **{field: plain}))
                    continue
                number = plain
                moved.append(
                    Identification(
                        pk=pk,
                        social_security_number=crypto.SensitiveText(number),
                        social_security_number_hash=crypto.lookup_hash(number),
                    )
                )
            if not moved:
                return 0
            if field != "social_security_number":
                Identification.objects.bulk_update(moved, [field])
                return len(moved)
            # One UPDATE for the batch (bulk_update encrypts through the field, and does
            # not call save(): the hash is set above).
            Identification.objects.bulk_update(
                moved, ["social_security_number", "social_security_number_hash"]
            )
            claimed = set(
                PersonClaim.objects.filter(
                    identification__in=[row.pk for row in moved],
                    key__startswith=PersonClaim.SSN,
                ).values_list("identification_id", flat=True)
            )
            for row in moved:
                if row.pk in claimed:
                    claims.rekey(row)
        return len(moved)
