"""``manage.py eid_demo_fill``: a month of made-up identifications, for the admin's dashboard.

Running a month of real sandbox flows would take hours, so this writes the rows those
flows would leave instead: ``Identification`` rows and their audit events (``started``,
the finishing event, ``rejected``, ``broker_error``) through django-eid's own
``audit.values_of``, spread over the last ``--days`` days with plausible shares of
outcomes, providers, displays and durations. The rows hold no personal data (no name, no
number), and belong to a few accounts of their own (``demo-fill-1`` ...), which cannot log
in. Deterministic for a given ``--seed`` and day. ``--clear`` removes what an earlier run
wrote first.
"""

from __future__ import annotations

import datetime
import random
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import router, transaction
from django.utils import timezone

from django_eid import audit
from django_eid.models import AuditEvent, Identification

USERS = 12
#: What the end of an identification changes on its row.
FINAL_FIELDS = ("status", "completed_at", "identity_provider", "level_of_assurance", "error_code")
Kind = AuditEvent.Kind
Status = Identification.Status

#: The provider the start chose ("": the person chose at the broker), and its weight.
PROVIDERS = (
    ("NO_BANKID_WEB", 42),
    ("", 24),
    ("NO_BANKID_MOBILE", 14),
    ("NO_BUYPASS", 8),
    ("SE_BANKID", 7),
    ("DA_MITID", 5),
)
#: What the person picked at the broker, when the start left it open.
PICKED = ("NO_BANKID_WEB", "NO_BANKID_MOBILE", "NO_BUYPASS")
#: How an identification ends, and its weight. "failed": the start failed at the broker.
ENDINGS = (
    ("success", 74),
    ("aborted", 10),
    ("expired", 5),
    ("error", 4),
    ("failed", 2),
    ("rejected", 3),
    ("cancelled", 2),
)


class Command(BaseCommand):
    help = (
        "Fill the database with a month of made-up sandbox identifications and their audit "
        "events (no personal data), for the admin's dashboard. No broker is called."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=30, help="How many days back (30).")
        parser.add_argument(
            "--per-day", type=int, default=40, help="About how many starts a weekday (40)."
        )
        parser.add_argument("--seed", type=int, default=1, help="The random seed (1).")
        parser.add_argument(
            "--clear", action="store_true", help="First remove what earlier runs wrote."
        )

    def handle(self, *args: Any, days: int, per_day: int, seed: int, **options: Any) -> None:
        if days < 1 or per_day < 1:
            raise CommandError("--days and --per-day must be at least 1.")
        rng = random.Random(seed)  # noqa: S311 - made-up demo data, reproducible by design
        alias = router.db_for_write(Identification)
        with transaction.atomic(using=alias):
            if options["clear"]:
                self._clear(alias)
            users = self._users()
            rows, plans = self._rows(rng, users, days, per_day)
            Identification.objects.using(alias).bulk_create(rows)
            events = [e for row, plan in zip(rows, plans, strict=True) for e in _events(row, plan)]
            audit.write_many(events, using=alias)
            # The rows as their last events leave them.
            Identification.objects.using(alias).bulk_update(rows, FINAL_FIELDS, batch_size=500)
        self.stdout.write(
            self.style.SUCCESS(
                f"Wrote {len(rows)} identifications and {len(events)} audit events over "
                f"the last {days} days."
            )
        )

    def _clear(self, alias: str) -> None:
        # The rows of the command's own accounts; their events by the rows' numbers.
        rows = Identification.objects.using(alias).filter(user__in=self._users())
        ids = list(rows.values_list("pk", flat=True))
        AuditEvent.objects.using(alias).filter(identification_id__in=ids).delete()
        rows.delete()

    def _users(self) -> list[Any]:
        model = get_user_model()
        users = []
        for i in range(1, USERS + 1):
            lookup: dict[str, Any] = {model.USERNAME_FIELD: f"demo-fill-{i}"}
            user, created = model._default_manager.get_or_create(**lookup)
            if created:
                user.set_unusable_password()
                user.save()
            users.append(user)
        return users

    def _rows(
        self, rng: random.Random, users: list[Any], days: int, per_day: int
    ) -> tuple[list[Identification], list[dict[str, Any]]]:
        now = timezone.now()
        today = timezone.localdate(now)
        rows: list[Identification] = []
        plans: list[dict[str, Any]] = []
        for back in range(days - 1, -1, -1):
            day = today - datetime.timedelta(days=back)
            weekend = day.weekday() >= 5
            count = max(1, round(rng.gauss(per_day * (0.6 if weekend else 1.0), per_day / 6)))
            if back == 0:  # today so far
                count = round(count * min(1.0, timezone.localtime(now).hour / 24))
            midnight = timezone.make_aware(datetime.datetime.combine(day, datetime.time.min))
            for _ in range(count):
                start = midnight + datetime.timedelta(seconds=_daytime(rng))
                if start >= now:
                    continue
                provider = _pick(rng, PROVIDERS)
                display = "iframe" if rng.random() < 0.3 else "redirect"
                ending = _pick(rng, ENDINGS)
                # The frame loses a few more people on the way.
                if ending == "success" and display == "iframe" and rng.random() < 0.06:
                    ending = "aborted"
                seconds = min(rng.lognormvariate(3.5, 0.6), 1500.0)
                if ending == "expired":
                    seconds = 1800.0
                rows.append(
                    Identification(
                        user=rng.choice(users),
                        status=Status.PENDING,
                        display=display,
                        identity_provider=provider,
                        created_at=start,
                    )
                )
                plans.append(
                    {
                        "ending": ending,
                        "finish": min(start + datetime.timedelta(seconds=seconds), now),
                        "picked": provider or rng.choice(PICKED),
                        "kind": rng.choices(
                            (Kind.RETURNED, Kind.FINISHED, Kind.RECONCILED), (70, 25, 5)
                        )[0],
                        "retrieval_error": ending == "error" and rng.random() < 0.5,
                    }
                )
        return rows, plans


def _daytime(rng: random.Random) -> float:
    """Seconds after midnight: mostly in the day, few at night."""
    hour = rng.choices(
        range(24), [1, 1, 1, 1, 1, 2, 4, 6, 8, 9, 9, 9, 9, 9, 9, 8, 8, 8, 8, 7, 6, 4, 3, 2]
    )[0]
    return hour * 3600 + rng.random() * 3600


def _pick(rng: random.Random, weighted: tuple[tuple[str, int], ...]) -> str:
    return rng.choices([v for v, _ in weighted], [w for _, w in weighted])[0]


def _events(row: Identification, plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The events the flow would have written for ``row`` as ``plan`` ends it; ``row`` is
    left as its last event leaves it."""
    started = row.created_at
    ending = plan["ending"]
    if ending == "failed":  # the broker refused the session: no session, no return
        row.status, row.error_code, row.completed_at = Status.ERROR, "EidBrokerError", started
        out = [audit.values_of(row, Kind.STARTED, at=started)]
        out.append(audit.values_of(row, Kind.BROKER_ERROR, at=started, outcome="EidBrokerError"))
        return out
    out = [audit.values_of(row, Kind.STARTED, at=started)]
    finished = plan["finish"]
    kind = plan["kind"]
    row.completed_at = finished
    if ending in ("success", "rejected"):
        row.status = Status.SUCCESS
        row.identity_provider = plan["picked"]
        row.level_of_assurance = "high" if "BANKID" in row.identity_provider else "substantial"
    elif ending == "aborted":
        row.status = Status.ABORTED
    elif ending == "cancelled":
        row.status, kind = Status.ABORTED, Kind.CANCELLED
    elif ending == "expired":
        row.status, kind = Status.EXPIRED, Kind.EXPIRED
    else:
        row.status, row.error_code = Status.ERROR, "EidBrokerError"
        if plan["retrieval_error"]:
            out.append(
                audit.values_of(row, Kind.BROKER_ERROR, at=finished, outcome="EidBrokerError")
            )
    out.append(audit.values_of(row, kind, at=finished))
    if ending == "rejected":
        row.status = Status.REJECTED
        out.append(audit.values_of(row, Kind.REJECTED, at=finished, outcome="rejected"))
    return out
