"""The whole flow through the HTML pages with each successor API, the broker answering as
its API does (``responses``): start, the return with ``sessionId``, the record, the row.

The sandbox and the ``eid_broker`` fixture speak v1; these tests prove the views and the
flow core use only the broker-API interface, whatever the API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import responses
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from django_eid.models import Identification
from tests.fixtures_client import SettingsWrapper, eid_settings_with
from tests.fixtures_views import alice, logged_in

pytestmark = pytest.mark.django_db
__all__ = ["alice"]  # a fixture

Status = Identification.Status
SESSION_ID = "fb432801-66f6-6141-9835-e2a3b42e2e35"
UA = "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0"
#: Each API: settings, where its sessions are, its create answer, its success record.
APIS: dict[str, dict[str, Any]] = {
    "v2": {
        "settings": {"BROKER_API": "v2"},
        "token": "https://auth.broker.test/oauth/connect/token",
        "sessions": "https://api.broker.test/identification/v2/sessions",
        "created": (
            201,
            {"id": SESSION_ID, "url": "https://id.broker.test/login", "status": "created"},
        ),
        "urls": lambda body: body["redirectSettings"],
        "success": {
            "id": SESSION_ID,
            "status": "success",
            "provider": "no_bankid_netcentric",
            "identity": {
                "providerId": "9578-6000-4-351726",
                "fullName": "Kari Marie Nordmann",
                "firstName": "Kari",
                "lastName": "Nordmann",
                "dateOfBirth": "1985-03-14",
                "nin": "14038512324",
            },
            "environment": {"userAgent": UA, "ipAddress": "127.0.0.1"},
        },
        "aborted": {"id": SESSION_ID, "status": "user_aborted"},
    },
    "eid-hub": {
        "settings": {"BROKER_API": "eid-hub", "ACCOUNT_ID": "a-spge-1", "SCOPES": None},
        "token": "https://auth.broker.test/auth/open/connect/token",
        "sessions": "https://api.broker.test/auth/rest/sessions",
        "created": (200, {"id": SESSION_ID, "authenticationUrl": "https://id.broker.test/login"}),
        "urls": lambda body: body["callbackUrls"],
        "success": {
            "id": SESSION_ID,
            "status": "SUCCESS",
            "provider": "nbid",
            "loa": "substantial",
            "subject": {
                "idpId": "9578-6000-4-351726",
                "name": "Kari Marie Nordmann",
                "firstName": "Kari",
                "lastName": "Nordmann",
                "dateOfBirth": "1985-03-14",
                "nin": {"value": "14038512324", "issuingCountry": "NO", "type": "BIRTH"},
            },
            "environment": {"userAgent": UA, "ipAddress": "127.0.0.1"},
        },
        "aborted": {"id": SESSION_ID, "status": "ABORT"},
    },
}


@pytest.fixture(params=sorted(APIS))
def api(request: pytest.FixtureRequest, settings: SettingsWrapper) -> Iterator[dict[str, Any]]:
    spec = APIS[request.param]
    settings.DJANGO_EID = eid_settings_with(**spec["settings"], GET_SOCIAL_SECURITY_NUMBER=True)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        token = {"access_token": "tok", "expires_in": 600, "token_type": "Bearer"}
        rsps.add(responses.POST, spec["token"], json=token)
        status, body = spec["created"]
        rsps.add(responses.POST, spec["sessions"], json=body, status=status)
        yield {**spec, "mock": rsps}


def start(api: dict[str, Any], client: Client) -> tuple[Identification, dict[str, str]]:
    """Start in the HTML flow; the row, and the return URLs the broker was given."""
    response = client.post("/eid/start/", {"display": "redirect"})
    assert response.status_code == 302, response.content
    assert response["Location"] == "https://id.broker.test/login"
    create = next(
        c for c in api["mock"].calls if c.request.method == "POST" and "sessions" in c.request.url
    )
    urls = api["urls"](json.loads(create.request.body))
    row = Identification.objects.get()
    assert row.request_id == SESSION_ID
    return row, urls


def returned(url: str, session_id: str = SESSION_ID) -> str:
    """Where the broker sends the browser: the URL with ``sessionId`` appended."""
    parts = urlsplit(url)
    assert parse_qs(parts.query).keys() == {"externalId"}
    return f"{parts.path}?{parts.query}&sessionId={session_id}"


def record(api: dict[str, Any], body: dict[str, Any]) -> None:
    api["mock"].add(responses.GET, f"{api['sessions']}/{SESSION_ID}", json=body)


def test_a_success_is_stored(api: dict[str, Any], alice: AbstractBaseUser) -> None:
    client = logged_in(alice, HTTP_USER_AGENT=UA)
    row, urls = start(api, client)
    success = urls.get("success") or urls["successUrl"]
    record(api, api["success"])
    response = client.get(returned(success))
    assert response.status_code == 302
    row.refresh_from_db()
    assert row.status == Status.SUCCESS
    assert (row.first_name, row.last_name) == ("Kari", "Nordmann")
    assert str(row.date_of_birth) == "1985-03-14"
    assert row.social_security_number == "14038512324"
    assert row.national_id_country == "NO"
    assert row.level_of_assurance == api["success"].get("loa", "")
    assert "14038512324" not in json.dumps(row.raw)


def test_another_session_id_is_refused(api: dict[str, Any], alice: AbstractBaseUser) -> None:
    client = logged_in(alice, HTTP_USER_AGENT=UA)
    row, urls = start(api, client)
    record(api, api["success"])
    success = urls.get("success") or urls["successUrl"]
    assert client.get(returned(success, "another-session")).status_code == 400
    tampered = returned(success).replace("externalId=", "externalId=x")
    assert client.get(tampered).status_code == 400
    row.refresh_from_db()
    assert row.status == Status.PENDING


def test_an_abort_ends_the_row(api: dict[str, Any], alice: AbstractBaseUser) -> None:
    client = logged_in(alice, HTTP_USER_AGENT=UA)
    row, urls = start(api, client)
    abort = urls.get("abort") or urls["abortUrl"]
    client.get(returned(abort))
    row.refresh_from_db()
    assert row.status == Status.ABORTED


def test_settling_without_the_browser_asks_the_record(
    api: dict[str, Any], alice: AbstractBaseUser
) -> None:
    """No status call in these APIs: the record decides, under the same-device rule."""
    from django_eid import flow

    client = logged_in(alice, HTTP_USER_AGENT=UA)
    row, _urls = start(api, client)
    record(api, api["success"])
    assert flow.settle(row).outcome == "succeeded"
    row.refresh_from_db()
    assert row.status == Status.SUCCESS
