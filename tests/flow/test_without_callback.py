"""Finishing an identification without its browser's return: ``flow.settle``, and a genuine
return in a browser without the one-time state (the app switch), which gets a "go back" page
and settles the row from the broker, completing an identity only when the broker saw it on
the device that started (test_same_device.py); the start page then shows where it went."""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.template.loader import render_to_string
from django.test import Client
from django.utils import timezone, translation

from django_eid import flow
from django_eid.models import Identification
from tests.fixtures_broker import NO_SESSION_TO_ASK, REST_APIS, SAMPLE, ScriptedBroker, record
from tests.fixtures_views import Signals, Started, changed, logged_in, snapshot
from tests.flow.faults import BROKER_FAULTS
from tests.flow.returns import (
    ELSEWHERE,
    GO_BACK,
    OTHER_DEVICE,
    SAME_DEVICE,
    USER_AGENT,
    Ended,
    assert_go_back_page,
    come_back_elsewhere,
    identified_at_the_broker,
    make_stale,
    pending_refs,
    url_of,
)

pytestmark = pytest.mark.django_db

Status = Identification.Status


# -- flow.settle ---------------------------------------------------------------------------
@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_settle_stores_a_success_from_the_device_that_started(
    start: Callable[..., Started],
    phone: Client,
    broker: ScriptedBroker,
    signals: Signals,
    broker_api: str,
) -> None:
    started = start(client=phone)
    identified_at_the_broker(broker, started, SAME_DEVICE)
    settled = flow.settle(started.row)
    assert settled.outcome == "succeeded"
    row = started.refresh()
    assert (row.status, row.first_name, row.user_agent) == (
        Status.SUCCESS,
        SAMPLE.first_name,
        USER_AGENT,
    )
    assert signals.names == ["identification_started", "identification_succeeded"]
    assert signals.of("identification_succeeded")[0]["request"] is None


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_settle_refuses_a_success_from_another_device(
    start: Callable[..., Started],
    phone: Client,
    broker: ScriptedBroker,
    signals: Signals,
    caplog: pytest.LogCaptureFixture,
    broker_api: str,
) -> None:
    """The relay: somebody else identified at the URL of this user's session."""
    started = start(client=phone)
    identified_at_the_broker(broker, started, OTHER_DEVICE)
    with caplog.at_level(logging.WARNING, logger="django_eid"):
        settled = flow.settle(started.row)
    assert settled.outcome == "other_device"
    row = started.refresh()
    assert (row.status, row.name) == (Status.PENDING, "")
    assert signals.names == ["identification_started"]
    warning = [r.getMessage() for r in caplog.records if "another device" in r.getMessage()]
    assert len(warning) == 1
    assert "198.51.100.23" not in warning[0]
    assert SAMPLE.last_name not in warning[0]


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
    start: Callable[..., Started],
    phone: Client,
    broker: ScriptedBroker,
    signals: Signals,
    record: str,
    outcome: str,
    status: str,
    signal: str | None,
) -> None:
    started = start(client=phone)
    identified_at_the_broker(broker, started, OTHER_DEVICE, Status=record)
    assert flow.settle(started.row).outcome == outcome
    row = started.refresh()
    assert row.status == status
    assert row.name == ""  # nothing of an identity
    assert signals.names == ["identification_started", *([signal] if signal else [])]


def test_settle_asks_only_the_status_while_the_user_is_at_the_broker(
    start: Callable[..., Started],
    phone: Client,
    broker: ScriptedBroker,
) -> None:
    started = start(client=phone)
    assert flow.settle(started.row).outcome == "pending"
    assert broker.status_requests == [started.request_id]
    assert broker.retrieve_requests == []  # no personal data fetched
    assert started.refresh().status == Status.PENDING


def test_settle_expires_a_session_still_at_the_broker_after_session_max_age(
    start: Callable[..., Started],
    phone: Client,
    broker: ScriptedBroker,
    eid: Callable[..., None],
    broker_api: str,
) -> None:
    started = start(client=phone)
    make_stale(started, eid)
    assert flow.settle(started.refresh()).outcome == "expired"
    assert started.refresh().status == Status.EXPIRED


def test_never_finishes_nothing_without_the_callback(
    start: Callable[..., Started],
    phone: Client,
    broker: ScriptedBroker,
    eid: Callable[..., None],
) -> None:
    eid(COMPLETE_WITHOUT_CALLBACK="never")
    started = start(client=phone)
    identified_at_the_broker(broker, started, SAME_DEVICE)
    assert flow.settle(started.row).outcome == "pending"
    assert broker.status_requests == []
    assert started.refresh().status == Status.PENDING


def test_settle_leaves_a_finished_row_alone(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    phone: Client,
    signals: Signals,
) -> None:
    started = start(client=phone)
    identified_at_the_broker(broker, started, SAME_DEVICE)
    phone.get(started.abort_url())
    assert flow.settle(started.refresh()).outcome == "finished"
    assert broker.status_requests == []
    assert signals.names == ["identification_started", "identification_aborted"]


def test_the_site_rules_apply_without_the_callback(
    start: Callable[..., Started],
    phone: Client,
    broker: ScriptedBroker,
    eid: Callable[..., None],
) -> None:
    eid(MIN_AGE=50)  # the sample person is younger
    started = start(client=phone)
    identified_at_the_broker(broker, started, SAME_DEVICE)
    assert flow.settle(started.row).outcome == "rejected"
    assert started.refresh().error_code == "MIN_AGE"


@pytest.mark.parametrize("status_value", ["", None, ...], ids=["empty", "null", "absent"])
def test_settle_leaves_a_record_without_a_status_pending(
    start: Callable[..., Started],
    phone: Client,
    broker: ScriptedBroker,
    eid: Callable[..., None],
    caplog: pytest.LogCaptureFixture,
    status_value: Any,
) -> None:
    started = start(client=phone)
    identified_at_the_broker(broker, started, SAME_DEVICE, Status=status_value)
    with caplog.at_level(logging.WARNING, logger="django_eid"):
        assert flow.settle(started.row).outcome == "pending"
    assert started.refresh().status == Status.PENDING
    assert any("has no status" in r.getMessage() for r in caplog.records)
    # Once stale, it expires like any session that cannot be finished.
    make_stale(started, eid)
    broker.will_return(started.request_id, Status=status_value, EnvironmentInfo=SAME_DEVICE)
    assert flow.settle(started.refresh()).outcome == "expired"


def test_a_relayed_identity_is_fetched_from_the_broker_once(
    start: Callable[..., Started],
    phone: Client,
    broker: ScriptedBroker,
) -> None:
    started = start(client=phone)
    identified_at_the_broker(broker, started, OTHER_DEVICE)
    assert flow.settle(started.row).outcome == "other_device"
    # Later checks (the frame's polling, eid_reconcile) do not fetch the person's record again.
    assert flow.settle(started.row).outcome == "other_device"
    assert broker.retrieve_requests == [started.request_id]
    assert started.refresh().status == Status.PENDING


# -- the return lands in another browser ----------------------------------------------------------
@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_a_return_in_a_browser_without_a_session_says_go_back_and_settles(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    phone: Client,
    signals: Signals,
    broker_api: str,
) -> None:
    started = start(client=phone)
    identified_at_the_broker(broker, started, SAME_DEVICE)
    other = Client(HTTP_USER_AGENT="Mozilla/5.0 (iPhone) Safari")  # the phone's other browser
    interstitial = other.get(started.success_url())
    response = other.get(interstitial.context["retry_url"])
    page = response.content.decode()
    assert response.status_code == 200
    assert "Go back to where you started" in page
    assert SAMPLE.last_name not in page
    assert started.refresh().status == Status.SUCCESS
    assert signals.of("identification_succeeded")[0]["request"] is None
    # Back in the window where it started: the start page shows where it went, once.
    back = phone.get("/eid/start/")
    assert back.status_code == 302
    assert back["Location"] == "/"
    assert phone.get("/eid/start/").status_code == 200
    assert started.reference not in pending_refs(phone)


def test_a_reference_not_in_this_browsers_session_is_not_finished_there(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice: Any,
    alice_client: Client,
    signals: Signals,
    broker_api: str,
) -> None:
    """Another browser of the same user (an app switch): told to go back, and the row is
    finished only by the same-device rule, which a record from another device fails (with
    OpenID Connect, only by the browser that started: the code is its to exchange)."""
    started = start()
    before = snapshot()
    broker.will_return(started.request_id)  # identified on the sample person's device
    other_browser = logged_in(alice)
    for url in (started.success_url(), started.abort_url()):
        response = other_browser.get(url)
        assert response.status_code == 200
        assert GO_BACK in response.content.decode()
    assert snapshot() == before
    assert signals.names == ["identification_started"]
    assert alice_client.get(started.success_url()).status_code == 302
    assert started.refresh().status == Status.SUCCESS


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_an_abort_in_another_browser_of_the_same_user(
    start: Callable[..., Started],
    phone: Client,
    broker: ScriptedBroker,
    alice: AbstractBaseUser,
    broker_api: str,
) -> None:
    started = start(client=phone)
    broker.broker.abort(started.request_id)
    response = logged_in(alice).get(started.abort_url())
    assert "Go back to where you started" in response.content.decode()
    assert started.refresh().status == Status.ABORTED


def test_a_return_with_forged_ids_in_another_browser_is_refused(
    start: Callable[..., Started],
    phone: Client,
    broker: ScriptedBroker,
    alice: AbstractBaseUser,
    broker_api: str,
) -> None:
    started = start(client=phone)
    identified_at_the_broker(broker, started, SAME_DEVICE)
    response = logged_in(alice).get(started.success_url(p2="0" * 32))
    # OIDC: the one callback URL, whose state names no identification: a link to nothing.
    assert response.status_code == (404 if started.is_oidc else 403)
    assert broker.status_requests == []
    assert started.refresh().status == Status.PENDING


def test_reloading_a_return_in_another_browser_asks_the_broker_at_most_every_few_seconds(
    start: Callable[..., Started],
    phone: Client,
    broker: ScriptedBroker,
) -> None:
    started = start(client=phone)
    anyone = Client()
    for _ in range(10):
        anyone.get(f"{started.success_url()}&eid_retry=1")
    assert broker.status_requests == [started.request_id]
    assert started.refresh().status == Status.PENDING


@pytest.mark.parametrize("kind", ["success", "abort", "error"])
@pytest.mark.parametrize("how", ELSEWHERE)
def test_an_app_switch_does_not_complete_an_identity_from_another_device(
    ended_at_the_broker: Callable[..., Ended],
    broker: ScriptedBroker,
    signals: Signals,
    caplog: pytest.LogCaptureFixture,
    kind: str,
    how: str,
) -> None:
    """Whoever holds a genuine return URL (a relayed session: someone else identified at
    the URL of a session started on this account) is told to go back; the identity is not
    stored, whatever kind of return it is, until the browser that started comes back."""
    ended = ended_at_the_broker("success")  # on the sample person's device, not the client's
    broker.counts.clear()
    response = ended.come_back_elsewhere(how, kind)
    assert_go_back_page(response)
    assert (snapshot(), signals.names) == (ended.before, [])
    # The status call first, then the record, to compare where it was identified.
    assert (broker.counts["status"], broker.counts["retrieve"]) == (1, 1)
    assert any("another device" in r.getMessage() for r in caplog.records)
    ended.assert_genuine_completes()


@pytest.mark.parametrize(
    ("ends", "answer", "outcome"),
    [
        ("abort", None, (Status.ABORTED, "identification_aborted", "")),
        ("error", None, (Status.ERROR, "identification_failed", "ERROR")),
        ("pending", "TIMEOUT", (Status.EXPIRED, None, "TIMEOUT")),
        ("pending", "INVALIDATED", (Status.ERROR, "identification_failed", "INVALIDATED")),
        ("pending", None, None),
        ("pending", "USERINITIATED", None),
    ],
    ids=["aborted", "failed", "timed out", "invalidated", "created", "user initiated"],
)
@pytest.mark.parametrize("kind", ["success", "abort", "error"])
def test_an_app_switch_finishes_only_what_the_broker_ended(
    start: Callable[..., Started],
    alice: AbstractBaseUser,
    broker: ScriptedBroker,
    signals: Signals,
    eid: Callable[..., None],
    ends: str,
    answer: str | None,
    outcome: tuple[str, str | None, str] | None,
    kind: str,
) -> None:
    """An ended session reveals no identity: it is finished as the broker's record says,
    whichever return URL came; one still at the broker stays pending."""
    started = start(ends=ends)
    rid = started.request_id
    if answer is not None:
        broker.inject("status", body={"Done": answer not in ("CREATED", "USERINITIATED")})
        broker.answer_record(rid, record(rid, answer))
    signals.clear()
    broker.counts.clear()
    before = snapshot()
    url = url_of(started, kind, p1=rid)  # filled by hand: the broker's record is scripted
    response = come_back_elsewhere(ELSEWHERE[0], url, alice, broker, eid)
    assert_go_back_page(response)
    if outcome is None:
        assert (snapshot(), signals.names) == (before, [])
        assert (broker.counts["status"], broker.counts["retrieve"]) == (1, 0)
        return
    status, signal, error_status = outcome
    assert changed(before, snapshot()) == {started.pk}
    row = started.row
    assert (row.status, row.error_status, row.last_name) == (status, error_status, "")
    expected = [(signal, started.pk, status, alice.pk)] if signal else []
    assert signals.calls == expected
    assert (broker.counts["status"], broker.counts["retrieve"]) == (1, 1)


@pytest.mark.parametrize("endpoint", ["status", "retrieve"])
@pytest.mark.parametrize("fault", ["connection reset", "503", "HTML instead of JSON"])
@pytest.mark.parametrize("how", ELSEWHERE)
def test_an_app_switch_the_broker_cannot_answer_loses_nothing(
    ended_at_the_broker: Callable[..., Ended],
    phone: Client,
    broker: ScriptedBroker,
    signals: Signals,
    endpoint: Any,
    fault: str,
    how: str,
) -> None:
    """The "go back" page all the same; the row stays pending for the browser that started."""
    ended = ended_at_the_broker("success", client=phone)
    ended.record_says(EnvironmentInfo=SAME_DEVICE)  # would complete
    broker.script(endpoint, BROKER_FAULTS[fault], request_id=ended.started.request_id)
    broker.counts.clear()
    assert_go_back_page(ended.come_back_elsewhere(how))
    assert broker.counts[endpoint] >= 1
    assert (snapshot(), signals.names) == (ended.before, [])
    broker.heal(endpoint)
    ended.assert_genuine_completes()


# -- the start page shows only what the user is waiting for ------------------------------------------
def finish_elsewhere(broker: ScriptedBroker, started: Started) -> None:
    identified_at_the_broker(broker, started, SAME_DEVICE)
    assert flow.settle(started.row).outcome == "succeeded"


def test_the_start_page_shows_a_recent_success_once(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    phone: Client,
) -> None:
    started = start(client=phone, next="/account/")
    finish_elsewhere(broker, started)
    shown = phone.get("/eid/start/")
    assert (shown.status_code, shown["Location"]) == (302, "/account/")
    assert phone.get("/eid/start/").status_code == 200


@pytest.mark.parametrize("how", ["finished long ago", "expired"])
def test_the_start_page_does_not_replace_its_form_with_an_old_or_expired_row(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    phone: Client,
    how: str,
) -> None:
    started = start(client=phone)
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


def test_the_start_page_with_a_next_shows_only_a_row_started_for_it(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    phone: Client,
) -> None:
    wine = start(client=phone, next="/wine/")
    finish_elsewhere(broker, wine)
    # A gate sends the user to verify for the payout page: the wine shop's success is not it.
    response = phone.get("/eid/start/?next=/payout/")
    assert response.status_code == 200
    assert "form" in response.context
    # A destination that is not safe is none: only a row started without one would match.
    assert "form" in phone.get("/eid/start/?next=https://evil.example/").context
    payout = start(client=phone, next="/payout/")
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
def test_the_other_browsers_page_says_what_settling_did(
    outcome: str | None,
    says: str,
) -> None:
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
