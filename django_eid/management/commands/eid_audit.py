"""``manage.py eid_audit``: the audit trail exported, or one identification's evidence checked.

``eid_audit --since 2026-01-01 --until 2026-02-01 --user 42 --format jsonl`` writes the
events of that period (``--until`` exclusive; dates and naive times in the site's time
zone), of that account, oldest first, to standard output or ``--output FILE``, streamed in
fixed-size chunks (:mod:`django_eid.export`). ``eid_audit --verify ID`` prints the summary
of the stored evidence of identification ``ID`` (:func:`django_eid.evidence.verify`), or
fails with its reason.
"""

from __future__ import annotations

import datetime
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from django_eid import export

#: The options of an export, which ``--verify`` does not take.
EXPORT_OPTIONS = ("since", "until", "user", "format", "output")


def parse_moment(value: str, option: str) -> datetime.datetime:
    """An ISO 8601 date or date and time; naive, in the site's time zone (as the events are
    stored with ``USE_TZ`` off)."""
    try:
        moment = datetime.datetime.fromisoformat(value.strip())
    except ValueError as err:
        raise CommandError(
            f"{option}: {value!r} is not a date or a date and time like 2026-01-31 or "
            "2026-01-31T12:00"
        ) from err
    if not settings.USE_TZ:
        # Times are stored naive, in the site's time zone: compared as such.
        return timezone.make_naive(moment) if timezone.is_aware(moment) else moment
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment, timezone.get_default_timezone())
    return moment


class Command(BaseCommand):
    help = "Export the audit trail (CSV or JSON Lines), or verify one identification's evidence."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--since", help="From this date or time (inclusive; ISO 8601, site's time zone)."
        )
        parser.add_argument(
            "--until", help="Up to this date or time (exclusive; ISO 8601, site's time zone)."
        )
        parser.add_argument("--user", help="Only the events of this account (its primary key).")
        parser.add_argument("--format", choices=export.FORMATS, help="csv (the default) or jsonl.")
        parser.add_argument("--output", help="Write to this file instead of standard output.")
        parser.add_argument(
            "--verify",
            type=int,
            metavar="ID",
            help="Check the stored evidence of identification ID and print its summary.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["verify"] is not None:
            given = [f"--{name}" for name in EXPORT_OPTIONS if options[name] is not None]
            if given:
                raise CommandError(f"--verify takes no export option ({', '.join(given)}).")
            self._verify(options["verify"])
            return
        since = until = None
        if options["since"] is not None:
            since = parse_moment(options["since"], "--since")
        if options["until"] is not None:
            until = parse_moment(options["until"], "--until")
        if since is not None and until is not None and since >= until:
            raise CommandError(
                f"--since {options['since']} is not before --until {options['until']}: "
                "no event could match."
            )
        user = options["user"]
        if user is not None and not user.strip():
            raise CommandError("--user: give the account's primary key.")
        rows = export.events(since=since, until=until, user=user and user.strip())
        fmt = options["format"] or "csv"
        if options["output"]:
            try:
                # newline="": the csv module writes its own line ends.
                with open(options["output"], "w", encoding="utf-8", newline="") as out:
                    export.write(rows, out, fmt)
            except OSError as err:
                raise CommandError(f"--output: {err.strerror}: {options['output']}") from err
        else:
            export.write(rows, _Stdout(self), fmt)

    def _verify(self, identification_id: int) -> None:
        # Imported here: an export needs none of the evidence's machinery (its keys).
        from django_eid import evidence
        from django_eid.exceptions import EidError

        try:
            summary = evidence.verify(identification_id)
        except EidError as err:
            raise CommandError(str(err)) from err
        self.stdout.write(summary)


class _Stdout:
    """The command's standard output as a plain stream: text written as given."""

    def __init__(self, command: BaseCommand) -> None:
        self._out = command.stdout

    def write(self, text: str) -> None:
        self._out.write(text, ending="")
