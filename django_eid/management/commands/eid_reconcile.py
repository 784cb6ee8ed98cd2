"""``manage.py eid_reconcile``: finish identifications whose browser never came back.

A user who identifies on a phone often ends in another app or another browser, or closes
the tab once the eID app says "done": the broker holds a finished session, paid for, that
no callback will ever bring. Run this every minute or so (cron, a systemd timer, a
Kubernetes CronJob, Celery beat: docs/guides/app-switch.md). For each pending row older
than ``--older-than`` it asks the broker, through :func:`django_eid.flow.settle`:

- ``SUCCESS`` is stored (the site's rules and signals run, ``request`` is ``None``), but
  only when the record's device is the browser that started (``COMPLETE_WITHOUT_CALLBACK``);
- a cancelled session becomes ``ABORTED``, a failed one ``ERROR``, a timed-out one
  ``EXPIRED``; one still at the broker past ``SESSION_MAX_AGE`` becomes ``EXPIRED``, and so
  does one the broker no longer knows (it answers 404) past ``SESSION_MAX_AGE``.

A row is handled on its own: a row the broker refuses, or that fails in the site's code,
is logged, counted (``error``) and left alone for :data:`BACKOFF`, and the run goes on.
Only a broker that cannot be reached (or refuses this site's credentials) and a broken
configuration stop the run, with a non-zero exit status.

Several runs at once (hosts, overlapping schedules) share the work through leases. A run
claims a batch of due rows with one conditional ``UPDATE`` (only rows no lease holds, with
``SELECT ... FOR UPDATE SKIP LOCKED`` first where the database has it, so that runs pick
different rows) that writes its own random ``claim_token`` and ``claimed_until``; it then
handles only the rows that carry its token, renews each row's lease (again conditionally)
just before asking the broker about it, skips a row whose lease it lost, and gives back only
rows that still carry its token. A row still at the broker is given back with
``claimed_until`` :data:`RECHECK` ahead, so the next runs do not ask about it again at once.
Times come from the database's clock, so hosts whose clocks differ agree on leases. So no
two runs ask about the same row, unless handling one row outlasts :data:`LEASE` (a broker
call hanging for minutes, a stuck receiver); even then a row is finished once, with its
signals sent once, as every change out of ``PENDING`` is conditional. A crashed run's rows
are free again when their lease ends. Idempotent: a finished row is never touched again.
"""

from __future__ import annotations

import datetime
import logging
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Iterable
from contextlib import nullcontext
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections, router, transaction
from django.db.models import Q
from django.utils import timezone

from django_eid import audit, flow
from django_eid.exceptions import EidApiError, EidError, EidUnavailable, TokenError
from django_eid.models import ENCRYPTED_FIELDS, Identification

logger = logging.getLogger("django_eid")

#: How long a run holds a row: claimed with its batch, then renewed just before the broker
#: is asked about it. Longer than handling one row takes (two broker calls within
#: ``TIMEOUT`` each, and the site's receivers).
LEASE = datetime.timedelta(minutes=5)
#: A row still at the broker (or identified on another device) is asked again this much
#: later at the earliest.
RECHECK = datetime.timedelta(minutes=2)
#: A row whose handling failed (the broker refused the call, an error in the site's code)
#: is tried again this much later at the earliest.
BACKOFF = datetime.timedelta(minutes=15)

Status = Identification.Status
#: A row's place in the claim order: ``(created_at, pk)``.
Key = tuple[datetime.datetime, int]

#: The database server's clock as seconds since the epoch: independent of the connection's
#: time zone, which Django does not set on every backend (``Now()`` on SQLite is UTC even
#: where naive local times are stored, on MySQL it is the server's zone).
_EPOCH_SQL = {
    "postgresql": "SELECT EXTRACT(EPOCH FROM STATEMENT_TIMESTAMP())",
    "mysql": "SELECT UNIX_TIMESTAMP(NOW(6))",
    "sqlite": "SELECT (julianday('now') - 2440587.5) * 86400.0",
}


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
        limit: int | None = options["limit"]
        if older_than < 0 or batch_size < 1:
            raise CommandError("--older-than must be >= 0 and --batch-size >= 1")
        run = Run()
        if options["dry_run"]:
            count = due(run.now(), older_than).count()
            self.stdout.write(f"eid_reconcile: {count} pending row(s) due.")
            return
        began = time.monotonic()
        counts: Counter[str] = Counter()
        skipped = 0
        failure: Exception | None = None
        after: Key | None = None  # one pass, oldest first: a run never asks about a row twice
        while failure is None and (limit is None or counts.total() < limit):
            size = batch_size if limit is None else min(batch_size, limit - counts.total())
            batch, after = run.claim(older_than, size, after=after)
            if after is None:
                break  # nothing left that is due
            later: dict[int, datetime.timedelta] = {}
            try:
                for row in batch:
                    # Finished meanwhile, or its lease ran out and another run took it.
                    if not run.renew(row):
                        skipped += 1
                        continue
                    try:
                        outcome, delay = handle_row(row)
                    except Stop as stop:
                        failure = stop.error
                        break
                    counts[outcome] += 1
                    if delay is not None:
                        later[row.pk] = delay
            finally:
                run.release(batch, later)
        seconds = time.monotonic() - began
        done = counts.total()
        summary = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items())) or "none"
        extra = f"; {skipped} skipped" if skipped else ""
        per_row = f"; {seconds / done * 1000:.1f} ms per row" if done else ""
        self.stdout.write(f"eid_reconcile: {done} row(s) checked: {summary}{extra}{per_row}.")
        if failure is not None:
            raise CommandError(f"stopped: {failure}") from failure


class Stop(Exception):
    """Asking about any further row is pointless: the run stops (``error`` says why)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def stops_the_run(err: EidError) -> bool:
    """The broker cannot be reached, or refuses this site's credentials: every other row
    would fail the same way (a configuration error stops the run too)."""
    return isinstance(err, (EidUnavailable, TokenError)) or (
        isinstance(err, EidApiError) and err.status_code == 401  # even with a new token
    )


def handle_row(row: Identification) -> tuple[str, datetime.timedelta | None]:
    """Settle ``row``: its outcome for the summary, and how long to leave it alone if it is
    still pending (``None``: it is finished, or free for the next run).

    Raises :class:`Stop` when the run should stop; any other failure is this row's alone.
    """
    try:
        with audit.finishing_as(audit.Kind.RECONCILED):
            outcome = flow.settle(row).outcome
    except EidError as err:
        if stops_the_run(err):
            raise Stop(err) from err
        if isinstance(err, EidApiError) and err.status_code == 404:
            # The broker does not know the session (it purged it, a sandbox restarted,
            # BASE_URL changed): nothing will ever come for it but its expiry.
            if flow.is_expired(row):
                logger.info(
                    "eid_reconcile: the broker does not know the session of identification %s, "
                    "older than SESSION_MAX_AGE: it expires.",
                    row.pk,
                )
                return ("expired" if flow.expire(row) else "finished"), None
            logger.warning(
                "eid_reconcile: the broker does not know the session of identification %s; "
                "it is asked again in %s and expires after SESSION_MAX_AGE.",
                row.pk,
                BACKOFF,
            )
            return "not_found", BACKOFF
        # EidError messages are scrubbed of secrets, tokens and national identity numbers.
        logger.warning(
            "eid_reconcile: settling identification %s failed (%s: %s); it is tried again in %s.",
            row.pk,
            type(err).__name__,
            err,
            BACKOFF,
        )
        return "error", BACKOFF
    except ImproperlyConfigured as err:
        raise Stop(err) from err
    except Exception as err:
        # An error in the site's code or data (a receiver, a key, a bug): its message may
        # describe the person, so only its type and where it was raised are logged.
        logger.error(
            "eid_reconcile: settling identification %s failed with %s; it is tried again in "
            "%s. Traceback (the message is left out: it may hold personal data):\n%s",
            row.pk,
            _types(err),
            BACKOFF,
            "".join(traceback.format_tb(err.__traceback__)).rstrip(),
        )
        return "error", BACKOFF
    return outcome, (RECHECK if outcome in ("pending", "other_device") else None)


def _types(err: BaseException) -> str:
    """``err``'s type, and those of the exceptions it was raised from or during."""
    names, seen = [], set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names.append(type(current).__name__)
        current = current.__cause__ or current.__context__
    return " from ".join(names)


def free(now: datetime.datetime) -> Q:
    """Rows no run holds and that are not resting (``RECHECK``, ``BACKOFF``) at ``now``."""
    return Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)


def due(now: datetime.datetime, older_than: int) -> Any:
    """Pending rows older than ``older_than`` seconds at ``now`` that are free."""
    return (
        Identification.objects.pending()
        .filter(created_at__lte=now - datetime.timedelta(seconds=older_than))
        .filter(free(now))
    )


class Run:
    """One run of the command: its token, its clock (the database's), its claims."""

    def __init__(self) -> None:
        self.token = uuid.uuid4().hex
        self.alias = router.db_for_write(Identification)
        self._base = database_now(self.alias)
        self._at = time.monotonic()

    def now(self) -> datetime.datetime:
        """The database's time now, from its clock read at the last claim."""
        return self._base + datetime.timedelta(seconds=time.monotonic() - self._at)

    def claim(
        self, older_than: int, size: int, *, after: Key | None
    ) -> tuple[list[Identification], Key | None]:
        """Take up to ``size`` due rows after ``after`` for this run.

        Returns the rows that now carry this run's token (oldest first; another run may have
        taken some of the candidates first) and the key of the last candidate, where the next
        claim goes on (``None`` when no row was due).
        """
        self._base, self._at = database_now(self.alias), time.monotonic()
        now = self.now()
        rows = due(now, older_than)
        if after is not None:
            created, pk = after
            rows = rows.filter(Q(created_at__gt=created) | Q(created_at=created, pk__gt=pk))
        candidates = rows.order_by("created_at", "pk").values_list("created_at", "pk")
        features = connections[self.alias].features
        skip_locked = (
            features.has_select_for_update_skip_locked
            and features.supports_select_for_update_with_limit  # not Oracle
        )
        # SQLite: no transaction around the read (upgrading its lock to write can fail).
        with transaction.atomic(using=self.alias) if skip_locked else nullcontext():
            if skip_locked:
                # Runs at once pick different rows instead of racing for the same ones.
                candidates = candidates.select_for_update(skip_locked=True)
            found = list(candidates[:size])
            if not found:
                return [], None
            pks = [pk for _, pk in found]
            # The claim itself: conditional, so that of two runs that saw the same candidates
            # (no SKIP LOCKED) only one takes each row.
            Identification.objects.filter(pk__in=pks, status=Status.PENDING).filter(
                free(now)
            ).update(claim_token=self.token, claimed_until=now + LEASE)
        mine = (
            Identification.objects.filter(pk__in=pks, claim_token=self.token)
            .order_by("created_at", "pk")
            .defer(*ENCRYPTED_FIELDS)
        )
        return list(mine), found[-1]

    def renew(self, row: Identification) -> bool:
        """A fresh lease on ``row`` before asking about it; False if the run no longer holds it."""
        held = Identification.objects.filter(
            pk=row.pk, claim_token=self.token, status=Status.PENDING
        ).update(claimed_until=self.now() + LEASE)
        return bool(held)

    def release(
        self, batch: Iterable[Identification], later: dict[int, datetime.timedelta]
    ) -> None:
        """Give back the rows of ``batch`` that still carry this run's token: those still
        pending in ``later`` rest for their delay, the others are free."""
        now = self.now()
        by_delay: dict[datetime.timedelta, list[int]] = {}
        for pk, delay in later.items():
            by_delay.setdefault(delay, []).append(pk)
        for delay, pks in by_delay.items():
            Identification.objects.filter(
                pk__in=pks, claim_token=self.token, status=Status.PENDING
            ).update(claim_token="", claimed_until=now + delay)
        Identification.objects.filter(
            pk__in=[row.pk for row in batch], claim_token=self.token
        ).update(claim_token="", claimed_until=None)


def database_now(alias: str) -> datetime.datetime:
    """The database server's time, as Django stores times (aware UTC, or naive local when
    ``USE_TZ`` is off). The host's own clock on a database not known here."""
    connection = connections[alias]
    sql = _EPOCH_SQL.get(connection.vendor)
    if sql is None:
        return timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(sql)
        (seconds,) = cursor.fetchone()
    now = datetime.datetime.fromtimestamp(float(seconds), tz=datetime.UTC)
    return now if settings.USE_TZ else timezone.make_naive(now)
