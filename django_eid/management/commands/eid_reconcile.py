"""``manage.py eid_reconcile``: finish identifications whose browser never came back.

A user who identifies on a phone often ends in another app or another browser, or closes
the tab once the eID app says "done": the broker holds a finished session, paid for, that
no callback will ever bring. Run this every minute or so (cron, a systemd timer, a
Kubernetes CronJob, Celery beat: docs/guides/app-switch.md). For each pending row older
than ``--older-than`` it asks the broker, through :func:`django_eid.flow.settle`:

- ``SUCCESS`` is stored (the site's rules and signals run, ``request`` is ``None``), but
  only when the record's device is the browser that started (``COMPLETE_WITHOUT_CALLBACK``);
- a cancelled session becomes ``ABORTED``, a failed one ``ERROR``, a timed-out one
  ``EXPIRED``; one still at the broker past ``SESSION_MAX_AGE`` becomes ``EXPIRED``.

Safe to run from several hosts at once: each batch of rows is claimed (``SELECT ... FOR
UPDATE SKIP LOCKED``, then a lease in ``claimed_until``) before the broker is asked, so no
two runs settle the same row, and a crashed run's rows are free again when its lease ends.
Idempotent: a finished row is never touched again. Exits non-zero only when the broker or
the configuration fails.
"""

from __future__ import annotations

import datetime
import time
from collections import Counter
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from django_eid import flow
from django_eid.exceptions import EidConfigurationError, EidError
from django_eid.models import Identification

#: How long a run holds the rows of a batch: longer than asking the broker about them takes.
LEASE = datetime.timedelta(minutes=5)


class Command(BaseCommand):
    help = (
        "Finish pending identifications whose browser never came back, from the broker's "
        "records (the same-device rule applies to successes)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=int,
            default=60,
            help="Only rows pending for at least this many seconds (default 60): younger "
            "ones are most likely still on their way back.",
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=100,
            help="Rows claimed at a time (default 100).",
        )
        parser.add_argument(
            "--limit",
            type=int,
            default=None,
            help="Stop after this many rows (default: all that are due).",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Only count the rows that are due; ask the broker nothing, change nothing.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        older_than, batch_size = options["older_than"], options["batch_size"]
        if older_than < 0 or batch_size < 1:
            raise CommandError("--older-than must be >= 0 and --batch-size >= 1")
        if options["dry_run"]:
            self.stdout.write(f"eid_reconcile: {due(older_than).count()} pending row(s) due.")
            return
        began = time.monotonic()
        counts: Counter[str] = Counter()
        limit = options["limit"]
        failure: Exception | None = None
        seen: set[int] = set()  # a row still at the broker is not asked twice in one run
        while failure is None and (limit is None or counts.total() < limit):
            size = batch_size if limit is None else min(batch_size, limit - counts.total())
            batch = claim(older_than, size, exclude=seen)
            if not batch:
                break
            seen.update(row.pk for row in batch)
            for row in batch:
                try:
                    counts[flow.settle(row).outcome] += 1
                except (EidError, EidConfigurationError) as err:
                    failure = err
                    release(batch)
                    break
            else:
                release(batch)
        seconds = time.monotonic() - began
        done = counts.total()
        summary = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items())) or "none"
        per_row = f"; {seconds / done * 1000:.1f} ms per row" if done else ""
        self.stdout.write(f"eid_reconcile: {done} row(s) checked: {summary}{per_row}.")
        if failure is not None:
            raise CommandError(f"stopped: {failure}") from failure


def due(older_than: int) -> Any:
    """Pending rows older than ``older_than`` seconds that no run holds."""
    now = timezone.now()
    return (
        Identification.objects.pending()
        .filter(created_at__lte=now - datetime.timedelta(seconds=older_than))
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
    )


def claim(older_than: int, size: int, *, exclude: set[int]) -> list[Identification]:
    """Take up to ``size`` due rows for this run: locked rows (another run's) are skipped."""
    rows = (
        due(older_than)
        .exclude(pk__in=exclude)
        .order_by("created_at", "pk")
        .defer("social_security_number")
    )
    if connection.features.has_select_for_update_skip_locked:
        rows = rows.select_for_update(skip_locked=True)
    with transaction.atomic():
        batch = list(rows[:size])
        if batch:
            until = timezone.now() + LEASE
            Identification.objects.filter(pk__in=[r.pk for r in batch]).update(claimed_until=until)
    return batch


def release(batch: list[Identification]) -> None:
    """Give back the rows of ``batch`` still pending, for the next run."""
    Identification.objects.filter(pk__in=[r.pk for r in batch]).update(claimed_until=None)
