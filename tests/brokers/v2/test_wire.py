"""``BROKER_API = "v2"`` on the wire: Express identification v2 as the vendor's SDKs and
migration guide describe it (``broker-generations.md`` section 1), its samples as answers."""

from __future__ import annotations

import json
from typing import Any

import pytest
import responses

from django_eid.brokers import api_class
from django_eid.brokers.v2 import V2Api, parse_record
from django_eid.client import EidClient
from django_eid.exceptions import EidApiError, EidProtocolError
from django_eid.records import Progress
from tests.brokers.successors import URLS
from tests.fixtures_client import CLIENT_ID, SECRET, SettingsWrapper, eid_settings_with
from tests.test_records import HOSTILE_URLS

BASE = "https://api.broker.test"
TOKEN_URL = "https://auth.broker.test/oauth/connect/token"
SESSIONS = f"{BASE}/identification/v2/sessions"
SESSION_ID = "a3f1c9e27b5d4e0c9f1a2b3c4d5e6f70"
#: The retrieved success of the fact sheet (1.13), verbatim.
SUCCESS: dict[str, Any] = {
    "id": SESSION_ID,
    "status": "success",
    "created": "2025-03-04T10:15:00Z",
    "expires": "2025-03-04T10:25:00Z",
    "provider": "no_bankid_netcentric",
    "flow": "redirect",
    "language": "no",
    "externalReference": "6f1c0d7e9b2a4c55a1e3f0b8d2c4e6a8",
    "identity": {
        "providerId": "9578-6000-4-351726",
        "fullName": "Kari Marie Nordmann",
        "firstName": "Kari",
        "middleName": "Marie",
        "lastName": "Nordmann",
        "dateOfBirth": "1971-12-31",
        "nin": "31127112345",
    },
    "environment": {"userAgent": "Mozilla/5.0 (X11; Linux x86_64)", "ipAddress": "203.0.113.7"},
    "auditTrail": {"certificate": "MIIFbjCCBFagAwIBAgI...", "events": []},
}


@pytest.fixture(autouse=True)
def _v2(settings: SettingsWrapper) -> None:
    settings.DJANGO_EID = eid_settings_with(BROKER_API="v2", SCOPES=None)


def mock(rsps: responses.RequestsMock) -> None:
    token = {"access_token": "tok-1", "expires_in": 3600, "token_type": "Bearer"}
    rsps.add(responses.POST, TOKEN_URL, json=token)
    created = {"id": SESSION_ID, "url": f"https://id.broker.test/login?sid={SESSION_ID}"}
    rsps.add(responses.POST, SESSIONS, json={**created, "status": "created"}, status=201)
    rsps.add(responses.GET, f"{SESSIONS}/{SESSION_ID}", json=SUCCESS)
    rsps.add(responses.POST, f"{SESSIONS}/{SESSION_ID}/invalidate", status=204)


def test_the_token_is_v1_s(wire: responses.RequestsMock) -> None:
    mock(wire)
    EidClient().get_token()
    (call,) = wire.calls
    assert call.request.url == TOKEN_URL
    assert call.request.body == "grant_type=client_credentials&scope=identify"
    assert call.request.headers["Authorization"].startswith("Basic ")
    assert SECRET not in str(call.request.body)
    assert CLIENT_ID not in str(call.request.body)


def test_a_redirect_session(wire: responses.RequestsMock) -> None:
    mock(wire)
    created = EidClient().create_session(return_urls=URLS, external_reference="ext-1")
    assert created.request_id == SESSION_ID
    call = wire.calls[-1]
    assert call.request.url == SESSIONS
    assert call.request.headers["Content-Type"] == "application/json"
    assert json.loads(call.request.body) == {
        "flow": "redirect",
        "include": ["name", "date_of_birth"],
        "redirectSettings": {
            # The session id is appended by the broker; the external reference is django-eid's.
            "successUrl": URLS.success + "?externalId=ext-1",
            "abortUrl": URLS.abort + "?externalId=ext-1",
            "errorUrl": URLS.error + "?externalId=ext-1",
        },
        "externalReference": "ext-1",
    }


def test_every_option(wire: responses.RequestsMock) -> None:
    mock(wire)
    EidClient().create_session(
        return_urls=URLS,
        external_reference="ext 2/+",
        identity_provider="no_bankid_mobile",
        language="NO",
        get_social_security_number=True,
        iframe_domain="shop.example:8443",
        iframe_web_messaging=True,
        prefilled_social_security_number="31127112345",
    )
    body = json.loads(wire.calls[-1].request.body)
    assert body["flow"] == "iframe"
    assert body["include"] == ["name", "date_of_birth", "nin"]
    assert body["allowedProviders"] == ["no_bankid_mobile"]
    assert body["language"] == "no"
    assert body["iframeSettings"] == {"parentDomains": ["shop.example:8443"]}
    assert body["prefilledInput"] == {"nin": "31127112345"}
    assert body["redirectSettings"]["successUrl"] == URLS.success + "?externalId=ext%202%2F%2B"


def test_the_sample_success_reads_as_the_same_record(wire: responses.RequestsMock) -> None:
    mock(wire)
    record = EidClient().get_session(SESSION_ID)
    assert wire.calls[-1].request.url == f"{SESSIONS}/{SESSION_ID}"
    assert record.progress is Progress.SUCCESS
    assert record.is_success
    assert (record.name, record.first_name, record.middle_name, record.last_name) == (
        "Kari Marie Nordmann",
        "Kari",
        "Marie",
        "Nordmann",
    )
    assert record.identity_provider == "no_bankid_netcentric"
    assert record.identity_provider_unique_id == "9578-6000-4-351726"
    assert record.social_security_number == "31127112345"
    assert record.national_id_country == "NO"
    assert str(record.birth_date) == "1971-12-31"
    assert record.environment_info.ip_address == "203.0.113.7"
    assert "31127112345" not in json.dumps(record.redacted())
    echoed = parse_record({**SUCCESS, "prefilledInput": {"nin": "31127112345"}}, what="t")
    assert "31127112345" not in json.dumps(echoed.redacted())
    assert record.redacted()["identity"]["firstName"] == "Kari"


@pytest.mark.parametrize(
    ("status", "progress"),
    [
        ("success", Progress.SUCCESS),
        ("SUCCESS", Progress.SUCCESS),
        ("created", Progress.IN_PROGRESS),
        ("user_initiated", Progress.IN_PROGRESS),
        ("user_aborted", Progress.ABORTED),
        ("timed_out", Progress.TIMED_OUT),
        ("failed", Progress.FAILED),
        ("invalidated", Progress.FAILED),
        ("something_new", Progress.UNKNOWN),
        ("", Progress.UNKNOWN),
    ],
)
def test_statuses_in_either_casing(status: str, progress: Progress) -> None:

    body = {"id": "x", "status": status, "identity": {"providerId": "9578-6000-4-351726"}}
    assert parse_record(body, what="t").progress is progress


def test_a_failure_keeps_the_broker_s_codes() -> None:

    body = {
        "id": "b81d",
        "status": "failed",
        "provider": "no_bankid_mobile",
        "error": {"code": "provider_error", "message": "PKI blocked.", "providerCode": "C307"},
    }
    record = parse_record(body, what="t")
    assert record.progress is Progress.FAILED
    assert record.error is not None
    assert (record.error.error_code, record.error.native_error_code) == ("provider_error", "C307")


def test_a_date_with_a_time_is_a_date() -> None:

    body = {"id": "x", "status": "success", "identity": {"dateOfBirth": "1971-12-31T00:00:00"}}
    assert str(parse_record(body, what="t").stated_birth_date) == "1971-12-31"


@pytest.mark.parametrize("body", [[], {"id": 5}, {"identity": "Kari"}, {"error": ["x"]}])
def test_answers_outside_the_contract(body: Any) -> None:

    with pytest.raises(EidProtocolError):
        parse_record(body, what="t")


def test_no_status_call_and_invalidate(wire: responses.RequestsMock) -> None:
    mock(wire)
    client = EidClient()
    assert client.session_done(SESSION_ID) is None
    client.invalidate_session(SESSION_ID)
    assert wire.calls[-1].request.url == f"{SESSIONS}/{SESSION_ID}/invalidate"
    assert wire.calls[-1].request.method == "POST"


def test_an_unknown_session_is_an_api_error(wire: responses.RequestsMock) -> None:
    mock(wire)
    wire.replace(
        responses.GET,
        f"{SESSIONS}/{SESSION_ID}",
        json={"message": "Session not found", "code": "ID-1000"},
        status=404,
    )
    with pytest.raises(EidApiError, match="ID-1000"):
        EidClient().get_session(SESSION_ID)


def test_the_return_carries_the_session_id() -> None:
    api = api_class("v2")
    assert api is V2Api
    urls = api.return_urls(URLS, external_reference="e")
    # The broker appends its own parameter: with "&", since django-eid's is there.
    back = {"sessionId": [SESSION_ID], "externalId": ["e"]}
    ids = api.returned_ids(back)
    assert (list(ids.request_id), list(ids.external_id), ids.error_status) == (
        [SESSION_ID],
        ["e"],
        "",
    )
    assert urls.success.endswith("?externalId=e")
    assert api.provider_country("se_bankid") == "SE"
    assert api.provider_country("mitid") == "DK"
    assert api.provider_country("ftn") == "FI"
    assert api.provider_country("github") is None


def test_a_success_without_its_identity_identifies_nobody() -> None:
    """v2 drops the identity an hour after the session began and still says "success"."""
    gone = {k: v for k, v in SUCCESS.items() if k not in ("identity", "environment")}
    record = parse_record(gone, what="t")
    assert record.progress is Progress.FAILED
    assert not record.is_success


def test_personal_echoes_stay_out_of_raw_extra_and_repr() -> None:
    body = {**SUCCESS, "prefilledInput": {"nin": "198112289874"}, "departmentId": "d-1"}
    record = parse_record(body, what="t")
    for text in (json.dumps(record.redacted()), repr(record), json.dumps(dict(record.extra))):
        assert "198112289874" not in text
        assert "31127112345" not in text
        assert "MIIFbjCCBFagAwIBAgI" not in text  # the audit trail's certificate
    assert dict(record.extra)["departmentId"] == "d-1"


@pytest.mark.parametrize("session_id", ["..", ".", "a/b", "", "x" * 201, "a b"])
def test_an_id_that_is_no_session_id_is_refused(
    wire: responses.RequestsMock, session_id: str
) -> None:
    """It goes into the path of every later call: ``..`` would change which."""
    mock(wire)
    created = {"id": session_id, "url": "https://id.broker.test/login"}
    wire.replace(responses.POST, SESSIONS, json=created, status=201)
    with pytest.raises(EidProtocolError):
        EidClient().create_session(return_urls=URLS, external_reference="e")


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_a_url_without_a_well_formed_host_is_refused(
    wire: responses.RequestsMock, url: str
) -> None:
    """The frame page puts the URL's origin into its Content-Security-Policy."""
    mock(wire)
    created = {"id": SESSION_ID, "url": url}
    wire.replace(responses.POST, SESSIONS, json=created, status=201)
    with pytest.raises(EidProtocolError, match="url"):
        EidClient().create_session(return_urls=URLS, external_reference="e")
