"""The frame page's status poll (``django_eid:status``): it settles a session finished
without the frame's return, for the browser that started only, and says where to go; the
frame page of a session finished elsewhere or stale; how often the broker is asked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils.html import escapejs

from django_eid import flow
from django_eid.models import Identification
from tests.fixtures_broker import SAMPLE, ScriptedBroker
from tests.fixtures_views import Signals, Started, logged_in
from tests.flow.returns import (
    OTHER_DEVICE,
    SAME_DEVICE,
    identified_at_the_broker,
    make_stale,
    pending_refs,
)

pytestmark = pytest.mark.django_db

Status = Identification.Status


def status(client: Client, started: Started) -> Any:
    return client.get(f"/eid/status/{started.reference}/", headers={"accept": "application/json"})


def test_the_status_of_a_pending_identification(
    start: Callable[..., Started], broker: ScriptedBroker, phone: Client, broker_api: str
) -> None:
    """Whatever each API asks of a session still at the broker (v1 its status call, the
    successors the record, OpenID Connect nothing), the answer is "not finished"."""
    started = start(client=phone, display="iframe")
    answer = status(phone, started)
    assert answer.status_code == 200
    assert answer["Cache-Control"].startswith("max-age=0")
    assert answer.json() == {"finished": False, "destination": None}


def test_the_status_settles_and_says_where_to_go(
    start: Callable[..., Started], broker: ScriptedBroker, phone: Client, signals: Signals
) -> None:
    started = start(client=phone, display="iframe", next="/account/")
    identified_at_the_broker(broker, started, SAME_DEVICE)
    answer = status(phone, started)
    assert answer.json() == {"finished": True, "destination": "/account/"}
    body = answer.content.decode()
    for personal in (SAMPLE.name, SAMPLE.last_name, SAMPLE.national_identity_number):
        assert personal not in body
    assert started.refresh().status == Status.SUCCESS
    assert started.reference not in pending_refs(phone)
    # The callback arriving later replays the destination; nothing is sent twice.
    phone.get(started.success_url())
    assert signals.names.count("identification_succeeded") == 1


def test_the_status_asks_the_broker_at_most_every_few_seconds(
    start: Callable[..., Started], broker: ScriptedBroker, phone: Client
) -> None:
    """v1's status call (the successors have none)."""
    started = start(client=phone, display="iframe")
    for _ in range(10):
        assert status(phone, started).json()["finished"] is False
    assert broker.status_requests == [started.request_id]
    cache.clear()  # the interval is over
    status(phone, started)
    assert len(broker.status_requests) == 2


def test_the_status_is_the_owners_in_the_browser_that_started(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    phone: Client,
    bob_client: Client,
    alice: Any,
) -> None:
    started = start(client=phone, display="iframe")
    assert status(Client(), started).status_code == 401
    assert status(bob_client, started).status_code == 404
    assert status(logged_in(alice), started).status_code == 403
    assert broker.status_requests == []


def test_a_relayed_identification_never_shows_as_finished(
    start: Callable[..., Started], broker: ScriptedBroker, phone: Client
) -> None:
    started = start(client=phone, display="iframe")
    identified_at_the_broker(broker, started, OTHER_DEVICE)
    assert status(phone, started).json() == {"finished": False, "destination": None}
    assert started.refresh().status == Status.PENDING


def test_without_a_working_cache_nobody_but_eid_reconcile_asks_the_broker(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    phone: Client,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    started = start(client=phone, display="iframe")
    identified_at_the_broker(broker, started, SAME_DEVICE)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("cache down")

    monkeypatch.setattr(cache, "add", broken)
    for _ in range(3):
        assert status(phone, started).json()["finished"] is False
        Client().get(f"{started.success_url()}&eid_retry=1")
    assert broker.status_requests == []
    assert "left to eid_reconcile" in caplog.text
    assert flow.settle(started.row).outcome == "succeeded"


def test_the_frame_page_notices_an_identification_finished_elsewhere(
    start: Callable[..., Started], broker: ScriptedBroker, phone: Client
) -> None:
    started = start(client=phone, display="iframe")
    identified_at_the_broker(broker, started, SAME_DEVICE)
    assert flow.settle(started.row).outcome == "succeeded"
    response = phone.get(f"/eid/frame/{started.reference}/")
    assert (response.status_code, response["Location"]) == (302, "/")


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


def test_web_messaging_is_asked_for_when_on(
    start: Callable[..., Started], phone: Client, eid: Callable[..., None]
) -> None:
    eid(IFRAME_WEB_MESSAGING=True, IFRAME_WEB_MESSAGING_SCRIPT="https://id.broker.test/wm.js")
    assert start(client=phone, display="iframe").sent["iFrame"]["WebMessaging"] is True


def test_the_frame_page_stops_asking_on_a_refusal_and_after_session_max_age(
    start: Callable[..., Started], phone: Client, eid: Callable[..., None]
) -> None:
    eid(SESSION_MAX_AGE=600)
    started = start(client=phone, display="iframe")
    page = phone.get(f"/eid/frame/{started.reference}/").content.decode()
    assert "var stopAt = Date.now() + 615000;" in page  # SESSION_MAX_AGE, and a little more
    assert "if (response.status >= 400 && response.status < 500) { stop(true);" in page
    assert 'id="eid-stopped" role="status" hidden' in page


# -- late: the broker's record decides, not the clock ----------------------------------------------
def test_the_status_poll_of_a_stale_same_device_success_stores_it(
    start: Callable[..., Started], broker: ScriptedBroker, phone: Client, eid: Callable[..., None]
) -> None:
    """The reviewer's case: identified on the device that started, looked at after
    SESSION_MAX_AGE by the browser that started. The paid identification is kept."""
    started = start(client=phone, display="iframe")
    identified_at_the_broker(broker, started, SAME_DEVICE)
    make_stale(started, eid)
    answer = status(phone, started).json()
    assert answer == {"finished": True, "destination": "/"}
    assert started.refresh().status == Status.SUCCESS


def test_the_frame_page_of_a_stale_same_device_success_stores_it(
    start: Callable[..., Started], broker: ScriptedBroker, phone: Client, eid: Callable[..., None]
) -> None:
    started = start(client=phone, display="iframe", next="/account/")
    identified_at_the_broker(broker, started, SAME_DEVICE)
    make_stale(started, eid)
    response = phone.get(f"/eid/frame/{started.reference}/")
    assert (response.status_code, response["Location"]) == (302, "/account/")
    assert started.refresh().status == Status.SUCCESS
    assert started.reference not in pending_refs(phone)


@pytest.mark.parametrize("looked_at_by", ["the frame page", "the status poll"])
def test_a_stale_row_abandoned_at_the_broker_still_expires(
    start: Callable[..., Started],
    broker: ScriptedBroker,
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


def test_the_frame_page_of_a_stale_row_the_broker_cannot_answer_keeps_it(
    start: Callable[..., Started], broker: ScriptedBroker, phone: Client, eid: Callable[..., None]
) -> None:
    started = start(client=phone, display="iframe")
    identified_at_the_broker(broker, started, SAME_DEVICE)
    make_stale(started, eid)
    broker.fail_next("status", 503, times=None)
    assert phone.get(f"/eid/frame/{started.reference}/").status_code == 503
    assert started.refresh().status == Status.PENDING  # for a later look, or eid_reconcile
