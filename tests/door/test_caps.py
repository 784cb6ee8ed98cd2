"""The anonymous caps (``django_eid/flows/caps.py``): starts at the door per browser session
(``LOGIN_MAX_PENDING_PER_SESSION``) and per client address (``LOGIN_RATE``), one statement
per start. Parallel starts on PostgreSQL: ``tests/production/test_door_races.py``."""

from __future__ import annotations

import datetime
import io
from collections.abc import Callable
from typing import Any

import pytest
import time_machine
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_eid.flows import caps
from django_eid.models import Identification, StartCounter
from tests.door.conftest import LOGIN
from tests.fixtures_broker import ScriptedBroker

pytestmark = pytest.mark.django_db


def start_at_door(client: Client) -> Any:
    return client.post(LOGIN, {"purpose": "login"})


def test_a_browser_session_starts_at_most_its_share(
    broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(LOGIN_MAX_PENDING_PER_SESSION=2, LOGIN_RATE=None)
    browser = Client()
    assert [start_at_door(browser).status_code for _ in range(2)] == [302, 302]
    refused = start_at_door(browser)
    assert refused.status_code == 429
    assert "Too many identifications were started" in refused.content.decode()
    assert refused.context["start_url"] == LOGIN  # "Try again": here, not the start page
    signing_up = browser.post(LOGIN, {"purpose": "signup"})
    assert signing_up.context["start_url"] == f"{LOGIN}?purpose=signup"
    assert len(broker.create_requests) == 2
    assert Identification.objects.count() == 2
    # Another browser (a new session) is not this one's count.
    assert start_at_door(Client()).status_code == 302


def test_a_client_address_starts_at_most_login_rate(
    broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    """An attacker drops the cookie; the address stays. An IPv6 client is its /64."""
    eid(LOGIN_MAX_PENDING_PER_SESSION=None, LOGIN_RATE="3/h")
    same_net = ("2001:db8:1:2::1", "2001:db8:1:2:ffff::9", "2001:db8:1:2::77")
    assert [start_at_door(Client(REMOTE_ADDR=ip)).status_code for ip in same_net] == [302] * 3
    assert start_at_door(Client(REMOTE_ADDR="2001:db8:1:2::1234")).status_code == 429
    assert start_at_door(Client(REMOTE_ADDR="2001:db8:1:3::1")).status_code == 302
    assert [start_at_door(Client(REMOTE_ADDR="192.0.2.1")).status_code for _ in range(4)] == [
        302,
        302,
        302,
        429,
    ]
    assert start_at_door(Client(REMOTE_ADDR="192.0.2.2")).status_code == 302
    assert len(broker.create_requests) == 8


def test_the_next_window_starts_again(broker: ScriptedBroker, eid: Callable[..., None]) -> None:
    eid(LOGIN_MAX_PENDING_PER_SESSION=None, LOGIN_RATE="1/h")
    with time_machine.travel(datetime.datetime(2026, 11, 27, 10, 5, tzinfo=datetime.UTC)) as clock:
        assert start_at_door(Client()).status_code == 302
        assert start_at_door(Client()).status_code == 429
        clock.shift(datetime.timedelta(minutes=55))
        assert start_at_door(Client()).status_code == 302


def test_the_caps_leave_verifications_alone(
    broker: ScriptedBroker, eid: Callable[..., None], alice_client: Client
) -> None:
    eid(LOGIN_MAX_PENDING_PER_SESSION=1, LOGIN_RATE="1/h")
    assert [alice_client.post("/eid/start/").status_code for _ in range(3)] == [302] * 3
    assert not StartCounter.objects.exists()


def test_a_start_costs_one_statement_and_keeps_no_address_or_browser_key(
    broker: ScriptedBroker,
) -> None:
    with CaptureQueriesContext(connection) as queries:
        caps.spend("a-session-key", "198.51.100.23")
    assert len(queries) == 1
    assert queries[0]["sql"].startswith("INSERT")
    stored = repr(list(StartCounter.objects.values()))
    assert "a-session-key" not in stored
    assert "198.51.100.23" not in stored
    assert sorted(c.count for c in StartCounter.objects.all()) == [1, 1]


def test_eid_purge_removes_the_counters_of_ended_windows(eid: Callable[..., None]) -> None:
    eid(LOGIN_RATE="5/m")
    long_ago = timezone.now() - datetime.timedelta(days=2)
    with time_machine.travel(long_ago):
        caps.spend("old-session", "192.0.2.9")
    caps.spend("new-session", "192.0.2.10")
    out = io.StringIO()
    call_command("eid_purge", "--older-than", "90d", stdout=out)
    assert "Removed 2 ended start counter(s)." in out.getvalue()
    assert StartCounter.objects.count() == 2


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("60/h", (60, 3600)),
        ("10/15m", (10, 900)),
        ("1/d", (1, 86400)),
        ("5/s", (5, 1)),
        ("0/h", None),
        ("5/0m", None),
        ("5/w", None),
        ("five/h", None),
        ("5/h/2", None),
        ("\u0665/h", None),  # an Arabic-Indic five
        (5, None),
    ],
)
def test_login_rate_is_starts_per_period(value: object, parsed: tuple[int, int] | None) -> None:
    from django_eid.conf import parse_rate

    assert parse_rate(value) == parsed


@pytest.mark.parametrize(
    ("given", "counted"),
    [
        ("192.0.2.1", "192.0.2.1"),
        ("::ffff:192.0.2.1", "192.0.2.1"),
        ("2001:db8::1", "2001:db8::/64"),
        ("not an address", "unknown"),
        ("192.0.2.1:5432", "unknown"),
        ("", "unknown"),
        (None, "unknown"),
    ],
)
def test_what_an_address_is_counted_as(given: str | None, counted: str) -> None:
    assert caps.address_of(given) == counted


def test_a_database_without_the_upsert_counts_alike(
    broker: ScriptedBroker, eid: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """MySQL, Oracle: the ORM's locked read and update, the same decisions."""
    monkeypatch.setattr(caps, "_returns_from_upsert", lambda db: False)
    eid(LOGIN_MAX_PENDING_PER_SESSION=2, LOGIN_RATE="4/h")
    browser = Client()
    assert [start_at_door(browser).status_code for _ in range(3)] == [302, 302, 429]
    # The refused start counted at the address too.
    assert [start_at_door(Client()).status_code for _ in range(2)] == [302, 429]
    assert sorted(c.count for c in StartCounter.objects.all()) == [1, 1, 3, 5]


def test_starts_without_a_usable_address_share_one_counter(
    broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    """A server that leaves REMOTE_ADDR empty must not turn the address cap off."""
    eid(LOGIN_MAX_PENDING_PER_SESSION=None, LOGIN_RATE="2/h")
    statuses = [start_at_door(Client(REMOTE_ADDR=ip)).status_code for ip in ("", "x", "")]
    assert statuses == [302, 302, 429]


def test_the_caps_without_time_zones(
    broker: ScriptedBroker, eid: Callable[..., None], settings: Any
) -> None:
    settings.USE_TZ = False
    eid(LOGIN_MAX_PENDING_PER_SESSION=1, LOGIN_RATE=None)
    browser = Client()
    assert [start_at_door(browser).status_code for _ in range(2)] == [302, 429]
