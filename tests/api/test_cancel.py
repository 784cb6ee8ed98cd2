"""``api-cancel``: the user gave up; the row ends ``ABORTED`` and the broker's session is
invalidated, so that it can no longer end otherwise.

Cancelling at the broker (the REST APIs' invalidate; nothing to end with OpenID Connect),
its failures and a return after the cancel are each broker API's (``broker_api``); which
rows may be cancelled, once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import pytest
import requests

from django_eid.models import Identification
from django_eid.sandbox.broker import SessionFinished
from tests.api.conftest import SAME_DEVICE, Api, api_start, identified, made_late, problem
from tests.fixtures_broker import (
    ACCESS_TOKEN,
    NO_SESSION_TO_ASK,
    REST_APIS,
    SAMPLE,
    ScriptedBroker,
    expected,
)
from tests.fixtures_views import Signals, Started

pytestmark = pytest.mark.django_db


def invalidated(started: Started) -> list[str]:
    """The invalidate calls a cancel of ``started`` makes: one, but for OIDC (no session)."""
    return [started.request_id] if expected().invalidates else []


Status = Identification.Status


def test_a_pending_identification_is_cancelled(
    broker_api: str, api: Api, broker: ScriptedBroker, signals: Signals, alice: object
) -> None:
    started = api_start(api, broker)
    response = api.cancel(started.reference)
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    body = response.json()
    assert (body["status"], body["outcome"]) == (
        "ABORTED",
        {"code": "aborted", "message": "You cancelled the identification."},
    )
    assert body["completed_at"] is not None
    assert "identity" not in body
    row = started.refresh()
    assert row.status == Status.ABORTED
    aborted = signals.of("identification_aborted")
    assert len(aborted) == 1
    assert aborted[0]["request"].user == alice
    assert broker.invalidate_requests == invalidated(started)
    assert started.reference not in api.client.session["django_eid_pending"]


def test_the_broker_is_asked_to_invalidate_the_session(api: Api, broker: ScriptedBroker) -> None:
    started = api_start(api, broker)
    api.cancel(started.reference)
    (call,) = [c for c in broker.mock.calls if c.request.method == "PUT"]
    assert call.request.url == "https://api.broker.test/identification/session/invalidate"
    assert json.loads(call.request.body) == {"RequestId": started.request_id}
    assert call.request.headers["Authorization"] == f"Bearer {ACCESS_TOKEN}"
    assert broker.broker.session(started.request_id).status == "INVALIDATED"  # type: ignore[union-attr]


def test_cancelling_again_answers_the_same(
    api: Api, broker: ScriptedBroker, signals: Signals
) -> None:
    started = api_start(api, broker)
    first = api.cancel(started.reference)
    again = api.cancel(started.reference)
    assert again.status_code == 200
    assert again.json() == first.json()
    assert len(signals.of("identification_aborted")) == 1
    assert broker.invalidate_requests == [started.request_id]  # once


def test_a_later_return_shows_the_aborted_row_and_stores_nothing(
    broker_api: str, api: Api, broker: ScriptedBroker, signals: Signals
) -> None:
    started = api_start(api, broker)
    api.cancel(started.reference)
    # The Success URL, replayed (or forged) after the cancel: nothing is fetched or stored.
    response = api.client.get(started.success_url())
    assert (response.status_code, response["Location"]) == (302, "/eid/start/")
    row = started.refresh()
    assert (row.status, row.name) == (Status.ABORTED, "")
    assert broker.retrieve_requests == []
    assert signals.names == ["identification_started", "identification_aborted"]
    assert api.identification(started.reference).json()["status"] == "ABORTED"


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_the_sandbox_will_not_let_the_person_finish_an_invalidated_session(
    broker_api: str, api: Api, broker: ScriptedBroker
) -> None:
    started = api_start(api, broker)
    broker.broker.open(started.request_id)
    api.cancel(started.reference)
    with pytest.raises(SessionFinished):
        broker.broker.identify(started.request_id, SAMPLE)
    record = broker.broker.session(started.request_id)
    assert record is not None
    assert record.status == "INVALIDATED"
    assert record.identity is None


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
def test_a_session_identified_before_the_cancel_serves_no_identity_after_it(
    broker_api: str, api: Api, broker: ScriptedBroker, signals: Signals
) -> None:
    """The person finished at the broker but the front end cancelled before anyone asked."""
    started = api_start(api, broker)
    api.identification(started.reference)  # polled while pending: the next poll is not due
    identified(broker, started, SAME_DEVICE)
    body = api.cancel(started.reference).json()
    assert body["status"] == "ABORTED"
    session = broker.broker.session(started.request_id)
    assert session is not None
    assert (session.status, session.identity) == ("INVALIDATED", None)
    assert api.client.get(started.success_url()).status_code == 302
    assert started.refresh().name == ""
    assert signals.names == ["identification_started", "identification_aborted"]


def test_a_finished_identification_cannot_be_cancelled(
    api: Api, broker: ScriptedBroker, signals: Signals
) -> None:
    started = api_start(api, broker)
    identified(broker, started, SAME_DEVICE)
    assert api.identification(started.reference).json()["status"] == "SUCCESS"
    before = started.refresh()
    refused = problem(api.cancel(started.reference), 409, "already_finished")
    assert refused["message"] == "This identification has already ended."
    after = started.refresh()
    assert (after.status, after.completed_at, after.name) == (
        Status.SUCCESS,
        before.completed_at,
        SAMPLE.name,
    )
    assert broker.invalidate_requests == []
    assert "identification_aborted" not in signals.names


def test_an_expired_identification_cannot_be_cancelled(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    started = api_start(api, broker)
    made_late(eid, started)
    # Still at the broker when asked, and late: it expired.
    assert api.identification(started.reference).json()["status"] == "EXPIRED"
    problem(api.cancel(started.reference), 409, "already_finished")
    assert started.refresh().status == Status.EXPIRED
    assert broker.invalidate_requests == []


def test_a_late_identification_still_at_the_broker_can_be_cancelled(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    started = api_start(api, broker)
    made_late(eid, started)
    # Pending until the broker is asked: the user giving up ends it, at the broker too.
    assert api.cancel(started.reference).json()["status"] == "ABORTED"
    assert broker.invalidate_requests == [started.request_id]


def test_another_user_s_identification_is_not_found(
    api: Api, bob_api: Api, broker: ScriptedBroker
) -> None:
    started = api_start(api, broker)
    problem(bob_api.cancel(started.reference), 404, "invalid_link")
    assert started.refresh().status == Status.PENDING
    assert broker.invalidate_requests == []


@pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
@pytest.mark.parametrize(
    "fault",
    [
        {"status": 500},
        {"status": 400, "body": {"message": "Cannot invalidate", "code": "INVALID_STATUS"}},
        {"exception": requests.ConnectionError("connection refused")},
        {"exception": requests.ReadTimeout("read timed out")},
    ],
)
def test_a_broker_that_cannot_invalidate_does_not_stop_the_cancel(
    broker_api: str,
    api: Api,
    broker: ScriptedBroker,
    signals: Signals,
    caplog: pytest.LogCaptureFixture,
    fault: dict[str, object],
) -> None:
    started = api_start(api, broker)
    broker.inject("invalidate", times=None, **fault)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="django_eid"):
        response = api.cancel(started.reference)
    assert response.status_code == 200
    assert response.json()["status"] == "ABORTED"
    assert started.refresh().status == Status.ABORTED
    assert len(signals.of("identification_aborted")) == 1
    warnings = [r for r in caplog.records if "Invalidating identification" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING
    assert started.request_id not in warnings[0].getMessage()


def test_a_start_cancel_loop_is_bounded_by_the_pending_limit(
    api: Api, broker: ScriptedBroker, eid: Callable[..., None]
) -> None:
    """A cancelled identification counts against MAX_PENDING_PER_USER for a minute, as a
    failed start does: cancelling cannot create broker sessions (billed) without end."""
    eid(MAX_PENDING_PER_USER=1)
    started = api_start(api, broker)
    assert api.cancel(started.reference).status_code == 200
    problem(api.start(), 429, "too_many_pending")
    assert len(broker.create_requests) == 1
