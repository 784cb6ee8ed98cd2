"""``manage.py eid_purge --older-than 90d``: retention of identification data.

Deletes (or with ``--anonymize`` strips the personal fields of) finished
identifications older than the given age, and marks pending ones older than
``SESSION_MAX_AGE`` as ``EXPIRED``. A purged row's person claims
(``ONE_ACCOUNT_PER_PERSON``) go with it, in the same transaction, and so does its audit
event (``expired``, ``purged`` or ``anonymized``: :mod:`django_eid.retention`). The events
stay; ``--events-older-than`` deletes those older than its age.

It works in batches of ``--batch-size`` rows, each its own transaction, so that the
first run after months without one (a million rows) needs no more memory than the
nightly one, holds no lock longer than a batch, and can be stopped at any point: the
next run finishes the rest. No row is read into Python but the columns of its event.

Safe to run from cron while the site takes traffic: every statement that changes rows
carries the conditions that chose them, so a callback racing it either finishes the row
first (which then is no longer pending) or finds it expired.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.db.models import QuerySet, signals
from django.utils import timezone

from django_eid import audit, retention
from django_eid.conf import eid_settings
from django_eid.flows import caps
from django_eid.models import AuditEvent, Identification, PersonClaim

_AGE_RE = re.compile(r"^([0-9]+)([smhdwy]?)\Z")
_UNITS = {"": 86400, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}

Kind = AuditEvent.Kind

#: A progress line after every this many batches (with the default ``--batch-size``, every
#: 10,000 rows), so that a long first run shows it is moving.
PROGRESS_EVERY = 10

#: Fields that identify or describe a person; ``--anonymize`` blanks them and keeps the
#: rest (user, status, provider, error code and status, dates) for statistics. The broker's
#: request id goes too: with the API credentials it names the full record at the broker;
#: so do ``next_url`` (it may carry query data) and ``error_message`` (a receiver's reason
#: may describe the person, e.g. their age).
PERSONAL_FIELDS: dict[str, Any] = {
    "request_id": None,
    "next_url": "",
    "error_message": "",
    "identity_provider_unique_id": "",
    "name": "",
    "first_name": "",
    "middle_name": "",
    "last_name": "",
    "date_of_birth": None,
    "social_security_number": None,
    "social_security_number_hash": None,
    "user_agent": "",
    "ip_address": None,
    "metadata": {},
    "raw": {},
    "national_id_country": "",
    "national_id_kind": "",
    "device_key": "",
    # The keyed hash of the start's address: the audit events keep theirs (a pseudonym
    # of an address under a key that rotates), the row needs it no longer.
    "start_address_hash": "",
    "evidence": None,
}


def parse_age(value: str, option: str = "--older-than") -> datetime.timedelta:
    """``90d``, ``12h``, ``30m``, ``2w``, ``3600s``, ``5y`` (365 days); a bare number is
    days. ``option`` names the option in the error."""
    match = _AGE_RE.match(value.strip().lower())
    if not match:
        raise CommandError(f"{option}: {value!r} is not an age like 90d, 12h, 2w or 5y")
    try:
        age = datetime.timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])
        timezone.now() - age
    except OverflowError as err:
        raise CommandError(f"{option}: {value!r} reaches before the year 1") from err
    return age


def checked_age(options: dict[str, Any], name: str) -> datetime.timedelta | None:
    """The age of option ``name`` (``older_than``), refused when shorter than a session
    without ``--force``; ``None`` when not given."""
    value = options[name]
    if value is None:
        return None
    option = "--" + name.replace("_", "-")
    age = parse_age(value, option)
    if age.total_seconds() < eid_settings.SESSION_MAX_AGE and not options["force"]:
        # "--older-than 0" in a cron line would wipe the audit trail of today's users:
        # an age that short is a typo until said otherwise.
        raise CommandError(
            f"{option} {value!r} is shorter than SESSION_MAX_AGE "
            f"({eid_settings.SESSION_MAX_AGE} s): add --force if you mean it."
        )
    return age


class Command(BaseCommand):
    help = (
        "Delete or anonymize old identifications and expire stale pending ones, each with "
        "its audit event; delete old audit events."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            help=(
                "Age of finished identifications to purge: 90d, 12h, 2w, 5y (a bare number "
                "is days)."
            ),
        )
        parser.add_argument(
            "--events-older-than",
            help="Age of audit events to delete: 5y, 400d (a bare number is days).",
        )
        parser.add_argument(
            "--anonymize",
            action="store_true",
            help="Strip personal fields instead of deleting the rows.",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Only print how many rows (and audit events) would change.",
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="Allow an age shorter than SESSION_MAX_AGE (purging just-finished rows or events).",
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=1000,
            help="Rows changed per transaction (default 1000).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["older_than"] is None and options["events_older_than"] is None:
            raise CommandError("Give --older-than, --events-older-than or both.")
        age = checked_age(options, "older_than")
        events_age = checked_age(options, "events_older_than")
        batch_size = options["batch_size"]
        if batch_size < 1:
            raise CommandError(f"--batch-size: {batch_size} is not a positive number of rows")
        # One clock for the whole run: every batch decides by the same cut-offs, so that a
        # dry run counts what a run does, however long the run takes.
        now = timezone.now()
        if age is not None:
            self._purge(
                age, now, batch_size, anonymize=options["anonymize"], dry_run=options["dry_run"]
            )
        if events_age is not None:
            self._purge_events(events_age, now, batch_size, dry_run=options["dry_run"])

    def _purge_events(
        self, age: datetime.timedelta, now: datetime.datetime, batch_size: int, *, dry_run: bool
    ) -> None:
        # The events this run writes are at `now`: never older than the cutoff.
        cutoff = now - age
        if dry_run:
            count = AuditEvent.objects.filter(at__lt=cutoff).count()
            self.stdout.write(f"Would delete {count} audit event(s) older than {age}.")
            return
        deleted = retention.delete_events(
            cutoff, batch_size=batch_size, using=AuditEvent.objects.db
        )
        self.stdout.write(f"Deleted {deleted} audit event(s) older than {age}.")

    def _purge(
        self,
        age: datetime.timedelta,
        now: datetime.datetime,
        batch_size: int,
        *,
        anonymize: bool,
        dry_run: bool,
    ) -> None:
        cutoff = now - age
        stale = Identification.objects.pending().filter(
            created_at__lt=now - datetime.timedelta(seconds=eid_settings.SESSION_MAX_AGE)
        )
        old = Identification.objects.finished().filter(created_at__lt=cutoff)
        if anonymize:
            # Rows already anonymized need no second pass.
            old = old.filter(anonymized_at__isnull=True)
        if dry_run:
            verb = "anonymize" if anonymize else "delete"
            # A run expires the stale rows first; those older than the cutoff then go too.
            also = stale.filter(created_at__lt=cutoff)
            if anonymize:
                also = also.filter(anonymized_at__isnull=True)
            expiring, purging = stale.count(), old.count() + also.count()
            self.stdout.write(f"Would expire {expiring} stale pending identification(s).")
            self.stdout.write(
                f"Would {verb} {purging} finished identification(s) older than {age}."
            )
            self.stdout.write(f"Would write {expiring + purging} audit event(s).")
            return
        expired = self._in_batches(
            stale,
            lambda batch, rows: _expire(batch, rows, now),
            batch_size,
            # Locked although the UPDATE carries its own conditions: each expired row gets
            # its event, from the row read before the UPDATE. Unlocked, a callback could
            # finish a row between that read and the UPDATE, which would then skip it and
            # leave an "expired" event for a row that was verified. Locked, the callback
            # waits for the batch and then finds the row expired.
            lock=True,
            progress="Expired {} stale pending identification(s) so far.",
        )
        if anonymize:
            changed = self._in_batches(
                old,
                lambda batch, rows: _anonymize(batch, rows, now),
                batch_size,
                lock=True,
                progress="Anonymized {} finished identification(s) so far.",
            )
            self.stdout.write(f"Anonymized {changed} finished identification(s) older than {age}.")
        else:
            changed = self._in_batches(
                old,
                lambda batch, rows: _delete(batch, rows, now),
                batch_size,
                lock=True,
                progress="Deleted {} finished identification(s) so far.",
            )
            self.stdout.write(f"Deleted {changed} finished identification(s) older than {age}.")
        self.stdout.write(f"Expired {expired} stale pending identification(s).")
        # The anonymous caps' counters of windows that are over: they count nothing more.
        self.stdout.write(f"Removed {caps.forget_ended(now)} ended start counter(s).")

    def _in_batches(
        self,
        rows: QuerySet[Identification],
        change: Callable[[QuerySet[Identification], list[Identification]], int],
        batch_size: int,
        *,
        lock: bool,
        progress: str,
    ) -> int:
        """Apply ``change`` to ``rows``, ``batch_size`` rows at a time, each in its own
        transaction; the number of rows changed.

        Each batch is the next ``batch_size`` ids of ``rows`` after the previous batch's
        last (so a run reads every row once, whatever the batches left behind), and
        ``change`` gets them as ``rows`` narrowed to those ids, and the rows themselves
        with the fields of their events (:data:`~django_eid.retention.EVENT_FIELDS`): the
        statements that change them carry ``rows``' own conditions, so a row that no longer
        meets them when its batch runs (verified, anonymized or deleted meanwhile) is left
        alone. ``lock`` takes the batch's rows ``FOR UPDATE`` as they are read (where the
        database can), so that nothing changes them between the statements of one batch:
        the rows read are the rows changed, and their events are exact. (SQLite has no row
        locks, but a transaction that has read can only write if no other wrote since.) A
        run stopped anywhere leaves whole batches done; the next run finishes the rest.
        """
        chosen = rows.order_by("pk").only(*retention.EVENT_FIELDS)
        if lock:
            chosen = retention.locking(chosen)
        last = 0
        total = batches = 0
        while True:
            with transaction.atomic():
                batch = list(chosen.filter(pk__gt=last)[:batch_size])
                if not batch:
                    break
                changed = change(rows.filter(pk__in=[row.pk for row in batch]), batch)
                if changed != len(batch):
                    # Only where the database could not lock: the events would not be
                    # the rows changed. The batch rolls back; the next run redoes it.
                    raise CommandError(
                        f"{changed} of a batch of {len(batch)} identification(s) changed "
                        "while it ran: run the command again."
                    )
                total += changed
            last = batch[-1].pk
            batches += 1
            if batches % PROGRESS_EVERY == 0:
                self.stdout.write(progress.format(total))
        return total


def _release_claims(batch: QuerySet[Identification]) -> None:
    """Delete the person claims of the rows of ``batch`` that still qualify.

    By a list of ids, not by a subquery of ``batch``: with statistics that do not know the
    table's rows yet (a table filled since its last ``ANALYZE``), PostgreSQL may plan the
    subquery as a nested loop over both tables, which took minutes per batch; an id list
    is one pass over the claims' index whatever the statistics say.
    """
    ids = list(batch.values_list("pk", flat=True))
    if ids:
        PersonClaim.objects.filter(identification_id__in=ids).delete()


def _write(rows: list[Identification], kind: str, now: datetime.datetime, using: str) -> None:
    """The events of a batch's rows. Timed when the batch changes them, not by the run's one
    clock (``now``, its cut-offs): the events of a run of a million rows are not one instant,
    which an export pages through by (at, id) a batch of ties at most at a time."""
    outcome = None if kind == Kind.EXPIRED else retention.RETENTION
    events = retention.events_of(rows, kind, at=timezone.now(), outcome=outcome)
    audit.write_many(events, using=using)


def _expire(
    batch: QuerySet[Identification], rows: list[Identification], now: datetime.datetime
) -> int:
    expired = batch.update(status=Identification.Status.EXPIRED, completed_at=now)
    for row in rows:  # as the UPDATE leaves them: the event has the status and duration
        row.status, row.completed_at = Identification.Status.EXPIRED, now
    _write(rows, Kind.EXPIRED, now, batch.db)
    return expired


def _anonymize(
    batch: QuerySet[Identification], rows: list[Identification], now: datetime.datetime
) -> int:
    # A row without the identity no longer holds the person for its account
    # (ONE_ACCOUNT_PER_PERSON): its claims go in the transaction that strips it.
    _release_claims(batch)
    anonymized = batch.update(**PERSONAL_FIELDS, anonymized_at=now)
    _write(rows, Kind.ANONYMIZED, now, batch.db)
    return anonymized


def _delete(
    batch: QuerySet[Identification], rows: list[Identification], now: datetime.datetime
) -> int:
    """Delete ``batch`` and its person claims, and write the ``purged`` event of each of
    ``rows``; the number of identifications deleted.

    Two statements, neither of which reads a row into Python: Django's ``delete()`` would
    load every row whole (``raw``, the decrypted number) to cascade to the claims.
    Where a site listens to ``pre_delete``/``post_delete`` of these models, it goes through
    Django's deletion instead, so that the site's receivers still run, with only the
    primary key loaded.
    """
    if any(
        signal.has_listeners(model)
        for signal in (signals.pre_delete, signals.post_delete)
        for model in (Identification, PersonClaim)
    ):
        _, counts = batch.only("pk").delete()
        # The total would count the rows' person claims too.
        deleted = counts.get(Identification._meta.label, 0)
    else:
        _release_claims(batch)
        deleted = batch._raw_delete(batch.db)
    _write(rows, Kind.PURGED, now, batch.db)
    return deleted
