"""Hostile or broken broker answers, for each of the three calls (token, create, retrieve).

Through the views: never an unhandled exception, no 5xx but the deliberate 502/503 error
pages, no signal; a start that fails stores one ERROR row, keeps no secret, and the user can
start again; a retrieval that fails leaves the row PENDING and the same return URL completes
it later.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
import requests
from django.test import Client
from urllib3.exceptions import NewConnectionError

from django_eid.models import Identification
from tests.conftest import reset_eid_state
from tests.fixtures_broker import (
    ACCESS_TOKEN,
    BASIC_CREDENTIALS,
    EVIL,
    NO_CLIENT_TOKEN,
    RECORD_PROPERTIES,
    REST_APIS,
    SAMPLE,
    Scripted,
    ScriptedBroker,
    raises,
    record,
    reply,
)
from tests.fixtures_client import SECRET
from tests.fixtures_views import Signals, Started, changed, snapshot
from tests.flow.faults import connection_reset
from tests.flow.returns import START

pytestmark = pytest.mark.django_db

Status = Identification.Status
#: token and create are exercised by a start; retrieve (and a token fetched then) by Success.
CALLS = ["token", "create", "retrieve", "token at retrieval"]
RETRIED = frozenset({429, 502, 503, 504})


def drive(
    call: str,
    fault: Scripted,
    client: Client,
    start: Callable[..., Started],
    broker: ScriptedBroker,
) -> tuple[Any, Started | None]:
    """Make ``call`` answer ``fault`` and reach it through the views."""
    if call in ("token", "create"):
        broker.fault(call, fault)
        return client.post(START), None
    started = start(ends="success")
    if call == "token at retrieval":
        reset_eid_state()  # the shared token is gone: the callback must fetch one
    broker.counts.clear()
    broker.fault("retrieve" if call == "retrieve" else "token", fault)
    return client.get(started.success_url()), started


def assert_outcome(
    call: str,
    status: int,
    response: Any,
    started: Started | None,
    before: dict[int, Any],
    client: Client,
    broker: ScriptedBroker,
    signals: Signals,
) -> None:
    """The exact outcome of a failed call, then recovery once the broker is healthy."""
    assert response.status_code == status
    assert response["X-Frame-Options"] == ("DENY" if started is None else "SAMEORIGIN")
    assert "django_eid/error.html" in [t.name for t in response.templates]
    assert signals.names == []
    broker.heal()
    if started is None:  # one ERROR row, then the user starts again
        (row,) = snapshot().values()
        assert row["status"] == Status.ERROR
        assert row["completed_at"] is not None
        assert row["error_code"] in {
            "EidUnavailable",
            "EidApiError",
            "EidProtocolError",
            "TokenError",
            "InvalidClient",
            "InvalidScope",
        }
        assert client.post(START).status_code == 302
        assert [r["status"] for r in snapshot().values()] == [Status.ERROR, Status.PENDING]
        assert signals.names == ["identification_started"]
        return
    assert snapshot() == before  # the pending row survives, untouched
    response = client.get(started.success_url())
    assert (response.status_code, response["Location"]) == (302, "/")
    assert started.row.status == Status.SUCCESS
    assert signals.names == ["identification_succeeded"]


# -- HTTP error statuses with every error-body shape of the wire-format page -------------
ERROR_BODIES: dict[str, Callable[[int], Scripted]] = {
    "message and code": lambda s: reply(s, {"message": "Something failed", "code": "E_42"}),
    "message and errors": lambda s: reply(
        s, {"message": "Invalid", "errors": [{"field": "ReturnUrls", "message": "required"}]}
    ),
    "RFC 6749": lambda s: reply(
        s, {"error": "invalid_request", "error_description": "no", "error_uri": "https://x"}
    ),
    "empty": lambda s: reply(s, raw=b""),
    "HTML": lambda s: reply(s, raw="<html><body><h1>Bad Gateway</h1></body></html>"),
}


def expected_calls(call: str, status: int) -> int:
    kind = "create" if call == "create" else "other"
    if status == 401 and call in ("create", "retrieve"):
        return 2  # the token is renewed once
    return 3 if status in RETRIED and kind == "other" else 1


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("status", [401, 403, 404, 429, 500, 502, 503])
@pytest.mark.parametrize("body", list(ERROR_BODIES))
def test_an_http_error_becomes_an_error_page(
    start: Callable[..., Started],
    alice_client: Client,
    broker: ScriptedBroker,
    signals: Signals,
    call: str,
    status: int,
    body: str,
) -> None:
    response, started = drive(call, ERROR_BODIES[body](status), alice_client, start, broker)
    counted = "token" if call.startswith("token") else call
    assert broker.counts[counted] == expected_calls(call, status)
    before = snapshot()
    signals.clear()
    unavailable = status == 429 or status >= 500
    assert_outcome(
        call, 503 if unavailable else 502, response, started, before, alice_client, broker, signals
    )


# -- transport failures ------------------------------------------------------------------
TRANSPORT: dict[str, tuple[Scripted, bool]] = {
    # name: (fault, retried even for create because it certainly was not sent)
    "read timeout": (raises(lambda: requests.ReadTimeout("read timed out")), False),
    "connect timeout": (raises(lambda: requests.ConnectTimeout("connect timed out")), True),
    "connection reset": (raises(connection_reset), False),
    "connection refused": (
        raises(lambda: requests.ConnectionError(NewConnectionError(None, "refused"))),  # type: ignore[arg-type]
        True,
    ),
    "TLS failure": (raises(lambda: requests.exceptions.SSLError("bad certificate")), False),
    "broken chunking": (raises(lambda: requests.exceptions.ChunkedEncodingError("x")), False),
    "bad content encoding": (raises(lambda: requests.exceptions.ContentDecodingError("x")), False),
}


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("failure", list(TRANSPORT))
def test_a_transport_failure_becomes_a_503(
    start: Callable[..., Started],
    alice_client: Client,
    broker: ScriptedBroker,
    signals: Signals,
    call: str,
    failure: str,
) -> None:
    fault, not_sent = TRANSPORT[failure]
    response, started = drive(call, fault, alice_client, start, broker)
    connection_error = failure not in ("broken chunking", "bad content encoding")
    retried = connection_error and (call != "create" or not_sent)
    assert broker.counts["token" if call.startswith("token") else call] == (3 if retried else 1)
    before = snapshot()
    signals.clear()
    assert_outcome(call, 503, response, started, before, alice_client, broker, signals)


# -- 2xx answers that are not the contract -------------------------------------------------
class rec:
    """A record for the request id being retrieved, with ``overrides``."""

    def __init__(self, **overrides: Any) -> None:
        self.overrides = overrides

    def __call__(self, request_id: str) -> dict[str, Any]:
        return record(request_id, **self.overrides)


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


BROKER = "https://id.broker.test/start"
DEEP = "[" * 100_000 + "]" * 100_000
ALL_NULL = dict.fromkeys(RECORD_PROPERTIES)
NOT_THE_CONTRACT: dict[str, dict[str, Any]] = {
    "token": {
        "not JSON": reply(raw="<html>OK</html>"),
        "JSON array": reply(body=[{"access_token": "x"}]),
        "JSON string": reply(body="tok"),
        "access_token a number": reply(body={"access_token": 123, "expires_in": 3600}),
        "access_token null": reply(body={"access_token": None, "expires_in": 3600}),
        "expires_in text": reply(body={"access_token": "t", "expires_in": "abc"}),
        "expires_in negative": reply(body={"access_token": "t", "expires_in": -5}),
        "expires_in true": reply(body={"access_token": "t", "expires_in": True}),
        "token_type MAC": reply(body={"access_token": "t", "expires_in": 60, "token_type": "MAC"}),
        "nulls everywhere": reply(
            body={"access_token": None, "expires_in": None, "token_type": None}
        ),
        "expires_in NaN": reply(raw='{"access_token": "t", "expires_in": NaN}'),
        "nested 100,000 deep": reply(raw=f'{{"access_token": "t", "x": {DEEP}}}'),
    },
    "create": {
        "not JSON": reply(raw="<html>OK</html>"),
        "JSON array": reply(body=[]),
        "Url a number": reply(body={"Url": 123, "RequestId": "r1"}),
        "RequestId a number": reply(body={"Url": "https://id.broker.test/", "RequestId": 1}),
        "Url javascript": reply(body={"Url": "javascript:alert(1)", "RequestId": "r1"}),
        "Url scheme-relative": reply(body={"Url": "//evil.example/", "RequestId": "r1"}),
        "Url empty": reply(body={"Url": "", "RequestId": "r1"}),
        "Url without a host": reply(body={"Url": "https:///login", "RequestId": "r1"}),
        "Url only a port": reply(body={"Url": "https://:443/", "RequestId": "r1"}),
        # A host that would add directives to the frame page's Content-Security-Policy.
        "Url host with ;": reply(
            body={"Url": "https://id.broker.test;script-src *", "RequestId": "r1"}
        ),
        "Url host with ,": reply(
            body={"Url": "https://id.broker.test,evil.test/", "RequestId": "r1"}
        ),
        "Url host with a space": reply(
            body={"Url": "https://id.broker.test x/", "RequestId": "r1"}
        ),
        "Url host with a quote": reply(body={"Url": 'https://id.broker.test"/', "RequestId": "r1"}),
        "Url with user information": reply(
            body={"Url": "https://id.broker.test@evil.test/", "RequestId": "r1"}
        ),
        "nulls everywhere": reply(body={"Url": None, "RequestId": None}),
        "no fields": reply(body={}),
        "RequestId over 512 characters": reply(body={"Url": BROKER, "RequestId": "R" * 513}),
        "RequestId with NUL": reply(body={"Url": BROKER, "RequestId": "R1\x00"}),
        "nested 100,000 deep": reply(raw=f'{{"Url": "{BROKER}", "X": {DEEP}}}'),
    },
    "retrieve": {
        "not JSON": reply(raw="<html>OK</html>"),
        "JSON array": reply(body=[]),
        "JSON null": reply(raw=b"null"),
        "Status: 123": rec(Status=123),
        "EnvironmentInfo: x": rec(EnvironmentInfo="x"),
        "Error: x": rec(Error="x"),
        "Name: object": rec(Name={"first": "Kari"}),
        "NaN in an unknown field": rec(Extra=float("nan")),
        "Infinity in an unknown field": rec(Extra=[float("-inf")]),
        "NUL in Name": rec(Name="Kari\x00"),
        "NUL in a property name": rec(**{"Extra\x00": 1}),
        "nested 40 deep": rec(Extra=nested(40)),
        "nested 100,000 deep": reply(raw=f'{{"RequestId": "x", "Extra": {DEEP}}}'),
    },
}


@pytest.mark.parametrize(
    ("call", "answer"),
    [(call, name) for call, answers in NOT_THE_CONTRACT.items() for name in answers],
)
def test_an_answer_outside_the_contract_becomes_a_502(
    start: Callable[..., Started],
    alice_client: Client,
    broker: ScriptedBroker,
    signals: Signals,
    call: str,
    answer: str,
) -> None:
    fault = NOT_THE_CONTRACT[call][answer]
    if isinstance(fault, rec):  # a record for the right id
        started = start(ends="success")
        broker.answer_record(started.request_id, fault(started.request_id))
        response = alice_client.get(started.success_url())
        broker.heal(request_id=started.request_id)
    else:
        response, started = drive(call, fault, alice_client, start, broker)
    before = snapshot()
    signals.clear()
    assert_outcome(call, 502, response, started, before, alice_client, broker, signals)


TOLERATED: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # record overrides: the stored fields
    # An unusable DateOfBirth: the national identity number carries the date.
    "DateOfBirth: abc": ({"DateOfBirth": "abc"}, {"date_of_birth": SAMPLE.birth_date}),
    "DateOfBirth: 320299": ({"DateOfBirth": "320299"}, {"date_of_birth": SAMPLE.birth_date}),
    "DateOfBirth: 290201": ({"DateOfBirth": "290201"}, {"date_of_birth": SAMPLE.birth_date}),
    # ... and without the number, the date is unknown.
    "DateOfBirth: abc, no number": (
        {"DateOfBirth": "abc", "SocialSecurityNumber": None},
        {"date_of_birth": None, "social_security_number": None},
    ),
    "nulls everywhere but the id and status": (
        {**ALL_NULL, "Status": "SUCCESS"},
        {"name": "", "social_security_number": None, "date_of_birth": None, "raw_keys": 12},
    ),
    "unknown fields": (
        {"Unexpected": {"nested": [1, 2]}, "Extra": None},
        {"name": "Nordmann, Kari Marie", "raw_keys": 14},
    ),
    "fields in camelCase": (
        {"Name": ..., "name": "Nordmann, Kari", "STATUS": "FAILED"},
        {"name": "Nordmann, Kari"},
    ),
    "an IP address that is not one": (
        {"EnvironmentInfo": {"IPAddress": "999.1.1.1; DROP", "UserAgent": "x" * 5000}},
        {"ip_address": None, "user_agent": "x" * 1000},
    ),
    "overlong strings": ({"Name": "N" * 100_000}, {"name": "N" * 255}),
}


@pytest.mark.parametrize("case", list(TOLERATED))
def test_a_tolerable_record_is_stored_sanitised(
    start: Callable[..., Started],
    alice_client: Client,
    broker: ScriptedBroker,
    signals: Signals,
    case: str,
) -> None:
    overrides, stored = TOLERATED[case]
    started = start(ends="success")
    signals.clear()
    broker.answer_record(started.request_id, record(started.request_id, **overrides))
    before = snapshot()
    response = alice_client.get(started.success_url())
    assert (response.status_code, response["Location"]) == (302, "/")
    assert changed(before, snapshot()) == {started.pk}
    row = started.row
    assert row.status == Status.SUCCESS
    for name, value in stored.items():
        if name == "raw_keys":
            assert len(row.raw) == value  # all but the national identity number
            assert "SocialSecurityNumber" not in row.raw
        else:
            assert getattr(row, name) == value, name
    assert signals.names == ["identification_succeeded"]


# -- the size cap and redirects -------------------------------------------------------------
@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("declared", [True, False], ids=["Content-Length", "streamed"])
def test_an_answer_over_the_size_cap_is_refused(
    start: Callable[..., Started],
    alice_client: Client,
    broker: ScriptedBroker,
    signals: Signals,
    eid: Callable[..., None],
    call: str,
    declared: bool,
) -> None:
    eid(MAX_RESPONSE_BYTES=4096)
    body = json_bytes({"access_token": "t", "expires_in": 60, "Padding": "x" * 5000})
    headers = {"Content-Length": str(len(body))} if declared else {}
    response, started = drive(call, reply(raw=body, headers=headers), alice_client, start, broker)
    before = snapshot()
    signals.clear()
    assert_outcome(call, 502, response, started, before, alice_client, broker, signals)


def json_bytes(value: Any) -> bytes:
    return json.dumps(value).encode()


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_never_followed(
    start: Callable[..., Started],
    alice_client: Client,
    broker: ScriptedBroker,
    signals: Signals,
    call: str,
    status: int,
) -> None:
    fault = reply(status, raw=b"", headers={"Location": EVIL})
    response, started = drive(call, fault, alice_client, start, broker)
    assert broker.counts["token" if call.startswith("token") else call] == 1  # ONE call
    assert broker.evil_calls == []  # the bearer token never went to the Location
    before = snapshot()
    signals.clear()
    assert_outcome(call, 502, response, started, before, alice_client, broker, signals)
    assert broker.evil_calls == []


def test_a_request_id_already_in_use_is_refused(
    start: Callable[..., Started],
    alice_client: Client,
    bob_client: Client,
    alice: Any,
    broker: ScriptedBroker,
    signals: Signals,
) -> None:
    alices = start(ends="success")
    signals.clear()
    broker.fault("create", reply(body={"Url": BROKER, "RequestId": alices.request_id}), once=True)
    before = snapshot()
    response = bob_client.post(START)
    assert response.status_code == 502
    (new,) = changed(before, snapshot())
    assert (snapshot()[new]["status"], snapshot()[new]["request_id"]) == (Status.ERROR, None)
    assert signals.names == []
    response = alice_client.get(alices.success_url())  # alice's session is unharmed
    assert (response.status_code, alices.row.status) == (302, Status.SUCCESS)
    assert signals.calls == [("identification_succeeded", alices.pk, Status.SUCCESS, alice.pk)]


# -- what a failed start keeps: the error, never a secret --------------------------------
@pytest.mark.parametrize(
    ("answer", "page_status", "error_code", "says"),
    [
        ({"status": 500}, 503, "EidUnavailable", "500"),
        ({"body": requests.ConnectionError("refused")}, 503, "EidUnavailable", "could not connect"),
        ({"status": 400, "json": {"message": "Invalid ReturnUrls"}}, 502, "EidApiError", "Invalid"),
        ({"status": 200, "json": {"Url": "not a url"}}, 502, "EidProtocolError", "Url"),
        (
            {"status": 403, "json": {"message": f"bad {SECRET} {ACCESS_TOKEN}"}},
            502,
            "EidApiError",
            "403",
        ),
    ],
)
def test_a_broker_failure_at_start(
    broker: ScriptedBroker,
    alice_client: Client,
    alice: Any,
    signals: Signals,
    caplog: pytest.LogCaptureFixture,
    answer: dict[str, Any],
    page_status: int,
    error_code: str,
    says: str,
) -> None:
    """The create answer's v1 wording."""
    caplog.set_level(logging.DEBUG)
    broker.will_fail_create(**answer)
    response = alice_client.post(START, {"next": "/account/"})
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
    assert signals.names == []
    assert not alice_client.session.get("django_eid_pending")
    assert any(r.getMessage().startswith("Creating identification session") for r in caplog.records)
    for secret in (SECRET, BASIC_CREDENTIALS, ACCESS_TOKEN):
        assert secret not in caplog.text
        assert secret not in html
        assert secret not in row.error_message


@pytest.mark.apis(*REST_APIS, reason=NO_CLIENT_TOKEN)
def test_a_refused_token_at_start(
    broker: ScriptedBroker,
    alice_client: Client,
    caplog: pytest.LogCaptureFixture,
    broker_api: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    broker.will_fail_token(401, json={"error": "invalid_client"})
    broker.will_create()
    response = alice_client.post(START, {})
    assert response.status_code == 502
    assert len(broker.create_calls) == 0
    row = Identification.objects.get()
    assert (row.status, row.error_code) == (Status.ERROR, "InvalidClient")
    assert SECRET not in caplog.text
    assert BASIC_CREDENTIALS not in caplog.text


def test_an_unconfigured_app_answers_503_without_a_row(
    broker: ScriptedBroker, alice_client: Client, eid: Callable[..., None]
) -> None:
    eid(CLIENT_SECRET="")
    broker.will_create()
    response = alice_client.post(START, {})
    assert response.status_code == 503
    assert len(broker.mock.calls) == 0
    assert not Identification.objects.exists()
