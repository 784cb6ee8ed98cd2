"""Finishing an identification without its browser's callback: the app switch, the frame's
status polling, and the same-device rule that keeps a relayed identity off the account."""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.test import Client
from django.utils.html import escapejs

from django_eid import flow
from django_eid.models import Identification
from tests.fixtures_broker import SAMPLE
from tests.fixtures_views import logged_in
from tests.flow.conftest import Broker, SignalLog, Started

pytestmark = pytest.mark.django_db

Status = Identification.Status
#: The browser that starts: the test client's address, and this user agent.
UA = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_0) Mobile/15E148"
SAME_DEVICE = {"EnvironmentInfo": {"IPAddress": "127.0.0.1", "UserAgent": UA}}
OTHER_DEVICE = {"EnvironmentInfo": {"IPAddress": "198.51.100.23", "UserAgent": UA}}


@pytest.fixture
def phone(alice: AbstractBaseUser) -> Client:
    """Alice's phone browser, which starts the identification."""
    return logged_in(alice, HTTP_USER_AGENT=UA)


@pytest.fixture
def begin(start: Callable[..., Started], phone: Client) -> Callable[..., Started]:
    def run(**post: str) -> Started:
        return start(client=phone, **post)

    return run


def identified_at_the_broker(broker: Broker, started: Started, **record: Any) -> None:
    """The person identified; the broker's status call says done, its record says ``record``."""
    assert broker.broker.session(started.request_id) is not None
    broker.broker.identify(started.request_id, SAMPLE)
    broker.will_return(started.request_id, **record)


# -- the start keeps the device, not the values ----------------------------------------------------
def test_the_start_keeps_a_keyed_hash_of_the_device_not_the_values(
    begin: Callable[..., Started],
) -> None:
    row = begin().row
    assert len(row.device_key) == 64
    assert UA not in row.device_key
    assert (row.user_agent, row.ip_address) == ("", None)


# -- flow.settle -------------------------------------------------------------------------------------
def test_settle_stores_a_success_from_the_device_that_started(
    begin: Callable[..., Started], broker: Broker, signal_log: SignalLog
) -> None:
    started = begin()
    identified_at_the_broker(broker, started, **SAME_DEVICE)
    settled = flow.settle(started.row)
    assert settled.outcome == "succeeded"
    row = started.refresh()
    assert (row.status, row.name, row.user_agent) == (Status.SUCCESS, SAMPLE.name, UA)
    assert signal_log.names == ["identification_started", "identification_succeeded"]
    assert signal_log.of("identification_succeeded")[0]["request"] is None


def test_settle_refuses_a_success_from_another_device(
    begin: Callable[..., Started],
    broker: Broker,
    signal_log: SignalLog,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The relay: somebody else identified at the URL of this user's session."""
    started = begin()
    identified_at_the_broker(broker, started, **OTHER_DEVICE)
    with caplog.at_level(logging.WARNING, logger="django_eid"):
        settled = flow.settle(started.row)
    assert settled.outcome == "other_device"
    row = started.refresh()
    assert (row.status, row.name) == (Status.PENDING, "")
    assert signal_log.names == ["identification_started"]
    warning = [r.getMessage() for r in caplog.records if "another device" in r.getMessage()]
    assert len(warning) == 1
    assert "198.51.100.23" not in warning[0]
    assert SAMPLE.last_name not in warning[0]


@pytest.mark.parametrize("ua", ["", "Mozilla/5.0 (Linux; Android 15)"])
def test_the_user_agent_is_part_of_the_device(
    begin: Callable[..., Started], broker: Broker, ua: str
) -> None:
    started = begin()
    env = {"EnvironmentInfo": {"IPAddress": "127.0.0.1", "UserAgent": ua}}
    identified_at_the_broker(broker, started, **env)
    assert flow.settle(started.row).outcome == "other_device"


@pytest.mark.parametrize(
    ("record", "outcome", "status", "signal"),
    [
        ("USERABORTED", "aborted", Status.ABORTED, "identification_aborted"),
        ("ERROR", "failed", Status.ERROR, "identification_failed"),
        ("INVALIDATED", "failed", Status.ERROR, "identification_failed"),
        ("UNKNOWN", "failed", Status.ERROR, "identification_failed"),
        ("TIMEOUT", "expired", Status.EXPIRED, None),
    ],
)
def test_settle_finishes_an_unsuccessful_session_as_it_ended_from_any_device(
    begin: Callable[..., Started],
    broker: Broker,
    signal_log: SignalLog,
    record: str,
    outcome: str,
    status: str,
    signal: str | None,
) -> None:
    started = begin()
    identified_at_the_broker(broker, started, Status=record, **OTHER_DEVICE)
    assert flow.settle(started.row).outcome == outcome
    row = started.refresh()
    assert row.status == status
    assert row.name == ""  # nothing of an identity
    assert signal_log.names == ["identification_started", *([signal] if signal else [])]


def test_settle_asks_only_the_status_while_the_user_is_at_the_broker(
    begin: Callable[..., Started], broker: Broker
) -> None:
    started = begin()
    assert flow.settle(started.row).outcome == "pending"
    assert broker.status_requests == [started.request_id]
    assert broker.retrieve_requests == []  # no personal data fetched
    assert started.refresh().status == Status.PENDING


def test_settle_expires_a_session_still_at_the_broker_after_session_max_age(
    begin: Callable[..., Started], broker: Broker, eid: Callable[..., None]
) -> None:
    started = begin()
    eid(SESSION_MAX_AGE=1)
    Identification.objects.filter(pk=started.pk).update(
        created_at=started.row.created_at - datetime.timedelta(seconds=5)
    )
    assert flow.settle(started.refresh()).outcome == "expired"
    assert started.refresh().status == Status.EXPIRED


def test_never_finishes_nothing_without_the_callback(
    begin: Callable[..., Started], broker: Broker, eid: Callable[..., None]
) -> None:
    eid(COMPLETE_WITHOUT_CALLBACK="never")
    started = begin()
    identified_at_the_broker(broker, started, **SAME_DEVICE)
    assert flow.settle(started.row).outcome == "pending"
    assert broker.status_requests == []
    assert started.refresh().status == Status.PENDING


def test_settle_leaves_a_finished_row_alone(
    begin: Callable[..., Started], broker: Broker, phone: Client, signal_log: SignalLog
) -> None:
    started = begin()
    identified_at_the_broker(broker, started, **SAME_DEVICE)
    phone.get(started.abort_url())
    assert flow.settle(started.refresh()).outcome == "finished"
    assert broker.status_requests == []
    assert signal_log.names == ["identification_started", "identification_aborted"]


def test_the_site_rules_apply_without_the_callback(
    begin: Callable[..., Started], broker: Broker, eid: Callable[..., None]
) -> None:
    eid(MIN_AGE=50)  # the sample person is younger
    started = begin()
    identified_at_the_broker(broker, started, **SAME_DEVICE)
    assert flow.settle(started.row).outcome == "rejected"
    assert started.refresh().error_code == "MIN_AGE"


# -- the return lands in another browser ----------------------------------------------------------
def test_a_return_in_a_browser_without_a_session_says_go_back_and_settles(
    begin: Callable[..., Started], broker: Broker, phone: Client, signal_log: SignalLog
) -> None:
    started = begin()
    identified_at_the_broker(broker, started, **SAME_DEVICE)
    other = Client(HTTP_USER_AGENT="Mozilla/5.0 (iPhone) Safari")  # the phone's other browser
    interstitial = other.get(started.success_url())
    response = other.get(interstitial.context["retry_url"])
    page = response.content.decode()
    assert response.status_code == 200
    assert "Your identification is complete. Go back to the window where you started." in page
    assert SAMPLE.last_name not in page
    assert started.refresh().status == Status.SUCCESS
    assert signal_log.of("identification_succeeded")[0]["request"] is None
    # Back in the window where it started: the start page shows where it went, once.
    back = phone.get("/eid/start/")
    assert back.status_code == 302
    assert back["Location"] == "/"
    assert phone.get("/eid/start/").status_code == 200
    assert started.reference not in phone.session.get("django_eid_pending", {})


def test_a_relayed_return_in_another_browser_stores_nothing(
    begin: Callable[..., Started], broker: Broker, signal_log: SignalLog
) -> None:
    started = begin()
    identified_at_the_broker(broker, started, **OTHER_DEVICE)
    victim = Client()
    victim.get(started.success_url())
    response = victim.get(f"{started.success_url()}&eid_retry=1")
    assert "Go back to the window where you started." in response.content.decode()
    assert started.refresh().status == Status.PENDING
    assert signal_log.names == ["identification_started"]


def test_reloading_a_return_in_another_browser_asks_the_broker_at_most_every_few_seconds(
    begin: Callable[..., Started], broker: Broker
) -> None:
    started = begin()
    anyone = Client()
    for _ in range(10):
        anyone.get(f"{started.success_url()}&eid_retry=1")
    assert broker.status_requests == [started.request_id]
    assert started.refresh().status == Status.PENDING


def test_a_relayed_identity_is_fetched_from_the_broker_once(
    begin: Callable[..., Started], broker: Broker
) -> None:
    started = begin()
    identified_at_the_broker(broker, started, **OTHER_DEVICE)
    assert flow.settle(started.row).outcome == "other_device"
    # Later checks (the frame's polling, eid_reconcile) do not fetch the person's record again.
    assert flow.settle(started.row).outcome == "other_device"
    assert broker.retrieve_requests == [started.request_id]
    assert started.refresh().status == Status.PENDING


def test_without_a_working_cache_nobody_but_eid_reconcile_asks_the_broker(
    start: Callable[..., Started],
    broker: Broker,
    phone: Client,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    started = start(client=phone, display="iframe")
    identified_at_the_broker(broker, started, **SAME_DEVICE)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("cache down")

    monkeypatch.setattr(cache, "add", broken)
    for _ in range(3):
        assert status(phone, started).json()["finished"] is False
        Client().get(f"{started.success_url()}&eid_retry=1")
    assert broker.status_requests == []
    assert "left to eid_reconcile" in caplog.text
    assert flow.settle(started.row).outcome == "succeeded"


def test_an_abort_in_another_browser_of_the_same_user(
    begin: Callable[..., Started], broker: Broker, alice: AbstractBaseUser
) -> None:
    started = begin()
    broker.broker.abort(started.request_id)
    response = logged_in(alice).get(started.abort_url())
    assert "The identification has ended. Go back to the window where you started." in (
        response.content.decode()
    )
    assert started.refresh().status == Status.ABORTED


def test_a_return_with_forged_ids_in_another_browser_is_refused(
    begin: Callable[..., Started], broker: Broker, alice: AbstractBaseUser
) -> None:
    started = begin()
    identified_at_the_broker(broker, started, **SAME_DEVICE)
    response = logged_in(alice).get(started.success_url(p2="0" * 32))
    assert response.status_code == 403
    assert broker.status_requests == []
    assert started.refresh().status == Status.PENDING


def test_the_frame_page_notices_an_identification_finished_elsewhere(
    start: Callable[..., Started], broker: Broker, phone: Client
) -> None:
    started = start(client=phone, display="iframe")
    identified_at_the_broker(broker, started, **SAME_DEVICE)
    assert flow.settle(started.row).outcome == "succeeded"
    response = phone.get(f"/eid/frame/{started.reference}/")
    assert (response.status_code, response["Location"]) == (302, "/")


# -- django_eid:status ------------------------------------------------------------------------------
def status(client: Client, started: Started) -> Any:
    return client.get(f"/eid/status/{started.reference}/", headers={"accept": "application/json"})


def test_the_status_of_a_pending_identification(
    start: Callable[..., Started], broker: Broker, phone: Client
) -> None:
    started = start(client=phone, display="iframe")
    answer = status(phone, started)
    assert answer.status_code == 200
    assert answer["Cache-Control"].startswith("max-age=0")
    assert answer.json() == {"finished": False, "destination": None}


def test_the_status_settles_and_says_where_to_go(
    start: Callable[..., Started], broker: Broker, phone: Client, signal_log: SignalLog
) -> None:
    started = start(client=phone, display="iframe", next="/account/")
    identified_at_the_broker(broker, started, **SAME_DEVICE)
    answer = status(phone, started)
    assert answer.json() == {"finished": True, "destination": "/account/"}
    body = answer.content.decode()
    for personal in (SAMPLE.name, SAMPLE.last_name, SAMPLE.national_identity_number):
        assert personal not in body
    assert started.refresh().status == Status.SUCCESS
    assert started.reference not in phone.session.get("django_eid_pending", {})
    # The callback arriving later replays the destination; nothing is sent twice.
    phone.get(started.success_url())
    assert signal_log.names.count("identification_succeeded") == 1


def test_the_status_asks_the_broker_at_most_every_few_seconds(
    start: Callable[..., Started], broker: Broker, phone: Client
) -> None:
    started = start(client=phone, display="iframe")
    for _ in range(10):
        assert status(phone, started).json()["finished"] is False
    assert broker.status_requests == [started.request_id]
    cache.clear()  # the interval is over
    status(phone, started)
    assert len(broker.status_requests) == 2


def test_the_status_is_the_owners_in_the_browser_that_started(
    start: Callable[..., Started], broker: Broker, phone: Client, bob_client: Client, alice: Any
) -> None:
    started = start(client=phone, display="iframe")
    assert status(Client(), started).status_code == 401
    assert status(bob_client, started).status_code == 404
    assert status(logged_in(alice), started).status_code == 403
    assert broker.status_requests == []


def test_a_relayed_identification_never_shows_as_finished(
    start: Callable[..., Started], broker: Broker, phone: Client
) -> None:
    started = start(client=phone, display="iframe")
    identified_at_the_broker(broker, started, **OTHER_DEVICE)
    assert status(phone, started).json() == {"finished": False, "destination": None}
    assert started.refresh().status == Status.PENDING


def test_the_frame_page_polls_the_status(
    start: Callable[..., Started], phone: Client, eid: Callable[..., None]
) -> None:
    started = start(client=phone, display="iframe")
    page = phone.get(f"/eid/frame/{started.reference}/").content.decode()
    # As the template writes it: escapejs spells a "-" of the reference \u002D.
    status_url = escapejs(f"/eid/status/{started.reference}/")
    assert f'var statusUrl = "{status_url}"' in page
    assert "<script src=" not in page
    eid(IFRAME_WEB_MESSAGING=True, IFRAME_WEB_MESSAGING_SCRIPT="https://id.broker.test/wm.js")
    page = phone.get(f"/eid/frame/{started.reference}/").content.decode()
    assert '<script src="https://id.broker.test/wm.js"></script>' in page


def test_web_messaging_is_asked_for_when_on(
    start: Callable[..., Started], phone: Client, eid: Callable[..., None]
) -> None:
    eid(IFRAME_WEB_MESSAGING=True, IFRAME_WEB_MESSAGING_SCRIPT="https://id.broker.test/wm.js")
    assert start(client=phone, display="iframe").sent["iFrame"]["WebMessaging"] is True
