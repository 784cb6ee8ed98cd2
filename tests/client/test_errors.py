"""Every error body of the wire-format page becomes a typed error without secrets in it."""

from __future__ import annotations

from typing import Any

import pytest
import responses

from django_eid.client import EidClient
from django_eid.exceptions import (
    EidApiError,
    EidProtocolError,
    InvalidClient,
    InvalidScope,
    TokenError,
)
from tests.client.conftest import create, get
from tests.fixtures_client import (
    SECRET,
    SESSION_URL,
    TOKEN_URL,
    SettingsWrapper,
    add_token,
    api_calls,
    eid_settings_with,
)

TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzY29wZSI6WyJpZGVudGlmeSJdfQ.c2lnbmF0dXJl"
SSN = "31127112345"


# -- error bodies of the API -----------------------------------------------------------

API_BODIES: list[tuple[int, dict[str, Any], str | None]] = [
    (400, {"json": {"message": "ReturnUrls is required", "code": "VALIDATION"}}, "VALIDATION"),
    (
        422,
        {"json": {"message": "Invalid", "errors": [{"field": "Language", "message": "bad"}]}},
        "Language: bad",
    ),
    (400, {"json": {"error": "invalid_request", "error_description": "no id"}}, "no id"),
    (402, {"json": {"message": "Subscription required", "code": 402}}, "Subscription required"),
    (404, {"body": ""}, "an empty body"),
    (
        403,
        {"body": "<html><body>Forbidden</body></html>", "content_type": "text/html"},
        "text/html",
    ),
    (400, {"body": "not json {", "content_type": "application/json"}, "non-JSON"),
    (409, {"json": ["a", "list"]}, None),
    (400, {"body": "[" * 100_000, "content_type": "application/json"}, "non-JSON"),
    (400, {"json": {"errors": "a string", "message": None}}, None),
]


@pytest.mark.parametrize(("status", "answer", "shown"), API_BODIES)
@pytest.mark.parametrize("call", [get, create])
def test_error_bodies_become_api_errors(
    wire: responses.RequestsMock,
    status: int,
    answer: dict[str, Any],
    shown: str | None,
    call: Any,
) -> None:
    add_token(wire)
    method = responses.GET if call is get else responses.POST
    wire.add(method, SESSION_URL, status=status, headers={"X-Request-Id": "brk-42"}, **answer)
    with pytest.raises(EidApiError) as info:
        call()
    err = info.value
    assert err.status_code == status
    assert err.broker_request_id == "brk-42"
    message = str(err)
    assert f"{method} {SESSION_URL}" in message
    assert str(status) in message
    assert "brk-42" in message
    if shown:
        assert shown in message
    if "json" in answer and isinstance(answer["json"], dict):
        assert err.body == answer["json"]
    else:
        assert err.body is None
    assert "<html>" not in message


@pytest.mark.parametrize(
    ("headers", "named"),
    [
        ({"RequestId": "brk-documented"}, "brk-documented"),  # the reference's header
        ({"Request-Id": "brk-sdk"}, "brk-sdk"),  # some SDKs'
        ({"RequestId": "brk-documented", "X-Request-Id": "brk-gateway"}, "brk-documented"),
        ({}, None),
    ],
)
def test_the_broker_request_id_header(
    wire: responses.RequestsMock, headers: dict[str, str], named: str | None
) -> None:
    add_token(wire)
    wire.add(responses.GET, SESSION_URL, status=404, headers=headers, json={"code": "NF"})
    with pytest.raises(EidApiError) as info:
        get()
    assert info.value.broker_request_id == named
    if named:
        assert named in str(info.value)


@pytest.mark.parametrize(
    "answer",
    [
        {"body": "<html>oops</html>", "content_type": "text/html"},
        {"body": ""},
        {"json": ["a"]},
        {"body": b"\xff\xfe\x00", "content_type": "application/json"},
        {"body": b"[" * 100_000, "content_type": "application/json"},
    ],
)
def test_a_2xx_that_is_not_the_contract_is_a_protocol_error(
    wire: responses.RequestsMock, answer: dict[str, Any]
) -> None:
    add_token(wire)
    wire.add(responses.GET, SESSION_URL, **answer)
    wire.add(responses.POST, SESSION_URL, status=201, **answer)
    with pytest.raises(EidProtocolError, match=f"GET {SESSION_URL}"):
        get()
    with pytest.raises(EidProtocolError, match=f"POST {SESSION_URL}"):
        create()


# -- error bodies of the token endpoint ----------------------------------------------


@pytest.mark.parametrize(
    ("status", "answer", "cls", "error"),
    [
        (400, {"json": {"error": "invalid_scope"}}, InvalidScope, "invalid_scope"),
        (401, {"json": {"error": "invalid_client"}}, InvalidClient, "invalid_client"),
        (400, {"json": {"error": "invalid_client"}}, InvalidClient, "invalid_client"),
        (401, {"body": ""}, InvalidClient, None),
        (400, {"json": {"error": "invalid_request", "error_description": "x"}}, TokenError, "invalid_request"),
        (400, {"json": {"error": "unauthorized_client"}}, TokenError, "unauthorized_client"),
        (400, {"json": {"error": "unsupported_grant_type"}}, TokenError, "unsupported_grant_type"),
        (400, {"json": {"error": "invalid_grant"}}, TokenError, "invalid_grant"),
        (400, {"json": {"error": 7}}, TokenError, None),
        (404, {"body": "<h1>Not found</h1>", "content_type": "text/html"}, TokenError, None),
        (400, {"json": {"message": "bad", "code": "X"}}, TokenError, None),
    ],
)  # fmt: skip
def test_token_errors(
    wire: responses.RequestsMock,
    status: int,
    answer: dict[str, Any],
    cls: type,
    error: str | None,
) -> None:
    wire.add(responses.POST, TOKEN_URL, status=status, **answer)
    with pytest.raises(TokenError) as info:
        EidClient().fetch_token()
    assert type(info.value) is cls
    assert info.value.error == error
    assert info.value.status_code == status
    assert f"POST {TOKEN_URL} answered {status}" in str(info.value)


def test_invalid_scope_names_the_scopes(
    settings: SettingsWrapper, wire: responses.RequestsMock
) -> None:
    settings.DJANGO_EID = eid_settings_with(SCOPES=["identify", "document_file"])
    wire.add(responses.POST, TOKEN_URL, status=400, json={"error": "invalid_scope"})
    with pytest.raises(InvalidScope, match="identify document_file"):
        get()
    assert api_calls(wire) == []


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"access_token": "", "expires_in": 3600},
        {"access_token": 5, "expires_in": 3600},
        {"access_token": "t"},
        {"access_token": "t", "expires_in": 0},
        {"access_token": "t", "expires_in": -5},
        {"access_token": "t", "expires_in": "soon"},
        {"access_token": "t", "expires_in": True},
        {"access_token": "t", "expires_in": 1.5},
        {"access_token": "t", "expires_in": 3600, "token_type": "mac"},
        {"access_token": "t", "expires_in": 3600, "token_type": 1},
        ["access_token"],
        "token",
    ],
)
def test_a_malformed_token_answer_is_a_protocol_error(
    wire: responses.RequestsMock, body: Any
) -> None:
    wire.add(responses.POST, TOKEN_URL, json=body)
    with pytest.raises(EidProtocolError, match=f"POST {TOKEN_URL}"):
        EidClient().fetch_token()


# -- nothing secret in any message ----------------------------------------------------

ECHOES = f"secret {SECRET} token {TOKEN} nin {SSN}"


@pytest.mark.parametrize(
    "body",
    [
        {"message": ECHOES, "code": ECHOES},
        {"message": "x", "errors": [{"field": SSN, "message": ECHOES}]},
        {"error": ECHOES, "error_description": ECHOES},
    ],
)
def test_no_message_carries_a_secret_token_or_number(
    wire: responses.RequestsMock, body: dict[str, Any]
) -> None:
    add_token(wire, TOKEN)
    wire.add(responses.GET, SESSION_URL, status=400, json=body)
    with pytest.raises(EidApiError) as api_info:
        get()
    wire.replace(responses.POST, TOKEN_URL, status=400, json=body)
    with pytest.raises(TokenError) as token_info:
        EidClient().fetch_token()
    for err in (api_info.value, token_info.value):
        for text in (str(err), repr(err), str(getattr(err, "description", ""))):
            assert SECRET not in text
            assert TOKEN not in text
            assert SSN not in text


#: What the old scrubber let through: a spaced or Finnish number, a form-encoded secret of
#: another client, Basic credentials, and a number in a body the exception keeps.
OTHER_ECHOES = (
    f"nin {SSN[:6]} {SSN[6:]}, hetu 131052-308T, "
    "form client_secret=other-s3cret&x=1, header Basic b3RoZXI6b3RoZXItc2VjcmV0"
)


def test_no_message_or_kept_body_carries_any_form_of_a_number_or_credential(
    wire: responses.RequestsMock,
) -> None:
    body = {"message": OTHER_ECHOES, "details": {"person": f"{SSN}", "ssn": "31 12 71"}}
    add_token(wire, TOKEN)
    wire.add(responses.GET, SESSION_URL, status=400, json=body, headers={"X-Request-Id": SSN})
    with pytest.raises(EidApiError) as api_info:
        get()
    wire.replace(
        responses.POST,
        TOKEN_URL,
        status=400,
        json={"error": SSN, "error_description": OTHER_ECHOES},
    )
    with pytest.raises(TokenError) as token_info:
        EidClient().fetch_token()
    api_error, token_error = api_info.value, token_info.value
    assert api_error.body == {
        "message": api_error.body["message"],
        "details": {"person": "***", "ssn": "***"},
    }
    texts = [str(api_error), repr(api_error.body), str(api_error.broker_request_id)]
    texts += [str(token_error), str(token_error.error), str(token_error.description)]
    for text in texts:
        for leak in (SSN[6:], "308T", "other-s3cret", "b3RoZXI6b3RoZXItc2VjcmV0"):
            assert leak not in text
    assert "nin ***" in str(api_error)
