"""``manage.py eid_purge --older-than 90d``: retention of identification data.

Deletes (or with ``--anonymize`` strips the personal fields of) finished
identifications older than the given age, and marks pending ones older than
``SESSION_MAX_AGE`` as ``EXPIRED``. Safe to run from cron while the site takes
traffic: it only touches finished rows and stale pending ones, each with one
conditional statement, so a callback racing it either finishes the row first
(which then is no longer pending) or finds it expired. A purged row's person claims
(``ONE_ACCOUNT_PER_PERSON``) go with it.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from django_eid import claims
from django_eid.conf import eid_settings
from django_eid.models import Identification

_AGE_RE = re.compile(r"^([0-9]+)([smhdw]?)\Z")
_UNITS = {"": 86400, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}

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
}


def parse_age(value: str) -> datetime.timedelta:
    """``90d``, ``12h``, ``30m``, ``2w``, ``3600s``; a bare number is days."""
    match = _AGE_RE.match(value.strip().lower())
    if not match:
        raise CommandError(f"--older-than: {value!r} is not an age like 90d, 12h or 2w")
    try:
        age = datetime.timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])
        timezone.now() - age
    except OverflowError as err:
        raise CommandError(f"--older-than: {value!r} reaches before the year 1") from err
    return age


class Command(BaseCommand):
    help = "Delete or anonymize old identifications and expire stale pending ones."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            required=True,
            help="Age of finished identifications to purge: 90d, 12h, 2w (a bare number is days).",
        )
        parser.add_argument(
            "--anonymize",
            action="store_true",
            help="Strip personal fields instead of deleting the rows.",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Only print how many rows would change."
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="Allow an age shorter than SESSION_MAX_AGE (purging just-finished rows).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        age = parse_age(options["older_than"])
        if age.total_seconds() < eid_settings.SESSION_MAX_AGE and not options["force"]:
            # "--older-than 0" in a cron line would wipe the audit trail of today's users:
            # an age that short is a typo until said otherwise.
            raise CommandError(
                f"--older-than {options['older_than']!r} is shorter than SESSION_MAX_AGE "
                f"({eid_settings.SESSION_MAX_AGE} s): add --force if you mean it."
            )
        now = timezone.now()
        cutoff = now - age
        stale = Identification.objects.stale(eid_settings.SESSION_MAX_AGE)
        old = Identification.objects.finished().filter(created_at__lt=cutoff)
        if options["anonymize"]:
            # Rows already anonymized need no second pass.
            old = old.filter(anonymized_at__isnull=True)
        if options["dry_run"]:
            verb = "anonymize" if options["anonymize"] else "delete"
            # A run expires the stale rows first; those older than the cutoff then go too.
            also = stale.filter(created_at__lt=cutoff)
            if options["anonymize"]:
                also = also.filter(anonymized_at__isnull=True)
            self.stdout.write(f"Would expire {stale.count()} stale pending identification(s).")
            self.stdout.write(
                f"Would {verb} {old.count() + also.count()} finished identification(s) "
                f"older than {age}."
            )
            return
        with transaction.atomic():
            expired = stale.update(status=Identification.Status.EXPIRED, completed_at=now)
        with transaction.atomic():
            if options["anonymize"]:
                # A row without the identity no longer holds the person for its account
                # (ONE_ACCOUNT_PER_PERSON); deleted rows take their claims with them.
                claims.release(old)
                changed = old.update(**PERSONAL_FIELDS, anonymized_at=now)
                self.stdout.write(
                    f"Anonymized {changed} finished identification(s) older than {age}."
                )
            else:
                # The total would count the rows' person claims too.
                _, deleted = old.delete()
                changed = deleted.get(Identification._meta.label, 0)
                self.stdout.write(f"Deleted {changed} finished identification(s) older than {age}.")
        self.stdout.write(f"Expired {expired} stale pending identification(s).")
