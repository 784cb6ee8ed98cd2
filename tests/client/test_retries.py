"""The broker client when the broker is busy or odd: retries, redirects, size caps."""

from __future__ import annotations

import time
from email.utils import formatdate
from typing import Any

import pytest
import requests
import responses
from urllib3.exceptions import MaxRetryError, NewConnectionError

from django_eid.exceptions import EidError, EidProtocolError, EidUnavailable
from tests.client.conftest import CREATED, create, get
from tests.fixtures_client import (
    RECORD,
    REQUEST_ID,
    SESSION_URL,
    TOKEN_URL,
    SettingsWrapper,
    add_token,
    api_calls,
    eid_settings_with,
    token_calls,
)


def refused_connection() -> requests.ConnectionError:
    """What requests raises when the TCP connection could not be opened at all."""
    reason = NewConnectionError(None, "Failed to establish a new connection")  # type: ignore[arg-type]
    return requests.ConnectionError(MaxRetryError(None, SESSION_URL, reason))  # type: ignore[arg-type]


# -- retries of the idempotent GET -------------------------------------------------


@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_get_is_retried_twice_on_busy_statuses(
    wire: responses.RequestsMock, slept: list[float], status: int
) -> None:
    add_token(wire)
    wire.add(responses.GET, SESSION_URL, status=status, body="busy")
    with pytest.raises(EidUnavailable) as info:
        get()
    assert info.value.status_code == status
    assert len(api_calls(wire)) == 3
    assert len(slept) == 2
    assert str(status) in str(info.value)
    assert "3 attempt(s)" in str(info.value)


@pytest.mark.parametrize(
    "exc", [requests.ConnectionError("reset"), requests.ReadTimeout(), requests.ConnectTimeout()]
)
def test_get_is_retried_twice_on_connection_failures(
    wire: responses.RequestsMock, slept: list[float], exc: Exception
) -> None:
    add_token(wire)
    wire.add(responses.GET, SESSION_URL, body=exc)
    with pytest.raises(EidUnavailable) as info:
        get()
    assert len(api_calls(wire)) == 3
    assert info.value.status_code is None
    assert SESSION_URL in str(info.value)


def test_get_succeeds_after_a_retry(wire: responses.RequestsMock, slept: list[float]) -> None:
    add_token(wire)
    wire.add(responses.GET, SESSION_URL, status=503)
    wire.add(responses.GET, SESSION_URL, body=requests.ConnectionError("reset"))
    wire.add(responses.GET, SESSION_URL, json=RECORD)
    assert get().request_id == REQUEST_ID
    assert len(api_calls(wire)) == 3


def test_backoff_is_short_and_exponential(
    wire: responses.RequestsMock, slept: list[float], real_backoff: None
) -> None:
    add_token(wire)
    wire.add(responses.GET, SESSION_URL, status=502)
    with pytest.raises(EidUnavailable):
        get()
    assert slept == [0.2, 0.4]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422, 500])
def test_other_statuses_are_not_retried(
    wire: responses.RequestsMock, slept: list[float], status: int
) -> None:
    add_token(wire)
    add_token(wire)
    wire.add(responses.GET, SESSION_URL, status=status, json={"message": "no"})
    with pytest.raises(EidError):
        get()
    assert len(api_calls(wire)) == (2 if status == 401 else 1)
    assert slept == []


def test_retry_after_is_honoured(wire: responses.RequestsMock, slept: list[float]) -> None:
    add_token(wire)
    wire.add(responses.GET, SESSION_URL, status=429, headers={"Retry-After": "3"})
    wire.add(responses.GET, SESSION_URL, json=RECORD)
    get()
    assert slept == [3.0]


def test_retry_after_as_a_date(wire: responses.RequestsMock, slept: list[float]) -> None:
    add_token(wire)
    when = formatdate(time.time() + 4, usegmt=True)
    wire.add(responses.GET, SESSION_URL, status=503, headers={"Retry-After": when})
    wire.add(responses.GET, SESSION_URL, json=RECORD)
    get()
    assert 2 < slept[0] <= 4


def test_retry_after_beyond_the_timeout_is_not_waited_for(
    settings: SettingsWrapper, wire: responses.RequestsMock, slept: list[float]
) -> None:
    settings.DJANGO_EID = eid_settings_with(TIMEOUT=5)
    add_token(wire)
    wire.add(responses.GET, SESSION_URL, status=503, headers={"Retry-After": "120"})
    with pytest.raises(EidUnavailable) as info:
        get()
    assert len(api_calls(wire)) == 1
    assert slept == []
    assert info.value.status_code == 503
    assert "503" in str(info.value)


def test_the_token_request_is_retried_too(wire: responses.RequestsMock, slept: list[float]) -> None:
    wire.add(responses.POST, TOKEN_URL, status=503)
    add_token(wire)
    wire.add(responses.GET, SESSION_URL, json=RECORD)
    get()
    assert len(token_calls(wire)) == 2


# -- the POST that creates a session ----------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        {"status": 503},
        {"status": 502},
        {"status": 429, "headers": {"Retry-After": "1"}},
        {"body": requests.ReadTimeout()},
        {"body": requests.ConnectionError("Connection aborted.")},
    ],
)
def test_create_is_not_retried_once_the_broker_may_have_it(
    wire: responses.RequestsMock, slept: list[float], answer: dict[str, Any]
) -> None:
    add_token(wire)
    wire.add(responses.POST, SESSION_URL, **answer)
    with pytest.raises(EidUnavailable):
        create()
    assert len(api_calls(wire)) == 1
    assert slept == []


@pytest.mark.parametrize("failure", [requests.ConnectTimeout, refused_connection])
def test_create_is_retried_when_the_connection_was_never_made(
    wire: responses.RequestsMock, slept: list[float], failure: Any
) -> None:
    add_token(wire)
    wire.add(responses.POST, SESSION_URL, body=failure())
    wire.add(responses.POST, SESSION_URL, body=failure())
    wire.add(responses.POST, SESSION_URL, json=CREATED)
    assert create().request_id == "r1"
    assert len(api_calls(wire)) == 3


def test_create_gives_up_after_two_retries(
    wire: responses.RequestsMock, slept: list[float]
) -> None:
    add_token(wire)
    wire.add(responses.POST, SESSION_URL, body=requests.ConnectTimeout())
    with pytest.raises(EidUnavailable, match="3 attempt"):
        create()
    assert len(api_calls(wire)) == 3


# -- redirects and sizes ------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "url", "call"),
    [
        (responses.GET, SESSION_URL, get),
        (responses.POST, SESSION_URL, create),
        (responses.POST, TOKEN_URL, get),
    ],
)
@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_redirects_are_not_followed(
    wire: responses.RequestsMock, method: str, url: str, call: Any, status: int
) -> None:
    elsewhere = "https://evil.test/collect"
    if url != TOKEN_URL:
        add_token(wire)
    wire.add(method, url, status=status, headers={"Location": elsewhere})
    wire.add(responses.GET, elsewhere, json=RECORD)
    wire.add(responses.POST, elsewhere, json=CREATED)
    with pytest.raises(EidProtocolError, match=str(status)):
        call()
    assert [c for c in wire.calls if c.request.url.startswith(elsewhere)] == []
    assert len([c for c in wire.calls if c.request.url.startswith(url)]) == 1


@pytest.mark.parametrize("declared", [True, False])
def test_an_answer_over_the_size_cap_is_refused(
    settings: SettingsWrapper, wire: responses.RequestsMock, declared: bool
) -> None:
    settings.DJANGO_EID = eid_settings_with(MAX_RESPONSE_BYTES=1000)
    add_token(wire)
    body = b'{"RequestId": "' + b"x" * 100_000 + b'"}'
    wire.add(
        responses.GET,
        SESSION_URL,
        body=body,
        content_type="application/json",
        auto_calculate_content_length=declared,
    )
    with pytest.raises(EidProtocolError, match="over 1000 bytes"):
        get()
    assert len(api_calls(wire)) == 1


def test_an_answer_at_the_size_cap_is_read(
    settings: SettingsWrapper, wire: responses.RequestsMock
) -> None:
    record = b'{"RequestId": "' + REQUEST_ID.encode() + b'"'
    body = record + b" " * (99 - len(record)) + b"}"  # padded with JSON whitespace
    assert len(body) == 100
    settings.DJANGO_EID = eid_settings_with(MAX_RESPONSE_BYTES=100)
    wire.add(responses.POST, TOKEN_URL, json={"access_token": "t", "expires_in": 60})
    wire.add(responses.GET, SESSION_URL, body=body, content_type="application/json")
    assert get().request_id == REQUEST_ID
