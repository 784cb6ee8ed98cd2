"""The Abort and Error callbacks, and a broker that fails when the session is created."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest
import requests
from django.contrib.messages import get_messages
from django.test import Client

from django_eid.models import Identification
from tests.fixtures_broker import NO_BROKER_IDS, NO_CLIENT_TOKEN, REST_APIS, RETURN_IS_THE_ANSWER
from tests.flow.conftest import (
    ACCESS_TOKEN,
    BASIC_CREDENTIALS,
    CLIENT_SECRET,
    Broker,
    SignalLog,
    Started,
    new_request_id,
)

pytestmark = pytest.mark.django_db

Status = Identification.Status
ERROR = {"NativeErrorCode": "C307", "ErrorCode": "PKI_BLOCKED", "ErrorMessage": "SIM blocked."}


# -- abort -------------------------------------------------------------------------


def test_abort_marks_the_row_and_returns_to_the_start_page_with_a_message(
    start: Callable[..., Started],
    broker: Broker,
    alice_client: Client,
    alice: Any,
    signal_log: SignalLog,
) -> None:
    started = start()
    response = alice_client.get(started.abort_url())
    assert response.status_code == 302
    assert response["Location"] == "/eid/start/"
    row = started.refresh()
    assert row.status == Status.ABORTED
    assert row.completed_at is not None
    assert len(broker.get_calls) == 0
    assert signal_log.names == ["identification_started", "identification_aborted"]
    kwargs = signal_log.of("identification_aborted")[0]
    assert (kwargs["identification"].pk, kwargs["user"], kwargs["status"]) == (
        row.pk,
        alice,
        Status.ABORTED,
    )
    page = alice_client.get(response["Location"])
    assert [str(m) for m in get_messages(page.wsgi_request)] == [
        "You cancelled the identification."
    ]
    assert "You cancelled the identification." in page.content.decode()
    # Shown once.
    assert "You cancelled" not in alice_client.get(response["Location"]).content.decode()


def test_abort_keeps_next_for_the_next_attempt(
    start: Callable[..., Started], alice_client: Client
) -> None:
    started = start(next="/shop/?a=1&b=2")
    response = alice_client.get(started.abort_url())
    assert response.status_code == 302
    assert response["Location"] == "/eid/start/?next=%2Fshop%2F%3Fa%3D1%26b%3D2"
    page = alice_client.get(response["Location"])
    assert page.context["form"].initial["next"] == "/shop/?a=1&b=2"


def test_abort_url_setting(
    start: Callable[..., Started], alice_client: Client, eid: Callable[..., None]
) -> None:
    eid(ABORT_URL="/cancelled/")
    started = start()
    response = alice_client.get(started.abort_url())
    assert response.status_code == 302
    assert response["Location"] == "/cancelled/"
    assert started.refresh().status == Status.ABORTED


# -- error -------------------------------------------------------------------------


@pytest.mark.apis("v1", reason="v1's Error URL carries the code ([0])")
def test_error_marks_the_row_keeps_the_details_and_renders_the_error_page(
    start: Callable[..., Started],
    broker: Broker,
    alice_client: Client,
    signal_log: SignalLog,
) -> None:
    started = start()
    broker.will_return(started.request_id, "ERROR", Error=ERROR)
    response = alice_client.get(started.error_url("TIMEOUT"))
    assert response.status_code == 200
    assert response.templates[0].name == "django_eid/error.html"
    html = response.content.decode()
    assert "Identification failed" in html
    assert 'href="/eid/start/"' in html  # a way to try again
    assert "PKI_BLOCKED" in html
    row = started.refresh()
    assert row.status == Status.ERROR
    assert row.error_status == "TIMEOUT"
    assert (row.error_code, row.error_message) == ("PKI_BLOCKED", "SIM blocked.")
    assert row.completed_at is not None
    assert len(broker.get_calls) == 1
    assert broker.get_calls[0].request.params == {"requestId": started.request_id}
    assert signal_log.names == ["identification_started", "identification_failed"]
    assert signal_log.of("identification_failed")[0]["status"] == Status.ERROR
    assert started.row.reference not in alice_client.session["django_eid_pending"]


@pytest.mark.apis("v1", reason="v1's Error URL carries the code ([0])")
def test_error_url_setting(
    start: Callable[..., Started], broker: Broker, alice_client: Client, eid: Callable[..., None]
) -> None:
    eid(ERROR_URL="/oops/")
    started = start()
    broker.will_return(started.request_id, "ERROR", Error=ERROR)
    response = alice_client.get(started.error_url("LOGIN"))
    assert response.status_code == 302
    assert response["Location"] == "/oops/"
    assert started.refresh().error_status == "LOGIN"


@pytest.mark.apis("v1", reason="v1's Error URL carries the code ([0])")
@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ("X" * 300, "X" * 64),
        ("LOGIN\u00e6 <b>", "LOGIN<b>"),
        # No code in the URL: the record's status (as the successor APIs always give it).
        ("[0]", "ERROR"),
        ("", "ERROR"),
    ],
)
def test_the_error_status_is_a_short_opaque_code(
    start: Callable[..., Started], broker: Broker, alice_client: Client, sent: str, stored: str
) -> None:
    started = start()
    broker.will_return(started.request_id, "ERROR")
    response = alice_client.get(started.error_url(sent))
    assert response.status_code == 200
    assert started.refresh().error_status == stored


@pytest.mark.apis("v1", reason="v1's Error URL parameters")
def test_error_without_the_status_parameter(
    start: Callable[..., Started], broker: Broker, alice_client: Client
) -> None:
    started = start()
    broker.will_return(started.request_id, "ERROR")
    query = urlencode({"requestId": started.request_id, "externalId": started.external_id})
    assert alice_client.get(f"{started.path('error')}?{query}").status_code == 200
    assert started.refresh().error_status == "ERROR"  # the record's


@pytest.mark.parametrize(
    "ids",
    [
        {},
        pytest.param(
            {"p1": "another-request"}, marks=pytest.mark.apis(*REST_APIS, reason=NO_BROKER_IDS)
        ),
        {"p2": "0" * 32},
    ],
    ids=["without-ids", "another-request-id", "another-external-id"],
)
def test_an_error_return_is_bound_to_the_session(
    start: Callable[..., Started],
    broker: Broker,
    alice_client: Client,
    signal_log: SignalLog,
    ids: dict[str, str],
) -> None:
    """A browser alone cannot end a pending row: the Error URL names its session."""
    started = start()
    broker.will_return(started.request_id, "ERROR")
    url = (
        f"{started.path('error')}?status=TIMEOUT"
        if not ids
        else started.error_url("TIMEOUT", **ids)
    )
    # OIDC: the state names the row; a return naming none is a link to nothing.
    assert alice_client.get(url).status_code == (404 if started.is_oidc else 400)
    assert started.refresh().status == Status.PENDING
    assert broker.get_calls == []
    assert signal_log.names == ["identification_started"]


@pytest.mark.apis(*REST_APIS, reason=RETURN_IS_THE_ANSWER)
@pytest.mark.parametrize(
    ("record", "status", "signal"),
    [
        ("SUCCESS", Status.SUCCESS, "identification_succeeded"),
        # The user cancelled, says the record, whichever URL they came back to.
        ("USERABORTED", Status.ABORTED, "identification_aborted"),
    ],
)
def test_the_record_decides_what_an_error_return_means(
    start: Callable[..., Started],
    broker: Broker,
    alice_client: Client,
    signal_log: SignalLog,
    record: str,
    status: str,
    signal: str,
) -> None:
    """An Error URL whose session the broker records as a success stores the success."""
    started = start()
    broker.will_return(started.request_id, record)
    alice_client.get(started.error_url("TIMEOUT", p1=started.request_id))
    assert started.refresh().status == status
    assert signal_log.names == ["identification_started", signal]


@pytest.mark.apis(*REST_APIS, reason=RETURN_IS_THE_ANSWER)
@pytest.mark.parametrize("record", ["CREATED", "USERINITIATED"])
def test_an_error_return_for_a_session_in_progress_leaves_the_row_pending(
    start: Callable[..., Started], broker: Broker, alice_client: Client, record: str
) -> None:
    started = start()
    broker.will_return(started.request_id, record)
    response = alice_client.get(started.error_url("TIMEOUT", p1=started.request_id))
    assert response.status_code == 409
    assert started.refresh().status == Status.PENDING
    assert started.reference in alice_client.session["django_eid_pending"]


@pytest.mark.apis(*REST_APIS, reason=RETURN_IS_THE_ANSWER)
@pytest.mark.parametrize(
    ("answer", "page"),
    [
        ({"status": 500}, 503),
        ({"status": 404, "body": ""}, 502),
        # The record of another session, as v1 and the successors name it.
        ({"json": {"RequestId": "other", "id": "other", "Error": ERROR}}, 502),
    ],
)
def test_an_error_return_the_broker_cannot_confirm_leaves_the_row_pending(
    start: Callable[..., Started],
    broker: Broker,
    alice_client: Client,
    signal_log: SignalLog,
    answer: dict[str, Any],
    page: int,
) -> None:
    started = start()
    broker.will_answer(started.request_id, times=3, **answer)
    response = alice_client.get(started.error_url("TIMEOUT", p1=started.request_id))
    assert response.status_code == page
    assert started.refresh().status == Status.PENDING
    assert signal_log.names == ["identification_started"]


# -- the broker fails when the session is created -----------------------------------


@pytest.mark.apis("v1", reason="the create answer's v1 wording")
@pytest.mark.parametrize(
    ("answer", "page_status", "error_code", "says"),
    [
        ({"status": 500}, 503, "EidUnavailable", "500"),
        ({"body": requests.ConnectionError("refused")}, 503, "EidUnavailable", "could not connect"),
        ({"status": 400, "json": {"message": "Invalid ReturnUrls"}}, 502, "EidApiError", "Invalid"),
        ({"status": 200, "json": {"Url": "not a url"}}, 502, "EidProtocolError", "Url"),
        (
            {"status": 403, "json": {"message": f"bad {CLIENT_SECRET} {ACCESS_TOKEN}"}},
            502,
            "EidApiError",
            "403",
        ),
    ],
)
def test_a_broker_failure_at_start(
    broker: Broker,
    alice_client: Client,
    alice: Any,
    signal_log: SignalLog,
    caplog: pytest.LogCaptureFixture,
    answer: dict[str, Any],
    page_status: int,
    error_code: str,
    says: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    broker.will_fail_create(**answer)
    response = alice_client.post("/eid/start/", {"next": "/account/"})
    assert response.status_code == page_status
    html = response.content.decode()
    assert response.templates[0].name == "django_eid/error.html"
    assert 'href="/eid/start/"' in html
    assert "Try again" in html
    row = Identification.objects.get()
    assert row.user == alice
    assert row.status == Status.ERROR
    assert row.request_id is None
    assert row.error_code == error_code
    assert says in row.error_message
    assert row.completed_at is not None
    assert signal_log.names == []
    assert not alice_client.session.get("django_eid_pending")
    assert any(r.getMessage().startswith("Creating identification session") for r in caplog.records)
    for secret in (CLIENT_SECRET, BASIC_CREDENTIALS, ACCESS_TOKEN):
        assert secret not in caplog.text
        assert secret not in html
        assert secret not in row.error_message


@pytest.mark.apis(*REST_APIS, reason=NO_CLIENT_TOKEN)
def test_a_refused_token_at_start(
    broker: Broker, alice_client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    broker.will_fail_token(401, json={"error": "invalid_client"})
    broker.will_create()
    response = alice_client.post("/eid/start/", {})
    assert response.status_code == 502
    assert len(broker.create_calls) == 0
    row = Identification.objects.get()
    assert (row.status, row.error_code) == (Status.ERROR, "InvalidClient")
    assert CLIENT_SECRET not in caplog.text
    assert BASIC_CREDENTIALS not in caplog.text


def test_an_unconfigured_app_answers_503_without_a_row(
    broker: Broker, alice_client: Client, eid: Callable[..., None]
) -> None:
    eid(CLIENT_SECRET="")
    broker.will_create(new_request_id())
    response = alice_client.post("/eid/start/", {})
    assert response.status_code == 503
    assert len(broker.mock.calls) == 0
    assert not Identification.objects.exists()
