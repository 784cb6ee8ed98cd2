"""``BROKER_API = "eid-hub"`` on the wire: the eID Hub Authentication REST API as the vendor's
SDK and OpenAPI description give it (``broker-generations.md`` section 2)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import responses

from django_eid.brokers.eidhub import parse_record
from django_eid.client import EidClient
from django_eid.exceptions import EidApiError, EidProtocolError
from django_eid.records import Progress
from tests.brokers.successors import URLS
from tests.fixtures_client import CLIENT_ID, SECRET, SettingsWrapper, eid_settings_with
from tests.test_records import HOSTILE_URLS

ACCOUNT = "a-spge-JoXJ5et0okvIKE10LN70"
TOKEN_URL = "https://api.signicat.com/auth/open/connect/token"
SESSIONS = "https://api.signicat.com/auth/rest/sessions"
SESSION_ID = "fb432801-66f6-6141-9835-e2a3b42e2e35"
#: The retrieved success of the fact sheet (2.11), verbatim.
SUCCESS: dict[str, Any] = {
    "id": SESSION_ID,
    "accountId": ACCOUNT,
    "status": "SUCCESS",
    "provider": "nbid",
    "loa": "high",
    "subject": {
        "id": "opuc4kyFUWPkfdmfYTzjS89u6ZCWLHWLZfPR5hpBW24=",
        "idpId": "9578-6000-4-1663921",
        "name": "Kari Nordmann",
        "firstName": "Kari",
        "lastName": "Nordmann",
        "dateOfBirth": "1990-02-17",
        "nin": {"value": "17029012345", "issuingCountry": "NO", "type": "BIRTH"},
        "nbidIdp": "BID",
    },
    "environment": {"ipAddress": "203.0.113.7", "userAgent": "Mozilla/5.0 (X11; Linux x86_64)"},
    "flow": "redirect",
    "externalReference": "6f1c0d7e9b2a4c55a1e3f0b8d2c4e6a8",
    "sessionLifetime": 600,
    "expiresAt": "2025-03-04T10:25:00.0000000+00:00",
}


@pytest.fixture(autouse=True)
def _hub(settings: SettingsWrapper) -> None:
    # The API's own URLs, scope and client authentication: none of them set.
    settings.DJANGO_EID = eid_settings_with(
        BROKER_API="eid-hub", ACCOUNT_ID=ACCOUNT, BASE_URL=None, AUTH_URL=None, SCOPES=None
    )


def mock(rsps: responses.RequestsMock) -> None:
    token = {"access_token": "tok-1", "expires_in": 600, "token_type": "Bearer"}
    rsps.add(responses.POST, TOKEN_URL, json=token)
    created = {
        "id": SESSION_ID,
        "accountId": ACCOUNT,
        "authenticationUrl": "https://shop.app.signicat.com/broker/sp/login?messageId=21b0",
        "status": "CREATED",
    }
    rsps.add(responses.POST, SESSIONS, json=created)
    rsps.add(responses.GET, f"{SESSIONS}/{SESSION_ID}", json=SUCCESS)
    rsps.add(
        responses.POST, f"{SESSIONS}/{SESSION_ID}/cancel", json={**SUCCESS, "status": "CANCELLED"}
    )


def query(call: Any) -> dict[str, list[str]]:
    return parse_qs(urlsplit(call.request.url).query)


def test_the_token_endpoint_scope_and_body_credentials(wire: responses.RequestsMock) -> None:
    mock(wire)
    EidClient().get_token()
    (call,) = wire.calls
    assert call.request.url == TOKEN_URL
    form = parse_qs(call.request.body)
    assert form == {
        "grant_type": ["client_credentials"],
        "scope": ["signicat-api"],
        "client_id": [CLIENT_ID],
        "client_secret": [SECRET],
    }
    assert "Authorization" not in call.request.headers


def test_a_redirect_session_names_the_account(
    wire: responses.RequestsMock, settings: SettingsWrapper
) -> None:
    mock(wire)
    created = EidClient().create_session(
        return_urls=URLS, external_reference="ext-1", get_social_security_number=True
    )
    assert created.request_id == SESSION_ID
    call = wire.calls[-1]
    assert urlsplit(call.request.url).path == "/auth/rest/sessions"
    assert query(call) == {"signicat-accountId": [ACCOUNT]}
    assert json.loads(call.request.body) == {
        "flow": "redirect",
        "requestedAttributes": [
            "name",
            "firstName",
            "middleName",
            "lastName",
            "dateOfBirth",
            "idpId",
            "nin",
        ],
        "callbackUrls": {
            "success": URLS.success + "?externalId=ext-1",
            "abort": URLS.abort + "?externalId=ext-1",
            "error": URLS.error + "?externalId=ext-1",
        },
        "externalReference": "ext-1",
        # SESSION_MAX_AGE (1800): the broker deletes a session when it expires.
        "sessionLifetime": 1800,
    }


def test_every_option(wire: responses.RequestsMock, settings: SettingsWrapper) -> None:
    settings.DJANGO_EID = {
        **settings.DJANGO_EID,
        "REQUESTED_ATTRIBUTES": ["name", "dateOfBirth"],
        "SESSION_MAX_AGE": 60,
    }
    mock(wire)
    EidClient().create_session(
        return_urls=URLS,
        external_reference="ext-1",
        identity_provider="nbid",
        language="SV",
        iframe_domain="shop.example",
        prefilled_social_security_number="17029012345",
    )
    body = json.loads(wire.calls[-1].request.body)
    assert body["flow"] == "embedded"
    assert body["embeddedParentDomains"] == ["shop.example"]
    assert body["requestedAttributes"] == ["name", "dateOfBirth"]
    assert body["allowedProviders"] == ["nbid"]
    assert body["language"] == "sv"
    assert body["prefilledInput"] == {"nin": "17029012345"}
    assert body["sessionLifetime"] == 300  # the API's floor
    # The frame's end: the Success URL, decided by the session's record like any return.
    assert body["returnUrl"] == URLS.success + "?externalId=ext-1"


def test_no_requested_attributes_asks_for_none(
    wire: responses.RequestsMock, settings: SettingsWrapper
) -> None:
    settings.DJANGO_EID = {**settings.DJANGO_EID, "REQUESTED_ATTRIBUTES": []}
    mock(wire)
    EidClient().create_session(return_urls=URLS, external_reference="ext-1")
    assert json.loads(wire.calls[-1].request.body)["requestedAttributes"] == []


def test_the_sample_success(wire: responses.RequestsMock) -> None:
    mock(wire)
    record = EidClient().get_session(SESSION_ID)
    assert query(wire.calls[-1]) == {"signicat-accountId": [ACCOUNT]}
    assert record.progress is Progress.SUCCESS
    assert record.identity_provider == "nbid"
    assert record.identity_provider_unique_id == "9578-6000-4-1663921"
    assert (record.first_name, record.last_name) == ("Kari", "Nordmann")
    assert record.social_security_number == "17029012345"
    assert (record.national_id_country, record.national_id_type) == ("NO", "BIRTH")
    assert record.level_of_assurance == "high"
    assert str(record.stated_birth_date) == "1990-02-17"
    redacted = json.dumps(record.redacted())
    assert "17029012345" not in redacted
    echoed = parse_record({**SUCCESS, "prefilledInput": {"nin": "17029012345"}}, what="t")
    assert "17029012345" not in json.dumps(echoed.redacted())
    assert record.redacted()["subject"]["nin"] == {"issuingCountry": "NO", "type": "BIRTH"}


@pytest.mark.parametrize(
    ("status", "progress"),
    [
        ("SUCCESS", Progress.SUCCESS),
        ("success", Progress.SUCCESS),
        ("CREATED", Progress.IN_PROGRESS),
        ("WAITING_FOR_USER", Progress.IN_PROGRESS),
        ("ABORT", Progress.ABORTED),
        ("CANCELLED", Progress.ABORTED),
        ("EXPIRED", Progress.TIMED_OUT),
        ("ERROR", Progress.FAILED),
        ("INVALID", Progress.FAILED),
        ("SOMETHING_NEW", Progress.UNKNOWN),
    ],
)
def test_statuses(status: str, progress: Progress) -> None:
    assert parse_record({"id": "x", "status": status}, what="t").progress is progress


def test_a_three_letter_country_and_a_failure() -> None:
    record = parse_record(
        {
            "id": "x",
            "status": "ERROR",
            "statusDetail": "Authentication failed at the identity provider.",
            "subject": {
                "nin": {"value": "198112289874", "issuingCountry": "SWE", "type": "PERSON"}
            },
            "error": {"type": "https://x", "title": "Identity provider error", "code": "idp_error"},
        },
        what="t",
    )
    assert record.national_id_country == "SE"
    assert record.error is not None
    assert record.error.error_code == "idp_error"
    assert record.error.error_message == "Identity provider error"


def test_cancel(wire: responses.RequestsMock) -> None:
    mock(wire)
    client = EidClient()
    assert client.session_done(SESSION_ID) is None
    client.invalidate_session(SESSION_ID)
    call = wire.calls[-1]
    assert urlsplit(call.request.url).path == f"/auth/rest/sessions/{SESSION_ID}/cancel"
    assert query(call) == {"signicat-accountId": [ACCOUNT]}


def test_a_problem_is_an_api_error_naming_its_code(wire: responses.RequestsMock) -> None:
    mock(wire)
    problem = {
        "type": "https://developer.signicat.com/docs/error-codes/",
        "title": "Invalid request parameter",
        "code": "invalid_request_parameter",
        "status": 400,
        "detail": "Your request body parameters have failed validation.",
        "invalidParams": [{"name": "callbackUrls.success", "reason": "must be an https URL"}],
    }
    wire.replace(responses.POST, SESSIONS, json=problem, status=400)
    with pytest.raises(EidApiError) as info:
        EidClient().create_session(return_urls=URLS, external_reference="e")
    message = str(info.value)
    assert "invalid_request_parameter" in message
    assert "callbackUrls.success: must be an https URL" in message


@pytest.mark.parametrize(
    "number", ["198112289874", "19811228-9874", "811228-9874", "0707614285", "131052-308T"]
)
def test_no_nordic_number_reaches_an_error_message(
    wire: responses.RequestsMock, number: str
) -> None:
    mock(wire)
    problem = {
        "title": "Invalid request parameter",
        "code": "invalid_request_parameter",
        "invalidParams": [{"name": "prefilledInput.nin", "reason": f"{number} is not valid"}],
    }
    wire.replace(responses.POST, SESSIONS, json=problem, status=400)
    with pytest.raises(EidApiError) as info:
        EidClient().create_session(return_urls=URLS, external_reference="e")
    assert number not in str(info.value)
    assert "prefilledInput.nin" in str(info.value)


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_a_url_without_a_well_formed_host_is_refused(
    wire: responses.RequestsMock, url: str
) -> None:
    """The frame page puts the URL's origin into its Content-Security-Policy."""
    mock(wire)
    created = {"id": SESSION_ID, "authenticationUrl": url}
    wire.replace(responses.POST, SESSIONS, json=created, status=201)
    with pytest.raises(EidProtocolError, match="authenticationUrl"):
        EidClient().create_session(return_urls=URLS, external_reference="e")
