"""``manage.py eid_reconcile``: pending identifications whose browser never came back."""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from django_eid.models import Identification
from tests.fixtures_broker import SAMPLE, ScriptedBroker
from tests.fixtures_views import (
    SignalRecorder,
    Started,
    _no_retry_wait,
    alice,
    broker,
    logged_in,
    signals_sent,
    start_session,
)

__all__ = ["_no_retry_wait", "alice", "broker", "signals_sent"]

pytestmark = pytest.mark.django_db

Status = Identification.Status
UA = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_0) Mobile/15E148"
SAME_DEVICE = {"EnvironmentInfo": {"IPAddress": "127.0.0.1", "UserAgent": UA}}
OTHER_DEVICE = {"EnvironmentInfo": {"IPAddress": "198.51.100.23", "UserAgent": UA}}


@pytest.fixture
def begin(broker: ScriptedBroker, alice: Any, eid: Callable[..., None]) -> Callable[..., Started]:
    """Start an identification in Alice's phone browser, ``minutes_ago`` minutes ago."""
    eid(MAX_PENDING_PER_USER=10)
    phone = logged_in(alice, HTTP_USER_AGENT=UA)

    def run(minutes_ago: int = 5) -> Started:
        started = start_session(broker, phone)
        created = timezone.now() - datetime.timedelta(minutes=minutes_ago)
        Identification.objects.filter(pk=started.pk).update(created_at=created)
        return started

    return run


def identified(broker: ScriptedBroker, started: Started, **record: Any) -> None:
    broker.broker.identify(started.request_id, SAMPLE)
    broker.will_return(started.request_id, **record)


def reconcile(*args: str) -> str:
    out = StringIO()
    call_command("eid_reconcile", *args, stdout=out)
    return out.getvalue()


def statuses(*started: Started) -> list[str]:
    return [s.refresh().status for s in started]


def test_each_kind_of_ending_is_settled(
    begin: Callable[..., Started], broker: ScriptedBroker, signals_sent: SignalRecorder
) -> None:
    same, other, aborted, failed, timed_out, waiting = (begin() for _ in range(6))
    identified(broker, same, **SAME_DEVICE)
    identified(broker, other, **OTHER_DEVICE)
    broker.broker.abort(aborted.request_id)
    broker.broker.fail(failed.request_id, "PKI_BLOCKED")
    identified(broker, timed_out, Status="TIMEOUT")
    out = reconcile()
    assert statuses(same, other, aborted, failed, timed_out, waiting) == [
        Status.SUCCESS,
        Status.PENDING,  # identified on another device: left for its callback
        Status.ABORTED,
        Status.ERROR,
        Status.EXPIRED,
        Status.PENDING,  # still at the broker
    ]
    assert re.fullmatch(
        r"eid_reconcile: 6 row\(s\) checked: 1 aborted, 1 expired, 1 failed, 1 other_device, "
        r"1 pending, 1 succeeded; [0-9.]+ ms per row\.\n",
        out,
    ), out
    succeeded = [s for s in signals_sent.sent if s.name == "identification_succeeded"]
    assert [s.kwargs["identification"].pk for s in succeeded] == [same.pk]
    assert succeeded[0].kwargs["request"] is None
    assert same.refresh().name == SAMPLE.name
    assert other.refresh().name == ""


def test_it_is_idempotent(
    begin: Callable[..., Started], broker: ScriptedBroker, signals_sent: SignalRecorder
) -> None:
    started = begin()
    identified(broker, started, **SAME_DEVICE)
    reconcile()
    sent = len(signals_sent.sent)
    assert reconcile() == "eid_reconcile: 0 row(s) checked: none.\n"
    assert len(signals_sent.sent) == sent
    assert started.refresh().status == Status.SUCCESS


def test_young_rows_are_left_to_their_callback(
    begin: Callable[..., Started], broker: ScriptedBroker
) -> None:
    young = begin(minutes_ago=0)
    identified(broker, young, **SAME_DEVICE)
    assert reconcile("--older-than", "60").startswith("eid_reconcile: 0 row(s)")
    assert young.refresh().status == Status.PENDING
    assert reconcile("--older-than", "0").startswith("eid_reconcile: 1 row(s)")
    assert young.refresh().status == Status.SUCCESS


def test_a_session_still_at_the_broker_expires_after_session_max_age(
    begin: Callable[..., Started], broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(SESSION_MAX_AGE=120)
    old, recent = begin(minutes_ago=3), begin(minutes_ago=1)
    out = reconcile("--older-than", "30")
    assert statuses(old, recent) == [Status.EXPIRED, Status.PENDING]
    assert "1 expired, 1 pending" in out


def test_dry_run_asks_nothing_and_changes_nothing(
    begin: Callable[..., Started], broker: ScriptedBroker
) -> None:
    started = begin()
    identified(broker, started, **SAME_DEVICE)
    assert reconcile("--dry-run") == "eid_reconcile: 1 pending row(s) due.\n"
    assert broker.status_requests == []
    assert started.refresh().status == Status.PENDING


def test_batches_and_limit(begin: Callable[..., Started], broker: ScriptedBroker) -> None:
    rows = [begin() for _ in range(5)]
    for started in rows:
        broker.broker.abort(started.request_id)
    assert reconcile("--batch-size", "2", "--limit", "3").startswith(
        "eid_reconcile: 3 row(s) checked: 3 aborted"
    )
    assert statuses(*rows).count(Status.ABORTED) == 3
    assert reconcile("--batch-size", "2").startswith("eid_reconcile: 2 row(s) checked: 2 aborted")
    assert statuses(*rows) == [Status.ABORTED] * 5


def test_a_row_another_run_holds_is_skipped(
    begin: Callable[..., Started], broker: ScriptedBroker
) -> None:
    held, free = begin(), begin()
    broker.broker.abort(held.request_id)
    broker.broker.abort(free.request_id)
    until = timezone.now() + datetime.timedelta(minutes=1)
    Identification.objects.filter(pk=held.pk).update(claimed_until=until)
    reconcile()
    assert statuses(held, free) == [Status.PENDING, Status.ABORTED]
    # A lease that ran out (a crashed run) frees the row.
    past = timezone.now() - datetime.timedelta(seconds=1)
    Identification.objects.filter(pk=held.pk).update(claimed_until=past)
    reconcile()
    assert held.refresh().status == Status.ABORTED


def test_a_broker_failure_stops_with_an_error_and_frees_the_rows(
    begin: Callable[..., Started], broker: ScriptedBroker
) -> None:
    first, second = begin(), begin()
    broker.fail_next("status", 500, times=None)
    with pytest.raises(CommandError, match=r"stopped: GET .*/identification/session/status"):
        reconcile()
    assert statuses(first, second) == [Status.PENDING, Status.PENDING]
    assert list(Identification.objects.values_list("claimed_until", flat=True)) == [None, None]


def test_an_unconfigured_site_stops_with_an_error(
    begin: Callable[..., Started], eid: Callable[..., None]
) -> None:
    begin()
    eid(CLIENT_SECRET="")
    with pytest.raises(CommandError, match="stopped"):
        reconcile()


def test_never_only_expires(
    begin: Callable[..., Started], broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    eid(COMPLETE_WITHOUT_CALLBACK="never", SESSION_MAX_AGE=240)
    identified_row, old = begin(minutes_ago=2), begin(minutes_ago=5)
    identified(broker, identified_row, **SAME_DEVICE)
    reconcile()
    assert statuses(identified_row, old) == [Status.PENDING, Status.EXPIRED]
    assert broker.status_requests == []


@pytest.mark.parametrize("options", [["--older-than", "-1"], ["--batch-size", "0"]])
def test_bad_options_are_refused(options: list[str]) -> None:
    with pytest.raises(CommandError):
        reconcile(*options)


def test_the_callback_after_a_reconcile_replays_the_destination(
    begin: Callable[..., Started], broker: ScriptedBroker, alice: Any
) -> None:
    started = begin()
    identified(broker, started, **SAME_DEVICE)
    reconcile()
    client = Client()
    client.force_login(alice)
    response = client.get(started.success_url())  # the late callback, in any browser
    assert response.status_code == 302
