"""Finishing an identification without its browser's callback: the app switch, the frame's
status polling, and the same-device rule that keeps a relayed identity off the account."""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.template.loader import render_to_string
from django.test import Client
from django.utils import timezone, translation
from django.utils.html import escapejs

from django_eid import crypto, flow
from django_eid.models import Identification
from tests.fixtures_broker import NO_SESSION_TO_ASK, REST_APIS, SAMPLE
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
    session_id = broker.session_id(started.request_id)
    assert broker.broker.session(session_id) is not None
    broker.broker.identify(session_id, SAMPLE)
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
@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_settle_stores_a_success_from_the_device_that_started(
    begin: Callable[..., Started], broker: Broker, signal_log: SignalLog
) -> None:
    started = begin()
    identified_at_the_broker(broker, started, **SAME_DEVICE)
    settled = flow.settle(started.row)
    assert settled.outcome == "succeeded"
    row = started.refresh()
    assert (row.status, row.first_name, row.user_agent) == (Status.SUCCESS, SAMPLE.first_name, UA)
    assert signal_log.names == ["identification_started", "identification_succeeded"]
    assert signal_log.of("identification_succeeded")[0]["request"] is None


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
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


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
@pytest.mark.parametrize("ua", ["", "Mozilla/5.0 (Linux; Android 15)"])
def test_the_user_agent_is_part_of_the_device(
    begin: Callable[..., Started], broker: Broker, ua: str
) -> None:
    started = begin()
    env = {"EnvironmentInfo": {"IPAddress": "127.0.0.1", "UserAgent": ua}}
    identified_at_the_broker(broker, started, **env)
    assert flow.settle(started.row).outcome == "other_device"


@pytest.mark.apis("v1", reason="v1's statuses (the successors': tests/brokers)")
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


@pytest.mark.apis("v1", reason="v1's status call (the successors have none)")
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


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_never_finishes_nothing_without_the_callback(
    begin: Callable[..., Started], broker: Broker, eid: Callable[..., None]
) -> None:
    eid(COMPLETE_WITHOUT_CALLBACK="never")
    started = begin()
    identified_at_the_broker(broker, started, **SAME_DEVICE)
    assert flow.settle(started.row).outcome == "pending"
    assert broker.status_requests == []
    assert started.refresh().status == Status.PENDING


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_settle_leaves_a_finished_row_alone(
    begin: Callable[..., Started], broker: Broker, phone: Client, signal_log: SignalLog
) -> None:
    started = begin()
    identified_at_the_broker(broker, started, **SAME_DEVICE)
    phone.get(started.abort_url())
    assert flow.settle(started.refresh()).outcome == "finished"
    assert broker.status_requests == []
    assert signal_log.names == ["identification_started", "identification_aborted"]


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_the_site_rules_apply_without_the_callback(
    begin: Callable[..., Started], broker: Broker, eid: Callable[..., None]
) -> None:
    eid(MIN_AGE=50)  # the sample person is younger
    started = begin()
    identified_at_the_broker(broker, started, **SAME_DEVICE)
    assert flow.settle(started.row).outcome == "rejected"
    assert started.refresh().error_code == "MIN_AGE"


# -- the return lands in another browser ----------------------------------------------------------
@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
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
    assert "Go back to where you started" in page
    assert SAMPLE.last_name not in page
    assert started.refresh().status == Status.SUCCESS
    assert signal_log.of("identification_succeeded")[0]["request"] is None
    # Back in the window where it started: the start page shows where it went, once.
    back = phone.get("/eid/start/")
    assert back.status_code == 302
    assert back["Location"] == "/"
    assert phone.get("/eid/start/").status_code == 200
    assert started.reference not in phone.session.get("django_eid_pending", {})


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_a_relayed_return_in_another_browser_stores_nothing(
    begin: Callable[..., Started], broker: Broker, signal_log: SignalLog
) -> None:
    started = begin()
    identified_at_the_broker(broker, started, **OTHER_DEVICE)
    victim = Client()
    victim.get(started.success_url())
    response = victim.get(f"{started.success_url()}&eid_retry=1")
    assert "Go back to where you started" in response.content.decode()
    assert started.refresh().status == Status.PENDING
    assert signal_log.names == ["identification_started"]


@pytest.mark.apis("v1", reason="v1's status call (the successors have none)")
def test_reloading_a_return_in_another_browser_asks_the_broker_at_most_every_few_seconds(
    begin: Callable[..., Started], broker: Broker
) -> None:
    started = begin()
    anyone = Client()
    for _ in range(10):
        anyone.get(f"{started.success_url()}&eid_retry=1")
    assert broker.status_requests == [started.request_id]
    assert started.refresh().status == Status.PENDING


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
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


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
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


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_an_abort_in_another_browser_of_the_same_user(
    begin: Callable[..., Started], broker: Broker, alice: AbstractBaseUser
) -> None:
    started = begin()
    broker.broker.abort(started.request_id)
    response = logged_in(alice).get(started.abort_url())
    assert "Go back to where you started" in response.content.decode()
    assert started.refresh().status == Status.ABORTED


def test_a_return_with_forged_ids_in_another_browser_is_refused(
    begin: Callable[..., Started], broker: Broker, alice: AbstractBaseUser
) -> None:
    started = begin()
    identified_at_the_broker(broker, started, **SAME_DEVICE)
    response = logged_in(alice).get(started.success_url(p2="0" * 32))
    # OIDC: the one callback URL, whose state names no identification: a link to nothing.
    assert response.status_code == (404 if started.is_oidc else 403)
    assert broker.status_requests == []
    assert started.refresh().status == Status.PENDING


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
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


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
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


@pytest.mark.apis("v1", reason="v1's status call (the successors have none)")
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


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_a_relayed_identification_never_shows_as_finished(
    start: Callable[..., Started], broker: Broker, phone: Client
) -> None:
    started = start(client=phone, display="iframe")
    identified_at_the_broker(broker, started, **OTHER_DEVICE)
    assert status(phone, started).json() == {"finished": False, "destination": None}
    assert started.refresh().status == Status.PENDING


def test_the_frame_page_polls_the_status(
    start: Callable[..., Started], phone: Client, eid: Callable[..., None], broker_api: str
) -> None:
    started = start(client=phone, display="iframe")
    page = phone.get(f"/eid/frame/{started.reference}/").content.decode()
    # Escaped for JavaScript: a reference may hold "-" (\u002D).
    status_url = escapejs(f"/eid/status/{started.reference}/")
    assert f'var statusUrl = "{status_url}"' in page
    assert "<script src=" not in page
    eid(IFRAME_WEB_MESSAGING=True, IFRAME_WEB_MESSAGING_SCRIPT="https://id.broker.test/wm.js")
    page = phone.get(f"/eid/frame/{started.reference}/").content.decode()
    # Only v1's frame sends messages (W021 for the others).
    assert ('<script src="https://id.broker.test/wm.js"></script>' in page) is (broker_api == "v1")


@pytest.mark.apis("v1", reason="v1's iFrame WebMessaging")
def test_web_messaging_is_asked_for_when_on(
    start: Callable[..., Started], phone: Client, eid: Callable[..., None]
) -> None:
    eid(IFRAME_WEB_MESSAGING=True, IFRAME_WEB_MESSAGING_SCRIPT="https://id.broker.test/wm.js")
    assert start(client=phone, display="iframe").sent["iFrame"]["WebMessaging"] is True


# -- the device: missing values never match, spellings of one address do ---------------------------
VICTIM_UA = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1) Mobile/15E148 Victim"


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
@pytest.mark.parametrize(
    ("start_address", "start_ua", "environment"),
    [
        ("", None, ...),  # no address, no user agent; the record has no EnvironmentInfo
        ("", VICTIM_UA, {"UserAgent": VICTIM_UA}),  # the user agent copied, no address
        ("unix:/run/gunicorn.sock", VICTIM_UA, {"IPAddress": "n/a", "UserAgent": VICTIM_UA}),
        ("", VICTIM_UA, {"IPAddress": "", "UserAgent": VICTIM_UA}),
    ],
    ids=["nothing on either side", "no address", "no valid address", "empty addresses"],
)
def test_missing_device_values_never_match_each_other(
    broker: Broker,
    bob: AbstractBaseUser,
    signal_log: SignalLog,
    start: Callable[..., Started],
    start_address: str,
    start_ua: str | None,
    environment: Any,
) -> None:
    """The relay through missing values: Bob starts from a browser without a valid address
    (or behind a unix socket) with the victim's user agent copied; the victim identifies and
    the record says nothing usable of the device. Nothing of the victim reaches Bob."""
    headers = {"REMOTE_ADDR": start_address}
    if start_ua is not None:
        headers["HTTP_USER_AGENT"] = start_ua
    started = start(client=logged_in(bob, **headers))
    assert started.row.device_key == ""  # never recognised: only its callback finishes it
    identified_at_the_broker(broker, started, EnvironmentInfo=environment)
    assert flow.settle(started.row).outcome == "other_device"
    row = started.refresh()
    assert (row.status, row.name) == (Status.PENDING, "")
    assert signal_log.names == ["identification_started"]


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_a_start_without_a_user_agent_is_never_recognised(
    start: Callable[..., Started], broker: Broker, alice: AbstractBaseUser
) -> None:
    started = start(client=logged_in(alice))  # 127.0.0.1, no User-Agent
    assert started.row.device_key == ""
    identified_at_the_broker(
        broker, started, EnvironmentInfo={"IPAddress": "127.0.0.1", "UserAgent": ""}
    )
    assert flow.settle(started.row).outcome == "other_device"


def test_same_device_needs_a_device_on_both_sides() -> None:
    key = crypto.device_key("192.0.2.7", UA)
    assert crypto.same_device(key, "192.0.2.7", UA)
    for address, agent in [(None, UA), ("", UA), ("n/a", UA), ("192.0.2.7", ""), (None, None)]:
        assert not crypto.same_device(key, address, agent)
    # A row stored before this version from a start without an address: its key was made of
    # empty values, which now match nothing.
    legacy = crypto._digest(crypto._device_keys(crypto.configured_keys())[0], json.dumps(["", UA]))
    assert not crypto.same_device(legacy, None, UA)
    assert not crypto.same_device(legacy, "", UA)
    assert crypto.device_key(None, UA) == crypto.device_key("192.0.2.7", None) == ""


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
@pytest.mark.parametrize(
    ("start_address", "record_address"),
    [
        ("2001:db8::1", "2001:DB8::1"),
        ("2001:db8::1", "2001:db8:0:0:0:0:0:1"),
        ("2001:DB8:0000::0001", "2001:db8::1"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("192.0.2.7", "::ffff:192.0.2.7"),
        ("::FFFF:c000:0207", "192.0.2.7"),
    ],
)
def test_spellings_of_one_address_are_one_device(
    broker: Broker,
    alice: AbstractBaseUser,
    start: Callable[..., Started],
    start_address: str,
    record_address: str,
) -> None:
    browser = logged_in(alice, REMOTE_ADDR=start_address, HTTP_USER_AGENT=UA)
    started = start(client=browser)
    env = {"EnvironmentInfo": {"IPAddress": record_address, "UserAgent": UA}}
    identified_at_the_broker(broker, started, **env)
    assert flow.settle(started.row).outcome == "succeeded"
    assert started.refresh().status == Status.SUCCESS


def test_the_normalised_address_keeps_the_keys_of_canonical_spellings() -> None:
    """Rows in flight across the upgrade: a key made of a canonical address is unchanged."""
    assert crypto.normalized_ip("2001:DB8:0::1") == "2001:db8::1"
    assert crypto.normalized_ip("::ffff:192.0.2.7") == "192.0.2.7"
    assert crypto.normalized_ip("192.0.2.007") is None
    assert crypto.normalized_ip(" 192.0.2.7") is None
    key = crypto._device_keys(crypto.configured_keys())[0]
    for address in ("192.0.2.7", "2001:db8::1"):
        before = crypto._digest(key, json.dumps([address, UA]))
        assert crypto.device_key(address, UA) == before


# -- late: the broker's record decides, not the clock ----------------------------------------------
def make_stale(started: Started, eid: Callable[..., None]) -> None:
    eid(SESSION_MAX_AGE=60)
    Identification.objects.filter(pk=started.pk).update(
        created_at=started.row.created_at - datetime.timedelta(seconds=90)
    )


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_the_status_poll_of_a_stale_same_device_success_stores_it(
    start: Callable[..., Started], broker: Broker, phone: Client, eid: Callable[..., None]
) -> None:
    """The reviewer's case: identified on the device that started, looked at after
    SESSION_MAX_AGE by the browser that started. The paid identification is kept."""
    started = start(client=phone, display="iframe")
    identified_at_the_broker(broker, started, **SAME_DEVICE)
    make_stale(started, eid)
    answer = status(phone, started).json()
    assert answer == {"finished": True, "destination": "/"}
    assert started.refresh().status == Status.SUCCESS


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_the_frame_page_of_a_stale_same_device_success_stores_it(
    start: Callable[..., Started], broker: Broker, phone: Client, eid: Callable[..., None]
) -> None:
    started = start(client=phone, display="iframe", next="/account/")
    identified_at_the_broker(broker, started, **SAME_DEVICE)
    make_stale(started, eid)
    response = phone.get(f"/eid/frame/{started.reference}/")
    assert (response.status_code, response["Location"]) == (302, "/account/")
    assert started.refresh().status == Status.SUCCESS
    assert started.reference not in phone.session.get("django_eid_pending", {})


@pytest.mark.apis("v1", reason="v1's status call (the successors have none)")
@pytest.mark.parametrize("looked_at_by", ["the frame page", "the status poll"])
def test_a_stale_row_abandoned_at_the_broker_still_expires(
    start: Callable[..., Started],
    broker: Broker,
    phone: Client,
    eid: Callable[..., None],
    looked_at_by: str,
) -> None:
    started = start(client=phone, display="iframe")  # the person never identified
    make_stale(started, eid)
    if looked_at_by == "the frame page":
        assert phone.get(f"/eid/frame/{started.reference}/").status_code == 410
    else:
        assert status(phone, started).json()["finished"] is True
    assert started.refresh().status == Status.EXPIRED
    assert broker.status_requests == [started.request_id]  # asked before expiring


@pytest.mark.apis("v1", reason="v1's status call (the successors have none)")
def test_the_frame_page_of_a_stale_row_the_broker_cannot_answer_keeps_it(
    start: Callable[..., Started], broker: Broker, phone: Client, eid: Callable[..., None]
) -> None:
    started = start(client=phone, display="iframe")
    identified_at_the_broker(broker, started, **SAME_DEVICE)
    make_stale(started, eid)
    broker.fail_next("status", 503, times=None)
    assert phone.get(f"/eid/frame/{started.reference}/").status_code == 503
    assert started.refresh().status == Status.PENDING  # for a later look, or eid_reconcile


@pytest.mark.apis("v1", reason="v1 records")
@pytest.mark.parametrize("status_value", ["", None, ...], ids=["empty", "null", "absent"])
def test_settle_leaves_a_record_without_a_status_pending(
    begin: Callable[..., Started],
    broker: Broker,
    eid: Callable[..., None],
    caplog: pytest.LogCaptureFixture,
    status_value: Any,
) -> None:
    started = begin()
    identified_at_the_broker(broker, started, Status=status_value, **SAME_DEVICE)
    with caplog.at_level(logging.WARNING, logger="django_eid"):
        assert flow.settle(started.row).outcome == "pending"
    assert started.refresh().status == Status.PENDING
    assert any("has no status" in r.getMessage() for r in caplog.records)
    # Once stale, it expires like any session that cannot be finished.
    make_stale(started, eid)
    broker.will_return(started.request_id, Status=status_value, **SAME_DEVICE)
    assert flow.settle(started.refresh()).outcome == "expired"


# -- the start page shows only what the user is waiting for ------------------------------------------
def finish_elsewhere(broker: Broker, started: Started) -> None:
    identified_at_the_broker(broker, started, **SAME_DEVICE)
    assert flow.settle(started.row).outcome == "succeeded"


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_the_start_page_shows_a_recent_success_once(
    begin: Callable[..., Started], broker: Broker, phone: Client
) -> None:
    started = begin(next="/account/")
    finish_elsewhere(broker, started)
    shown = phone.get("/eid/start/")
    assert (shown.status_code, shown["Location"]) == (302, "/account/")
    assert phone.get("/eid/start/").status_code == 200


@pytest.mark.parametrize(
    "how",
    [
        pytest.param(
            "finished long ago", marks=pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
        ),
        "expired",
    ],
)
def test_the_start_page_does_not_replace_its_form_with_an_old_or_expired_row(
    begin: Callable[..., Started], broker: Broker, phone: Client, how: str
) -> None:
    started = begin()
    if how == "expired":
        flow.expire(started.row)
    else:
        finish_elsewhere(broker, started)
        Identification.objects.filter(pk=started.pk).update(
            completed_at=timezone.now() - datetime.timedelta(seconds=1801)
        )
    response = phone.get("/eid/start/")
    assert response.status_code == 200
    assert "form" in response.context


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_the_start_page_with_a_next_shows_only_a_row_started_for_it(
    begin: Callable[..., Started], broker: Broker, phone: Client
) -> None:
    wine = begin(next="/wine/")
    finish_elsewhere(broker, wine)
    # A gate sends the user to verify for the payout page: the wine shop's success is not it.
    response = phone.get("/eid/start/?next=/payout/")
    assert response.status_code == 200
    assert "form" in response.context
    # A destination that is not safe is none: only a row started without one would match.
    assert "form" in phone.get("/eid/start/?next=https://evil.example/").context
    payout = begin(next="/payout/")
    finish_elsewhere(broker, payout)
    shown = phone.get("/eid/start/?next=/payout/")
    assert (shown.status_code, shown["Location"]) == (302, "/payout/")
    assert flow.finished_elsewhere(wine.row.user, [wine.reference], next_url="/payout/") is None


# -- the page of a return in another browser says what happened, and nothing of whom ----------------
ENDED = "The identification has ended. Go back to the browser or app where you started"
NOT_HERE = "Your identification is not complete here. Return to the browser where you started"


@pytest.mark.parametrize(
    ("outcome", "says"),
    [
        ("succeeded", ENDED),
        ("rejected", ENDED),
        ("aborted", ENDED),
        ("failed", ENDED),
        ("expired", ENDED),
        ("finished", ENDED),
        ("pending", NOT_HERE),
        ("other_device", NOT_HERE),
        (None, "Go back to the browser or app where you started to see where"),
    ],
)
def test_the_other_browsers_page_says_what_settling_did(outcome: str | None, says: str) -> None:
    context = {"kind": "success"} if outcome is None else {"kind": "success", "outcome": outcome}
    page = render_to_string("django_eid/elsewhere.html", context)
    assert says in page
    assert "Go back to where you started" in page
    others = {ENDED, NOT_HERE} - {says}
    assert not any(other in page for other in others)
    assert "complete." not in page  # never "your identification is complete"


def test_the_other_browsers_page_is_translated() -> None:
    with translation.override("nb"):
        page = render_to_string("django_eid/elsewhere.html", {"outcome": "other_device"})
    assert NOT_HERE not in page
    assert "<h1>Go back to where you started</h1>" not in page


def test_the_frame_page_stops_asking_on_a_refusal_and_after_session_max_age(
    start: Callable[..., Started], phone: Client, eid: Callable[..., None]
) -> None:
    eid(SESSION_MAX_AGE=600)
    started = start(client=phone, display="iframe")
    page = phone.get(f"/eid/frame/{started.reference}/").content.decode()
    assert "var stopAt = Date.now() + 615000;" in page  # SESSION_MAX_AGE, and a little more
    assert "if (response.status >= 400 && response.status < 500) { stop(true);" in page
    assert 'id="eid-stopped" role="status" hidden' in page
