"""``manage.py eid_reconcile``: pending identifications whose browser never came back.

How each ending is read from the broker, and the broker's failures at its first call, are
each REST API's (``broker_api``: with OpenID Connect there is no session to ask); the
command's batches, leases, options and output, once, against v1.
"""

from __future__ import annotations

import datetime
import logging
import re
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.utils import timezone

from django_eid.conf import eid_settings
from django_eid.crypto import DecryptionError
from django_eid.flows import finish
from django_eid.management.commands import eid_reconcile
from django_eid.models import Identification
from django_eid.sandbox.faults import Endpoint
from django_eid.signals import identification_aborted
from tests.fixtures_broker import (
    NO_SESSION_TO_ASK,
    REST_APIS,
    SAMPLE,
    SSN,
    Scripted,
    ScriptedBroker,
    reply,
)
from tests.fixtures_views import Signals, Started, logged_in, start_session

pytestmark = pytest.mark.django_db


def first_call() -> Endpoint:
    """The broker call reconciling a row asks first: v1's status call; the successors,
    which have none, the record."""
    return "status" if eid_settings.BROKER_API == "v1" else "retrieve"


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


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_each_kind_of_ending_is_settled(
    broker_api: str, begin: Callable[..., Started], broker: ScriptedBroker, signals: Signals
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
    succeeded = signals.of("identification_succeeded")
    assert [s["identification"].pk for s in succeeded] == [same.pk]
    assert succeeded[0]["request"] is None
    assert same.refresh().first_name == SAMPLE.first_name
    assert other.refresh().first_name == ""


def test_it_is_idempotent(
    begin: Callable[..., Started], broker: ScriptedBroker, signals: Signals
) -> None:
    started = begin()
    identified(broker, started, **SAME_DEVICE)
    reconcile()
    sent = len(signals.sent)
    assert reconcile() == "eid_reconcile: 0 row(s) checked: none.\n"
    assert len(signals.sent) == sent
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


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_a_broker_failure_stops_with_an_error_and_frees_the_rows(
    broker_api: str, begin: Callable[..., Started], broker: ScriptedBroker
) -> None:
    first, second = begin(), begin()
    broker.fail_next(first_call(), 500, times=None)
    # The successors' session id is in the path: messages name it {id}.
    stopped = r"stopped: GET .*/(identification/session/status|sessions/\{id\}) answered 500"
    with pytest.raises(CommandError, match=stopped):
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


# -- one row's failure is that row's alone (B1) ---------------------------------------------
def resting(started: Started) -> datetime.timedelta:
    """How much longer ``started``'s row is left alone (its ``claimed_until`` from now)."""
    row = started.refresh()
    assert row.claimed_until is not None
    assert row.claim_token == ""  # given back: no run holds it
    return row.claimed_until - timezone.now()


def about(delay: datetime.timedelta) -> Callable[[datetime.timedelta], bool]:
    return lambda left: delay - datetime.timedelta(seconds=30) < left <= delay


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_a_session_the_broker_no_longer_knows_expires_and_blocks_nothing(
    broker_api: str, begin: Callable[..., Started], broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    # The oldest row is one the broker purged (or a sandbox restart, a BASE_URL switch):
    # it answers 404 for it. It comes first in every run.
    eid(SESSION_MAX_AGE=600)
    purged, unknown, good = begin(minutes_ago=30), begin(minutes_ago=29), begin(minutes_ago=5)
    young = begin(minutes_ago=4)
    for started in (purged, young):
        broker.script(
            first_call(), reply(404, {"message": "not found"}), request_id=started.request_id
        )
    # Known to the status call, gone by the time the record is fetched.
    broker.broker.identify(unknown.request_id, SAMPLE)
    broker.script("retrieve", reply(404, {"message": "gone"}), request_id=unknown.request_id)
    broker.broker.abort(good.request_id)
    out = reconcile()  # no CommandError: one row's failure does not stop the run
    assert statuses(purged, unknown, good, young) == [
        Status.EXPIRED,  # past SESSION_MAX_AGE: nothing will ever come for it
        Status.EXPIRED,
        Status.ABORTED,
        Status.PENDING,  # younger: left for later
    ]
    assert re.match(r"eid_reconcile: 4 row\(s\) checked: 1 aborted, 2 expired, 1 not_found;", out)
    assert about(eid_reconcile.BACKOFF)(resting(young))
    asked = len(broker.status_requests)
    assert reconcile() == "eid_reconcile: 0 row(s) checked: none.\n"
    assert len(broker.status_requests) == asked  # the next runs leave it alone
    # Once it is past SESSION_MAX_AGE and due again, it expires too.
    Identification.objects.filter(pk=young.pk).update(
        created_at=timezone.now() - datetime.timedelta(minutes=11), claimed_until=None
    )
    assert reconcile().startswith("eid_reconcile: 1 row(s) checked: 1 expired")
    assert young.refresh().status == Status.EXPIRED


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(reply(403, {"message": "forbidden"}), id="refused"),
        pytest.param(reply(200, raw="<html>maintenance</html>"), id="nonsense"),
        pytest.param(reply(400, {"message": "bad request"}), id="bad-request"),
    ],
)
def test_a_row_the_broker_refuses_is_logged_counted_left_alone_and_the_run_goes_on(
    broker_api: str,
    begin: Callable[..., Started],
    broker: ScriptedBroker,
    caplog: pytest.LogCaptureFixture,
    answer: Scripted,
) -> None:
    failing, after = begin(minutes_ago=10), begin()
    broker.script(first_call(), answer, request_id=failing.request_id)
    broker.broker.abort(after.request_id)
    with caplog.at_level(logging.WARNING, logger="django_eid"):
        out = reconcile()
    assert re.fullmatch(
        r"eid_reconcile: 2 row\(s\) checked: 1 aborted, 1 error; [0-9.]+ ms per row\.\n", out
    ), out
    assert statuses(failing, after) == [Status.PENDING, Status.ABORTED]
    assert about(eid_reconcile.BACKOFF)(resting(failing))
    assert after.refresh().claimed_until is None
    logged = [
        r.getMessage() for r in caplog.records if f"identification {failing.pk} " in r.getMessage()
    ]
    assert len(logged) == 1, logged
    assert "tried again in" in logged[0]
    asked = len(broker.status_requests)
    assert reconcile().startswith("eid_reconcile: 0 row(s) checked")
    assert len(broker.status_requests) == asked  # not retried by the very next runs


def test_an_error_in_the_sites_code_is_logged_without_its_message_and_the_run_goes_on(
    begin: Callable[..., Started],
    broker: ScriptedBroker,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failing, after = begin(minutes_ago=10), begin()
    identified(broker, failing, **SAME_DEVICE)
    identified(broker, after, **SAME_DEVICE)
    complete = finish.complete

    def breaks_for_one(row: Identification, record: Any, **kwargs: Any) -> bool:
        if row.pk == failing.pk:
            # An error whose message holds personal data (a key removed too early...).
            raise DecryptionError(f"cannot decrypt the number {SSN} of {SAMPLE.name}")
        return complete(row, record, **kwargs)

    monkeypatch.setattr(finish, "complete", breaks_for_one)
    with caplog.at_level(logging.WARNING, logger="django_eid"):
        out = reconcile()
    assert out.startswith("eid_reconcile: 2 row(s) checked: 1 error, 1 succeeded;"), out
    assert statuses(failing, after) == [Status.PENDING, Status.SUCCESS]
    assert about(eid_reconcile.BACKOFF)(resting(failing))
    text = "\n".join(r.getMessage() for r in caplog.records) + caplog.text
    assert f"identification {failing.pk} failed with DecryptionError" in text
    assert "breaks_for_one" in text  # where it was raised: the traceback, without the message
    assert SSN not in text
    assert SAMPLE.name not in text


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_an_unreachable_broker_stops_the_run_and_frees_the_rows_not_asked_about(
    broker_api: str, begin: Callable[..., Started], broker: ScriptedBroker
) -> None:
    first, second, third = begin(minutes_ago=10), begin(minutes_ago=9), begin()
    broker.broker.abort(first.request_id)
    broker.script(first_call(), reply(503, {"message": "down"}), request_id=second.request_id)
    out = StringIO()
    with pytest.raises(CommandError, match=r"stopped: GET .* answered 503"):
        call_command("eid_reconcile", stdout=out)
    assert out.getvalue().startswith("eid_reconcile: 1 row(s) checked: 1 aborted;")
    assert statuses(first, second, third) == [Status.ABORTED, Status.PENDING, Status.PENDING]
    held = Identification.objects.values_list("claimed_until", "claim_token")
    assert list(held) == [(None, "")] * 3  # free for the next run


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
@pytest.mark.parametrize("refusal", ["token", "api-401"])
def test_refused_credentials_stop_the_run(
    broker_api: str, begin: Callable[..., Started], broker: ScriptedBroker, refusal: str
) -> None:
    first, second = begin(minutes_ago=10), begin()
    if refusal == "token":
        broker.revoke_tokens()  # the cached token is refused, and no new one is issued
        broker.will_fail_token(401)
    else:
        broker.script(first_call(), reply(401, {"message": "no"}))
    with pytest.raises(CommandError, match="stopped"):
        reconcile()
    assert statuses(first, second) == [Status.PENDING, Status.PENDING]


# -- leases (B2, B3) --------------------------------------------------------------------------
def test_a_row_still_at_the_broker_is_asked_again_only_after_the_recheck_interval(
    begin: Callable[..., Started], broker: ScriptedBroker
) -> None:
    waiting, other = begin(), begin()
    identified(broker, other, **OTHER_DEVICE)
    assert "1 other_device, 1 pending" in reconcile()
    for started in (waiting, other):
        assert about(eid_reconcile.RECHECK)(resting(started))
    asked = list(broker.status_requests)
    assert reconcile() == "eid_reconcile: 0 row(s) checked: none.\n"
    assert broker.status_requests == asked
    # Its rest over, the next run asks again.
    Identification.objects.update(claimed_until=timezone.now() - datetime.timedelta(seconds=1))
    broker.broker.abort(waiting.request_id)
    broker.will_return(other.request_id, **OTHER_DEVICE)
    assert "1 aborted, 1 other_device" in reconcile()


def test_a_row_whose_lease_the_run_lost_is_skipped_and_keeps_the_other_runs_lease(
    begin: Callable[..., Started], broker: ScriptedBroker, signals: Signals
) -> None:
    first, taken, last = begin(minutes_ago=10), begin(minutes_ago=9), begin()
    for started in (first, taken, last):
        broker.broker.abort(started.request_id)
    other_lease = timezone.now() + datetime.timedelta(minutes=3)

    def meanwhile(sender: Any, identification: Identification, **kwargs: Any) -> None:
        # While this run handles its first row, its lease on the second runs out and
        # another run claims it.
        if identification.pk == first.pk:
            Identification.objects.filter(pk=taken.pk).update(
                claim_token="another-run", claimed_until=other_lease
            )

    identification_aborted.connect(meanwhile, dispatch_uid="meanwhile")
    try:
        out = reconcile()
    finally:
        identification_aborted.disconnect(dispatch_uid="meanwhile")
    assert out.startswith("eid_reconcile: 2 row(s) checked: 2 aborted; 1 skipped;"), out
    assert statuses(first, taken, last) == [Status.ABORTED, Status.PENDING, Status.ABORTED]
    row = taken.refresh()
    assert (row.claim_token, row.claimed_until) == ("another-run", other_lease)
    assert taken.request_id not in broker.status_requests


def test_a_run_that_read_stale_candidates_takes_no_row_another_run_holds(
    begin: Callable[..., Started], broker: ScriptedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without SKIP LOCKED (SQLite, MySQL < 8, MariaDB < 10.6) two runs may read the same
    # candidates: the one that reads them just before the other's claim must take none.
    held, free = begin(minutes_ago=10), begin()
    for started in (held, free):
        broker.broker.abort(started.request_id)
    until = timezone.now() + datetime.timedelta(minutes=4)
    Identification.objects.filter(pk=held.pk).update(claim_token="run-a", claimed_until=until)
    due = eid_reconcile.due
    monkeypatch.setattr(
        eid_reconcile,
        "due",
        lambda now, older_than: due(now, older_than) | Identification.objects.filter(pk=held.pk),
    )
    assert reconcile().startswith("eid_reconcile: 1 row(s) checked: 1 aborted;")
    row = held.refresh()
    assert (row.status, row.claim_token, row.claimed_until) == (Status.PENDING, "run-a", until)
    assert held.request_id not in broker.status_requests


def test_leases_follow_the_databases_clock_not_the_hosts(
    begin: Callable[..., Started], broker: ScriptedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A host whose clock is an hour slow still sees the rows as due, and writes leases that
    # end when they should by the database's clock (which every host shares).
    waiting = begin()
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() - datetime.timedelta(hours=1))
    assert "1 pending" in reconcile()
    monkeypatch.setattr(timezone, "now", real_now)
    assert about(eid_reconcile.RECHECK)(resting(waiting))


def test_leases_work_without_time_zone_support(
    begin: Callable[..., Started], broker: ScriptedBroker, settings: Any
) -> None:
    # Naive local times are stored: the database's clock must be read in the same way.
    settings.USE_TZ = False
    waiting = begin()
    assert "1 pending" in reconcile()
    assert about(eid_reconcile.RECHECK)(resting(waiting))


# -- the claim's index (H1) ------------------------------------------------------------------
def test_the_claim_has_a_partial_index_of_pending_rows() -> None:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "django_eid_identification")
    index = constraints["django_eid_pending_due"]
    assert index["index"]
    assert index["columns"] == ["created_at", "claimed_until"]
    definition = {
        "sqlite": "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = %s",
        "postgresql": "SELECT indexdef FROM pg_indexes WHERE indexname = %s",
    }[connection.vendor]
    with connection.cursor() as cursor:
        cursor.execute(definition, ["django_eid_pending_due"])
        (sql,) = cursor.fetchone()
    assert re.search(r"WHERE .*status.* = 'PENDING'", sql), sql
