"""The admin's dashboard (django_eid.dashboard): its figures against a hand-counted trail,
and the page: who may see it, what it sends, how many queries it costs."""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from django_eid.dashboard import DAYS, MONTHS, figures, percentile
from django_eid.models import AuditEvent
from tests.fixtures_client import SettingsWrapper

OSLO = ZoneInfo("Europe/Oslo")
#: "Now" of every test: the window's days are 14 February to 15 March 2026.
NOW = datetime.datetime(2026, 3, 15, 12, 0, tzinfo=OSLO)
URL_NAME = "admin:django_eid_auditevent_dashboard"

pytestmark = pytest.mark.django_db


def at(day: str, clock: str = "10:00") -> datetime.datetime:
    """A moment of Oslo's day ``day`` (``"2026-03-10"``)."""
    return datetime.datetime.fromisoformat(f"{day}T{clock}").replace(tzinfo=OSLO)


def event(
    ident: int,
    when: datetime.datetime,
    kind: str,
    status: str = "PENDING",
    *,
    provider: str = "bankid",
    display: str = "redirect",
    duration_ms: int | None = None,
) -> AuditEvent:
    return AuditEvent(
        at=when,
        kind=kind,
        identification_id=ident,
        status=status,
        provider=provider,
        display=display,
        duration_ms=duration_ms,
    )


#: The trail, counted by hand in the tests below. Oslo is UTC+1 in winter.
TRAIL = [
    # 1: a success through the return, in a minute.
    event(1, at("2026-03-10"), "started"),
    event(1, at("2026-03-10", "10:01"), "returned", "SUCCESS", duration_ms=60_000),
    # 2: the person chose the provider at the broker; a success, rejected by a site rule.
    event(2, at("2026-03-11"), "started", provider="", display="iframe"),
    event(
        2, at("2026-03-11", "10:02"), "finished", "SUCCESS", display="iframe", duration_ms=120_000
    ),
    event(2, at("2026-03-11", "10:02"), "rejected", "REJECTED", display="iframe"),
    # 3: cancelled; 4: expired.
    event(3, at("2026-03-11"), "started"),
    event(3, at("2026-03-11", "10:05"), "cancelled", "ABORTED"),
    event(4, at("2026-03-12"), "started", provider=""),
    event(4, at("2026-03-12", "10:30"), "expired", "EXPIRED", provider=""),
    # 5: failed at once (no session, no finishing event); 6: the broker failed the start.
    event(5, at("2026-03-12"), "started", "ERROR"),
    event(5, at("2026-03-12"), "broker_error", "ERROR"),
    event(6, at("2026-03-13"), "started"),
    event(6, at("2026-03-13", "10:00:01"), "finished", "ERROR", duration_ms=1_000),
    event(6, at("2026-03-13", "10:00:01"), "broker_error", "ERROR"),
    # 7: started late on the 14th, finished after midnight: the 15th in Oslo, the 14th in UTC.
    event(7, at("2026-03-14", "23:30"), "started", display="iframe"),
    event(
        7,
        at("2026-03-15", "00:10"),
        "reconciled",
        "SUCCESS",
        display="iframe",
        duration_ms=2_400_000,
    ),
    # 8: a success before the window, rejected in it: no success of the window to undo.
    event(8, at("2026-01-05"), "started"),
    event(8, at("2026-01-05", "10:01"), "finished", "SUCCESS", duration_ms=30_000),
    event(8, at("2026-03-01"), "rejected", "REJECTED"),
    # Sessions of earlier months: 1 April 2025 at 00:30 in Oslo is still March in UTC.
    event(9, at("2025-04-02"), "started"),
    event(10, at("2025-03-31", "23:30"), "started"),
    event(11, at("2025-04-01", "00:30"), "started"),
    # Not counted anywhere: a link.
    event(1, at("2026-03-10", "10:02"), "linked", "SUCCESS"),
]


@pytest.fixture
def trail(settings: SettingsWrapper) -> None:
    settings.TIME_ZONE = "Europe/Oslo"
    AuditEvent.objects.bulk_create(TRAIL)


@pytest.fixture
def oslo(settings: SettingsWrapper) -> None:
    settings.TIME_ZONE = "Europe/Oslo"


def by_day(found: Any) -> dict[str, dict[str, int]]:
    """The days that hold anything, with their non-zero numbers."""
    out = {}
    for day in found.days:
        numbers = {k: v for k, v in day.outcomes.items() if v}
        if day.started:
            numbers["started"] = day.started
        if day.broker_errors:
            numbers["broker_errors"] = day.broker_errors
        if numbers:
            out[day.day.isoformat()] = numbers
    return out


@pytest.mark.usefixtures("trail")
def test_the_identifications_per_day_by_outcome() -> None:
    found = figures(NOW)
    assert len(found.days) == DAYS
    assert found.days[0].day == datetime.date(2026, 2, 14)
    assert found.days[-1].day == datetime.date(2026, 3, 15)
    assert found.outcomes[:5] == ("SUCCESS", "REJECTED", "ABORTED", "EXPIRED", "ERROR")
    assert by_day(found) == {
        "2026-03-01": {"REJECTED": 1},
        "2026-03-10": {"SUCCESS": 1, "started": 1},
        "2026-03-11": {"REJECTED": 1, "ABORTED": 1, "started": 2},
        "2026-03-12": {"EXPIRED": 1, "ERROR": 1, "started": 2, "broker_errors": 1},
        "2026-03-13": {"ERROR": 1, "started": 1, "broker_errors": 1},
        "2026-03-14": {"started": 1},
        "2026-03-15": {"SUCCESS": 1},
    }
    assert found.broker_errors == 2


@pytest.mark.usefixtures("trail")
def test_the_completion_rates_by_the_start_s_choice() -> None:
    found = figures(NOW)
    providers = {r.key: (r.started, r.succeeded, r.percent) for r in found.by_provider}
    # 1, 3, 5, 6 and 7 started with "bankid" (1 and 7 succeeded); 2 and 4 without (2 rejected).
    assert providers == {"bankid": (5, 2, 40.0), "": (2, 0, 0.0)}
    assert [r.key for r in found.by_provider] == ["bankid", ""]  # the most used first
    displays = {r.key: (r.started, r.succeeded, r.percent) for r in found.by_display}
    assert displays == {"redirect": (5, 1, 20.0), "iframe": (2, 1, 50.0)}


@pytest.mark.usefixtures("trail")
def test_the_time_to_complete() -> None:
    found = figures(NOW)
    # The successes of the window: 60 s, 120 s, 2,400 s (8's is older).
    assert found.completed == 3
    assert found.median_ms == 120_000
    assert found.p95_ms == pytest.approx(120_000 + (2_400_000 - 120_000) * 0.9)


def test_percentiles_interpolate_as_percentile_cont() -> None:
    assert percentile([], 0.5) is None
    assert percentile([7], 0.95) == 7
    assert percentile([1, 2, 3, 4], 0.5) == 2.5
    assert percentile(list(range(101)), 0.95) == 95


@pytest.mark.usefixtures("trail")
def test_the_sessions_per_month_without_a_price() -> None:
    found = figures(NOW)
    assert len(found.months) == MONTHS
    assert found.months[0].month == datetime.date(2025, 4, 1)
    assert found.months[-1].month == datetime.date(2026, 3, 1)
    sessions = {m.month.isoformat(): m.sessions for m in found.months if m.sessions}
    # March 2026: 1, 2, 3, 4, 6, 7 (5 failed before the broker); 10 is March 2025, in Oslo.
    assert sessions == {"2025-04-01": 2, "2026-01-01": 1, "2026-03-01": 6}
    assert found.price is None
    assert found.total_cost is None
    assert all(m.cost is None for m in found.months)


@pytest.mark.usefixtures("trail")
def test_the_cost_with_a_price(eid: Callable[..., None]) -> None:
    eid(PRICE_PER_SESSION="0.35", PRICE_CURRENCY="EUR")
    found = figures(NOW)
    assert found.months[-1].cost == Decimal("2.10")
    assert found.months[0].cost == Decimal("0.70")
    assert found.total_cost == Decimal("3.15")
    assert found.currency == "EUR"


@pytest.mark.usefixtures("trail")
def test_days_follow_the_current_time_zone(settings: SettingsWrapper) -> None:
    settings.TIME_ZONE = "UTC"
    found = figures(NOW)
    days = by_day(found)
    # 7's finish (00:10 in Oslo) is 23:10 on the 14th in UTC.
    assert days["2026-03-14"] == {"SUCCESS": 1, "started": 1}
    assert "2026-03-15" not in days
    # 11's start (00:30 on 1 April in Oslo) is March in UTC, outside the 12 months.
    assert {m.month.isoformat(): m.sessions for m in found.months if m.sessions}["2025-04-01"] == 1


@pytest.mark.usefixtures("oslo")
def test_an_empty_trail() -> None:
    found = figures(NOW)
    assert found.empty
    assert found.completed == 0
    assert found.median_ms is None
    assert found.p95_ms is None
    assert found.by_provider == ()


# -- the page ---------------------------------------------------------------------------


@pytest.fixture
def url() -> str:
    return reverse(URL_NAME)


def get(client: Client, url: str) -> Any:
    with time_machine.travel(NOW, tick=False):
        return client.get(url)


@pytest.mark.usefixtures("trail")
def test_the_page_for_a_superuser(
    superuser_client: Client, url: str, django_assert_max_num_queries: Any
) -> None:
    # The session and the user (2), then the dashboard's own four.
    with django_assert_max_num_queries(6):
        response = get(superuser_client, url)
    assert response.status_code == 200
    assert response.templates[0].name == "admin/django_eid/dashboard.html"
    cache = response["Cache-Control"]
    assert "no-store" in cache
    assert "private" in cache
    html = response.content.decode()
    assert html.count('<svg class="eid-chart" role="img"') == 5
    for chart in ("eid-outcomes", "eid-providers", "eid-displays", "eid-errors", "eid-months"):
        assert f'aria-labelledby="{chart}-title"' in html
        assert f'<title id="{chart}-title">' in html
    assert "chosen at the broker" in html
    assert "Set PRICE_PER_SESSION" in html
    assert "No identifications yet" not in html


def table_cells(html: str, table_id: str) -> list[list[str]]:
    """The body rows of the table ``table_id``, each its cells' texts (the row's header first)."""
    table = html.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    body = table.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)
    return [[c.strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r, re.S)] for r in rows]


def chart_values(html: str, chart_id: str) -> list[tuple[str, str, str]]:
    """Each bar of the chart ``chart_id``: its label, series and number."""
    chart = html.split(f'<svg class="eid-chart" role="img" aria-labelledby="{chart_id}-title"', 1)[
        1
    ]
    chart = chart.split("</svg>", 1)[0]
    return re.findall(
        r'data-label="([^"]*)" (?:data-series="([^"]*)" )?data-value="([^"]*)"', chart
    )


@pytest.mark.usefixtures("trail")
def test_the_charts_show_the_numbers_of_their_tables(
    superuser_client: Client, url: str, eid: Callable[..., None]
) -> None:
    eid(PRICE_PER_SESSION=Decimal("0.35"), PRICE_CURRENCY="EUR")
    html = get(superuser_client, url).content.decode()

    months = table_cells(html, "eid-months-table")
    assert len(months) == MONTHS
    bars = chart_values(html, "eid-months")
    assert [int(value) for _, _, value in bars] == [int(r[1]) for r in months if r[1] != "0"]
    assert months[-1][1:] == ["6", "2.10 EUR"]
    assert "3.15 EUR" in html  # the total

    outcomes = table_cells(html, "eid-outcomes-table")
    assert len(outcomes) == DAYS
    table_total = sum(int(n) for row in outcomes for n in row[1:6])
    assert table_total == sum(int(value) for _, _, value in chart_values(html, "eid-outcomes"))
    assert outcomes[-1][1] == "1"  # the 15th: one success

    providers = table_cells(html, "eid-providers-table")
    assert providers == [
        ["bankid", "5", "2", "40.0 %"],
        ["chosen at the broker", "2", "0", "0.0 %"],
    ]
    assert [v for _, _, v in chart_values(html, "eid-providers")] == ["40", "0"]

    errors = table_cells(html, "eid-errors-table")
    assert sum(int(r[1]) for r in errors) == 2
    assert [v for _, _, v in chart_values(html, "eid-errors")] == ["1", "1"]

    duration = html.split('id="eid-duration-table"', 1)[1].split("</table>", 1)[0]
    assert ">120.0 s<" in duration
    assert ">2172.0 s<" in duration


def test_an_empty_trail_renders(oslo: None, superuser_client: Client, url: str) -> None:
    response = get(superuser_client, url)
    assert response.status_code == 200
    assert "No identifications yet" in response.content.decode()


def test_labels_are_escaped(oslo: None, superuser_client: Client, url: str) -> None:
    hostile = "<script>alert(1)</script>"
    AuditEvent.objects.bulk_create(
        [event(1, at("2026-03-10"), "started", provider=hostile, display='"><b>x')]
    )
    html = get(superuser_client, url).content.decode()
    assert hostile not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert '"><b>x' not in html


@pytest.fixture
def staff(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("staff", password="pw-staff", is_staff=True)


def test_staff_without_the_view_permission_is_refused(staff: Any, url: str) -> None:
    client = Client()
    client.force_login(staff)
    assert get(client, url).status_code == 403


def test_staff_with_the_view_permission_sees_it(oslo: None, staff: Any, url: str) -> None:
    staff.user_permissions.add(Permission.objects.get(codename="view_auditevent"))
    client = Client()
    client.force_login(staff)
    assert get(client, url).status_code == 200
    # The audit trail's list and django-eid's admin page link to it.
    changelist = client.get(reverse("admin:django_eid_auditevent_changelist")).content.decode()
    assert f'href="{url}"' in changelist
    app_index = client.get(reverse("admin:app_list", args=["django_eid"])).content.decode()
    assert f'href="{url}"' in app_index


def test_anonymous_and_non_staff_are_sent_to_log_in(
    django_user_model: Any, client: Client, url: str
) -> None:
    response = get(client, url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))
    user = django_user_model.objects.create_user("someone", password="pw-someone")
    user.user_permissions.add(Permission.objects.get(codename="view_auditevent"))
    client.force_login(user)
    assert get(client, url).status_code == 302


def test_only_get_and_head(superuser_client: Client, url: str, oslo: None) -> None:
    assert superuser_client.post(url).status_code == 405
    with time_machine.travel(NOW, tick=False):
        assert superuser_client.head(url).status_code == 200


def test_a_session_is_counted_once_the_broker_made_it(
    broker: Any, start: Callable[..., Any], alice_client: Client
) -> None:
    """Through the flow: a start the broker refused is no billed session; one it answered is,
    also when it then fails."""
    broker.will_fail_create(503)
    alice_client.post("/eid/start/")
    started = start()
    alice_client.get(started.abort_url())
    assert figures().months[-1].sessions == 1


def test_without_time_zones_the_days_are_the_sites(settings: SettingsWrapper) -> None:
    """``USE_TZ = False``: naive times, in the site's time, make the days and the months."""
    settings.USE_TZ = False
    now = datetime.datetime(2026, 3, 20, 12, 0)
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(at=now.replace(hour=0, minute=5), kind="started", status="PENDING"),
            AuditEvent(
                at=now.replace(hour=0, minute=6),
                kind="returned",
                status="SUCCESS",
                duration_ms=60_000,
            ),
        ]
    )
    found = figures(now)
    (day,) = [d for d in found.days if d.day == datetime.date(2026, 3, 20)]
    assert (day.started, day.outcomes["SUCCESS"]) == (1, 1)
    assert found.months[-1].sessions == 1
