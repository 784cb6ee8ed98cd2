"""The admin's dashboard: what the audit trail says about the last 30 days and 12 months.

The figures (:func:`figures`) come from :class:`~django_eid.models.AuditEvent` rows only,
in four queries, each a range of the ``at`` index; days and months are the site's current
time zone's. The definitions, as the page states them:

* an identification's outcome is its finishing event's status (``returned``, ``finished``,
  ``reconciled``, ``expired``, ``cancelled``), or a ``started`` event's own when the start
  failed at once (no finishing event follows); a later ``rejected`` event moves one from
  ``SUCCESS`` to ``REJECTED`` on its own day;
* the completion rate is, of the identifications started in the window, the share that
  succeeded and was not rejected, by the provider and display chosen at the start (``""``:
  the person chose at the broker);
* the time to complete is ``duration_ms`` of the finishing events with status ``SUCCESS``;
* sessions created are ``started`` events with status ``PENDING``: each is a session the
  broker created, and bills.

:class:`DashboardView` is the page, mounted by ``AuditEventAdmin.get_urls``.
"""

from __future__ import annotations

import datetime
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar

from django.conf import settings
from django.contrib.admin import AdminSite
from django.core.exceptions import PermissionDenied
from django.db import connections, router
from django.db.models import Aggregate, Count, FloatField, Q, Value
from django.db.models.functions import TruncDate
from django.http import HttpRequest, HttpResponseBase
from django.utils import formats, timezone
from django.utils.decorators import method_decorator
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.generic import TemplateView

from django_eid import svg
from django_eid.conf import eid_settings
from django_eid.models import AuditEvent, Identification

Kind = AuditEvent.Kind
Status = Identification.Status

DAYS = 30
MONTHS = 12
#: The kinds that take an identification out of ``PENDING`` (as :data:`audit.FINISHING`).
FINISHING: frozenset[str] = frozenset(
    {Kind.RETURNED, Kind.FINISHED, Kind.RECONCILED, Kind.EXPIRED, Kind.CANCELLED}
)
#: The outcomes, in the stacks' order (bottom first).
OUTCOMES: tuple[str, ...] = (
    Status.SUCCESS.value,
    Status.REJECTED.value,
    Status.ABORTED.value,
    Status.EXPIRED.value,
    Status.ERROR.value,
)
#: Off PostgreSQL, the percentiles come from at most this many of the newest durations.
MAX_DURATIONS = 100_000


@dataclass(frozen=True)
class Day:
    """One day: its identifications by outcome, its starts and its broker errors."""

    day: datetime.date
    outcomes: Mapping[str, int]
    started: int
    broker_errors: int

    @property
    def finished(self) -> int:
        return sum(self.outcomes.values())


@dataclass(frozen=True)
class Rate:
    """Of the identifications started with ``key`` (a provider, a display), how many succeeded."""

    key: str
    started: int
    succeeded: int

    @property
    def rate(self) -> float | None:
        return self.succeeded / self.started if self.started else None

    @property
    def percent(self) -> float | None:
        rate = self.rate
        return None if rate is None else round(rate * 100, 1)


@dataclass(frozen=True)
class Month:
    """The sessions the broker created in one month, and what they cost."""

    month: datetime.date
    sessions: int
    cost: Decimal | None


@dataclass(frozen=True)
class Figures:
    """Every number of the dashboard."""

    today: datetime.date
    days: tuple[Day, ...]
    outcomes: tuple[str, ...]
    by_provider: tuple[Rate, ...]
    by_display: tuple[Rate, ...]
    #: Successes with a duration, and their median and 95th percentile (ms).
    completed: int
    median_ms: float | None
    p95_ms: float | None
    months: tuple[Month, ...]
    price: Decimal | None
    currency: str

    @property
    def empty(self) -> bool:
        """Whether the trail holds nothing for these windows."""
        return not (
            any(d.finished or d.started or d.broker_errors for d in self.days)
            or any(m.sessions for m in self.months)
        )

    @property
    def broker_errors(self) -> int:
        return sum(d.broker_errors for d in self.days)

    @property
    def total_cost(self) -> Decimal | None:
        return (
            None if self.price is None else sum((m.sessions for m in self.months), 0) * self.price
        )


class PercentileCont(Aggregate):
    """PostgreSQL's ``percentile_cont(fraction) WITHIN GROUP (ORDER BY expression)``."""

    function = "PERCENTILE_CONT"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: str, fraction: float) -> None:
        # A number of this module's, never input: written into the SQL as a literal.
        super().__init__(expression, fraction=repr(float(fraction)))


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """``percentile_cont``'s value of sorted ``values``: linear between the nearest two."""
    if not values:
        return None
    position = fraction * (len(values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)


def _start_of(day: datetime.date, tz: datetime.tzinfo | None) -> datetime.datetime:
    midnight = datetime.datetime.combine(day, datetime.time.min)
    return midnight if tz is None else timezone.make_aware(midnight, tz)


def _months_back(month: datetime.date, count: int) -> datetime.date:
    index = month.year * 12 + month.month - 1 - count
    return datetime.date(index // 12, index % 12 + 1, 1)


def figures(now: datetime.datetime | None = None, using: str | None = None) -> Figures:
    """The dashboard's numbers at ``now`` (default: now), in the current time zone."""
    # With USE_TZ off, times are stored naive in the site's time: days are theirs.
    tz = timezone.get_current_timezone() if settings.USE_TZ else None
    now = now or timezone.now()
    today = now.date() if tz is None else timezone.localdate(now, tz)
    first_day = today - datetime.timedelta(days=DAYS - 1)
    since = _start_of(first_day, tz)
    alias = using or router.db_for_read(AuditEvent)
    events = AuditEvent.objects.using(alias).order_by()

    # 1. Per day and kind and status: the outcomes, the starts, the broker errors.
    outcomes: dict[datetime.date, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    started: dict[datetime.date, int] = defaultdict(int)
    errors: dict[datetime.date, int] = defaultdict(int)
    kinds = [*FINISHING, Kind.STARTED, Kind.REJECTED, Kind.BROKER_ERROR]
    per_day = (
        events.filter(at__gte=since, kind__in=kinds)
        .annotate(day=TruncDate("at", tzinfo=tz))
        .values_list("day", "kind", "status")
        .annotate(n=Count("*"))
    )
    for day, kind, status, n in per_day:
        if kind == Kind.STARTED:
            started[day] += n
            if status != Status.PENDING:  # failed at once: no finishing event follows
                outcomes[day][status] += n
        elif kind == Kind.REJECTED:
            # A success turned down afterwards: REJECTED, or ERROR when a rule could not run.
            outcomes[day][Status.SUCCESS] -= n
            outcomes[day][status or Status.REJECTED] += n
        elif kind == Kind.BROKER_ERROR:
            errors[day] += n
        else:
            outcomes[day][status] += n
    seen = {status for counts in outcomes.values() for status in counts}
    order = (*OUTCOMES, *sorted(seen - set(OUTCOMES) - {""}))
    days = []
    for offset in range(DAYS):
        day = first_day + datetime.timedelta(days=offset)
        counts = outcomes.get(day, {})
        # A rejection of a success finished before the window has no success to undo.
        days.append(
            Day(
                day=day,
                outcomes={status: max(0, counts.get(status, 0)) for status in order},
                started=started.get(day, 0),
                broker_errors=errors.get(day, 0),
            )
        )

    # 2. Completion: each start of the window, and whether it succeeded and stayed so. The
    # subqueries are uncorrelated, so PostgreSQL hashes each once (a "hashed SubPlan").
    window = events.filter(at__gte=since, identification_id__isnull=False)
    succeeded_ids = window.filter(kind__in=FINISHING, status=Status.SUCCESS).values(
        "identification_id"
    )
    rejected_ids = window.filter(kind=Kind.REJECTED).values("identification_id")
    completion = (
        events.filter(at__gte=since, kind=Kind.STARTED)
        .values_list("provider", "display")
        .annotate(
            started=Count("*"),
            succeeded=Count(
                "at",
                filter=Q(identification_id__in=succeeded_ids)
                & ~Q(identification_id__in=rejected_ids),
            ),
        )
    )
    providers: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    displays: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for provider, display, n_started, n_succeeded in completion:
        for table, key in ((providers, provider), (displays, display)):
            table[key][0] += n_started
            table[key][1] += n_succeeded

    # 3. Time to complete, of the successes.
    durations = events.filter(
        at__gte=since, kind__in=FINISHING, status=Status.SUCCESS, duration_ms__isnull=False
    )
    median: float | None
    p95: float | None
    if connections[alias].vendor == "postgresql":
        found = durations.aggregate(
            n=Count("*"),
            median=PercentileCont("duration_ms", 0.5),
            p95=PercentileCont("duration_ms", 0.95),
        )
        completed, median, p95 = found["n"], found["median"], found["p95"]
    else:
        newest = sorted(
            int(ms or 0)  # never None: filtered out above
            for ms in durations.order_by("-at").values_list("duration_ms", flat=True)[
                :MAX_DURATIONS
            ]
        )
        completed = len(newest)
        median, p95 = percentile(newest, 0.5), percentile(newest, 0.95)

    # 4. Sessions the broker created (and billed), per month: one count per month between
    # its bounds, computed here in the time zone; no conversion of each row's time in SQL.
    # The partial index django_eid_event_session holds exactly these rows.
    starts = [_months_back(today.replace(day=1), MONTHS - 1 - i) for i in range(MONTHS + 1)]
    bounds = [_start_of(month, tz) for month in starts]
    # Each month its own range count on the partial index django_eid_event_session (an
    # index-only scan of exactly these rows), the twelve in one statement (UNION ALL):
    # cheaper than one pass testing every row against twelve ranges.
    sessions = events.filter(kind=Kind.STARTED, status=Status.PENDING)
    monthly = [
        sessions.filter(at__gte=bounds[i], at__lt=bounds[i + 1])
        .annotate(month=Value(i))
        .values("month")
        .annotate(n=Count("*"))
        .values_list("month", "n")
        for i in range(MONTHS)
    ]
    # No ordering anywhere: Django 6.1 refuses an ORDER BY of the model's default (at, id)
    # on a union whose columns are the month and the count.
    per_month: dict[int, int] = dict(monthly[0].union(*monthly[1:], all=True).order_by())
    price = eid_settings.PRICE_PER_SESSION
    months = []
    for i in range(MONTHS):
        n = per_month.get(i, 0)
        months.append(Month(starts[i], n, None if price is None else n * price))

    return Figures(
        today=today,
        days=tuple(days),
        outcomes=order,
        by_provider=_rates(providers),
        by_display=_rates(displays),
        completed=completed,
        median_ms=median,
        p95_ms=p95,
        months=tuple(months),
        price=price,
        currency=eid_settings.PRICE_CURRENCY,
    )


def _rates(table: Mapping[str, list[int]]) -> tuple[Rate, ...]:
    # The most used first; the same count by name.
    rows = [Rate(key, started, succeeded) for key, (started, succeeded) in table.items()]
    return tuple(sorted(rows, key=lambda r: (-r.started, r.key)))


# -- the page ---------------------------------------------------------------------------


def provider_label(key: str) -> str:
    return key or _("chosen at the broker")


def display_label(key: str) -> str:
    labels = dict(Identification.Display.choices)
    return str(labels.get(key, key)) if key else _("unknown")


def outcome_label(status: str) -> str:
    return str(dict(Status.choices).get(status, status))


@method_decorator(never_cache, name="dispatch")
class DashboardView(TemplateView):
    """The dashboard, for staff allowed to view audit events; the admin site's own
    ``admin_view`` (log in, staff) wraps it (``AuditEventAdmin.get_urls``)."""

    http_method_names = ["get", "head"]
    template_name = "admin/django_eid/dashboard.html"
    #: The permission the page asks for beyond the admin's staff check.
    permission: ClassVar[str] = "django_eid.view_auditevent"
    admin_site: AdminSite | None = None

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not request.user.has_perm(self.permission):
            raise PermissionDenied
        return super().dispatch(request, *args, **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        found = figures()
        context = super().get_context_data(**kwargs)
        if self.admin_site is not None:
            context.update(self.admin_site.each_context(self.request))
        context.update(
            title=_("Identifications dashboard"),
            opts=AuditEvent._meta,
            figures=found,
            charts=charts(found),
            days=DAYS,
            outcome_labels=[outcome_label(s) for s in found.outcomes],
            legend=[(f"eid-{svg.css_class(s)}", outcome_label(s)) for s in found.outcomes],
            median_s=None if found.median_ms is None else found.median_ms / 1000,
            p95_s=None if found.p95_ms is None else found.p95_ms / 1000,
            total_sessions=sum(m.sessions for m in found.months),
            day_rows=[(d, [d.outcomes[s] for s in found.outcomes]) for d in found.days],
            provider_rows=[(provider_label(r.key), r) for r in found.by_provider],
            display_rows=[(display_label(r.key), r) for r in found.by_display],
        )
        return context


def _day(day: datetime.date) -> str:
    return formats.date_format(day, "j M")


def _month(month: datetime.date) -> str:
    return formats.date_format(month, "M Y")


def charts(found: Figures) -> dict[str, str]:
    """The page's SVG charts of ``found``, by name."""
    day_labels = [_day(d.day) for d in found.days]
    stacks = [
        svg.Series(outcome_label(s), f"eid-{svg.css_class(s)}", [d.outcomes[s] for d in found.days])
        for s in found.outcomes
    ]
    return {
        "outcomes": svg.stacked_bars(
            "eid-outcomes",
            _("Identifications per day by outcome, last %(days)s days") % {"days": DAYS},
            day_labels,
            stacks,
            tick_every=5,
        ),
        "providers": svg.rate_bars(
            "eid-providers",
            _("Completion rate per provider"),
            [(provider_label(r.key), r.rate) for r in found.by_provider],
        ),
        "displays": svg.rate_bars(
            "eid-displays",
            _("Completion rate per display"),
            [(display_label(r.key), r.rate) for r in found.by_display],
        ),
        "errors": svg.bars(
            "eid-errors",
            _("Broker errors per day, last %(days)s days") % {"days": DAYS},
            day_labels,
            [d.broker_errors for d in found.days],
            series_name=_("broker errors"),
            css="eid-broker-error",
            tick_every=5,
        ),
        "months": svg.bars(
            "eid-months",
            _("Sessions created per month, last %(months)s months") % {"months": MONTHS},
            [_month(m.month) for m in found.months],
            [m.sessions for m in found.months],
            series_name=_("sessions"),
            css="eid-session",
            tick_every=2,
        ),
    }
