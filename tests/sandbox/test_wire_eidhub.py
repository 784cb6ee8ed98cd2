"""The sandbox speaking the eID Hub Authentication REST API: checklist 2.12 of
broker-generations.md.

Over HTTP with Django's test client (the sandbox mounted at ``/eid-sandbox/``), over
``responses`` with the ``eid_broker`` fixture, and on a clock the test moves.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from django.test import Client

from django_eid.sandbox.apis import EidHubSandbox
from django_eid.sandbox.broker import SandboxBroker
from django_eid.sandbox.fake import EidBroker
from django_eid.sandbox.persons import builtin_persons
from tests.fixtures_client import CLIENT_ID as SUITE_CLIENT_ID
from tests.fixtures_client import SECRET as SUITE_SECRET
from tests.sandbox.conftest import (
    BASIC,
    CLIENT_ID,
    FORM,
    SECRET,
    Clock,
    bearer_of,
    client_credentials,
)

TOKEN = "/eid-sandbox/auth/open/connect/token"
SESSIONS = "/eid-sandbox/auth/rest/sessions"
PROBLEM = "application/problem+json"
CALLBACKS = {
    "success": "https://shop.example/eid/ok",
    "abort": "https://shop.example/eid/abort?keep=1",
    "error": "https://shop.example/eid/error",
}
PERSONS = builtin_persons()


def claims(access_token: str) -> dict[str, Any]:
    payload = access_token.split(".")[1]
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * 4))
    return decoded


def token(client: Client, *, basic: bool = False, scope: str = "signicat-api") -> Any:
    return client_credentials(client, TOKEN, scope, basic=basic)


def bearer(client: Client) -> dict[str, str]:
    return bearer_of(token(client))


def create(client: Client, query: str = "", **fields: Any) -> Any:
    body = {"flow": "redirect", "requestedAttributes": [], "callbackUrls": CALLBACKS, **fields}
    body = {key: value for key, value in body.items() if value is not None}
    return client.post(
        SESSIONS + query, json.dumps(body), content_type="application/json", headers=bearer(client)
    )


def retrieve(client: Client, session_id: str) -> Any:
    return client.get(f"{SESSIONS}/{session_id}", headers=bearer(client))


def end(client: Client, url: str, action: str = "identify", **form: str) -> Any:
    """Open the hosted page at ``url`` and end the session there."""
    path = urlsplit(url).path
    assert client.get(path).status_code == 200
    return client.post(path, {"action": action, "person": "NORWEGIAN", **form})


# -- token ----------------------------------------------------------------------------------
@pytest.mark.parametrize("basic", [False, True], ids=["client_secret_post", "basic"])
def test_the_token_is_jwt_shaped_with_the_account_and_lasts_600_s(
    client: Client, basic: bool
) -> None:
    response = token(client, basic=basic)
    assert response.status_code == 200
    body = response.json()
    assert body["expires_in"] == 600
    assert body["token_type"] == "Bearer"
    account = claims(body["access_token"])["account_id"]
    assert account.startswith("a-sandbox-")
    created = create(client, query=f"?signicat-accountId={account}")
    assert created.status_code == 200
    assert created.json()["accountId"] == account


def test_the_token_endpoint_wants_the_hubs_scope(client: Client) -> None:
    response = token(client, scope="identify")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_scope"


def test_a_v1_token_is_refused_with_a_problem(client: Client) -> None:
    v1 = client.post(
        "/eid-sandbox/oauth/connect/token",
        "grant_type=client_credentials&scope=identify",
        content_type=FORM,
        headers={"Authorization": BASIC},
    ).json()["access_token"]
    response = client.post(
        SESSIONS, "{}", content_type="application/json", headers={"Authorization": f"Bearer {v1}"}
    )
    assert response.status_code == 403
    assert response["Content-Type"] == PROBLEM
    assert response.json()["code"] == "insufficient_scope"


def test_another_account_is_refused(client: Client) -> None:
    response = create(client, query="?signicat-accountId=a-someone-else")
    assert response.status_code == 403
    assert response.json()["code"] == "invalid_account_id"


# -- create -----------------------------------------------------------------------------------
def test_create_answers_200_with_callback_urls_carrying_the_session_id(client: Client) -> None:
    response = create(
        client,
        allowedProviders=["nbid"],
        language="no",
        requestedLoa="high",
        requestedAttributes=["name", "dateOfBirth", "nin"],
        externalReference="6f1c0d7e",
        prefilledInput={"nin": PERSONS.NORWEGIAN.national_identity_number},
        tags=["django-eid"],
    )
    assert response.status_code == 200
    body = response.json()
    session_id = body["id"]
    assert str(uuid.UUID(session_id)) == session_id
    assert body["status"] == "CREATED"
    assert urlsplit(body["authenticationUrl"]).path == f"/eid-sandbox/login/{session_id}/"
    assert body["callbackUrls"] == {
        "success": f"https://shop.example/eid/ok?sessionId={session_id}",
        "abort": f"https://shop.example/eid/abort?keep=1&sessionId={session_id}",
        "error": f"https://shop.example/eid/error?sessionId={session_id}",
    }
    assert body["sessionLifetime"] == 1200
    assert body["expiresAt"].endswith("+00:00")
    assert body["allowedProviders"] == ["nbid"]
    assert body["language"] == "no"
    assert body["flow"] == "redirect"
    assert body["requestedAttributes"] == ["name", "dateOfBirth", "nin"]
    assert body["requestedLoa"] == "high"
    assert body["externalReference"] == "6f1c0d7e"
    assert body["tags"] == ["django-eid"]


@pytest.mark.parametrize(("given", "lifetime"), [(None, 1200), (60, 300), (299, 300), (600, 600)])
def test_session_lifetime_default_and_floor(
    client: Client, given: int | None, lifetime: int
) -> None:
    assert create(client, sessionLifetime=given).json()["sessionLifetime"] == lifetime


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"flow": None}, "flow"),
        ({"flow": "iframe"}, "flow"),
        ({"requestedAttributes": None}, "requestedAttributes"),
        ({"callbackUrls": None}, "callbackUrls"),
        ({"callbackUrls": {**CALLBACKS, "abort": None}}, "callbackUrls.abort"),
        ({"callbackUrls": {**CALLBACKS, "error": "http://shop.example/e"}}, "callbackUrls.error"),
        ({"requestedLoa": "extreme"}, "requestedLoa"),
        ({"allowedProviders": ["x" * 31]}, "allowedProviders"),
        ({"sessionLifetime": "long"}, "sessionLifetime"),
        ({"flow": "embedded"}, "embeddedParentDomains"),
    ],
)
def test_invalid_create_requests_are_problems_with_invalid_params(
    client: Client, fields: dict[str, Any], name: str
) -> None:
    body = {"flow": "redirect", "requestedAttributes": [], "callbackUrls": CALLBACKS, **fields}
    body = {key: value for key, value in body.items() if value is not None}
    response = client.post(
        SESSIONS, json.dumps(body), content_type="application/json", headers=bearer(client)
    )
    assert response.status_code == 400
    assert response["Content-Type"] == PROBLEM
    problem = response.json()
    assert set(problem) == {"type", "title", "code", "status", "detail", "traceId", "invalidParams"}
    assert problem["status"] == 400
    assert name in [param["name"] for param in problem["invalidParams"]]


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8000/eid/ok", "http://localhost/ok", "http://testserver/ok"]
)
def test_http_callbacks_are_accepted_on_loopback(client: Client, url: str) -> None:
    callbacks = {"success": url, "abort": url, "error": url}
    assert create(client, callbackUrls=callbacks).status_code == 200


def test_headless_needs_no_callbacks(client: Client) -> None:
    response = create(client, flow="headless", callbackUrls=None)
    assert response.status_code == 200
    assert "authenticationUrl" not in response.json()
    assert "callbackUrls" not in response.json()


# -- the hosted page and the way back ------------------------------------------------------------
@pytest.mark.parametrize(
    ("action", "form", "callback", "status"),
    [
        ("identify", {}, "success", "SUCCESS"),
        ("abort", {}, "abort", "ABORT"),
        ("fail", {"error_status": "LOGIN"}, "error", "ERROR"),
        ("fail", {"error_status": "TIMEOUT", "record_status": "TIMEOUT"}, "error", "EXPIRED"),
    ],
)
def test_the_hosted_page_returns_to_the_callback_with_the_session_id(
    client: Client, action: str, form: dict[str, str], callback: str, status: str
) -> None:
    body = create(client).json()
    response = end(client, body["authenticationUrl"], action, **form)
    assert response.status_code == 302
    assert response["Location"] == body["callbackUrls"][callback]
    assert retrieve(client, body["id"]).json()["status"] == status


def test_an_error_carries_status_detail_and_the_error_object(client: Client) -> None:
    body = create(client).json()
    end(client, body["authenticationUrl"], "fail", error_status="PKI_BLOCKED")
    session = retrieve(client, body["id"]).json()
    assert session["statusDetail"]
    assert set(session["error"]) == {"type", "title", "detail", "code"}
    assert session["error"]["code"] == "pki_blocked"
    assert "subject" not in session


# -- retrieve -------------------------------------------------------------------------------------
def test_statuses_in_upper_case_and_the_subject(client: Client) -> None:
    body = create(client, requestedAttributes=["name", "dateOfBirth", "nin"]).json()
    assert retrieve(client, body["id"]).json()["status"] == "CREATED"
    client.get(urlsplit(body["authenticationUrl"]).path)
    assert retrieve(client, body["id"]).json()["status"] == "WAITING_FOR_USER"
    client.post(
        urlsplit(body["authenticationUrl"]).path, {"action": "identify", "person": "NORWEGIAN"}
    )
    session = retrieve(client, body["id"]).json()
    person = PERSONS.NORWEGIAN
    assert session["status"] == "SUCCESS"
    assert session["provider"] == "nbid"
    assert session["loa"] == "high"
    subject = session["subject"]
    assert subject["idpId"] == person.identity_provider_unique_id
    assert subject["name"] == "Kari Marie Nordmann"
    assert (subject["firstName"], subject["middleName"], subject["lastName"]) == (
        "Kari",
        "Marie",
        "Nordmann",
    )
    assert subject["dateOfBirth"] == "1985-03-14"
    assert subject["nin"] == {
        "value": person.national_identity_number,
        "issuingCountry": "NO",
        "type": "BIRTH",
    }
    assert subject["id"]
    assert set(session["environment"]) == {"ipAddress", "userAgent"}


@pytest.mark.parametrize(
    ("person", "provider", "country", "loa"),
    [
        ("SWEDISH", "sbid", "SE", "substantial"),
        ("DANISH", "mitid", "DK", "substantial"),
        ("FINNISH", "ftn", "FI", "substantial"),
        ("D_NUMBER", "nbid", "NO", "high"),
    ],
)
def test_numbers_of_each_country_with_their_type(
    client: Client, person: str, provider: str, country: str, loa: str
) -> None:
    body = create(client, requestedAttributes=["nin"]).json()
    end(client, body["authenticationUrl"], person=person)
    session = retrieve(client, body["id"]).json()
    assert session["provider"] == provider
    assert session["loa"] == loa
    nin = session["subject"]["nin"]
    assert nin["issuingCountry"] == country
    assert nin["type"] == ("BIRTH" if country == "NO" else "PERSON")


def test_the_number_only_when_requested_and_the_requested_loa(client: Client) -> None:
    body = create(client, requestedAttributes=["name"], requestedLoa="substantial").json()
    end(client, body["authenticationUrl"])
    session = retrieve(client, body["id"]).json()
    assert "nin" not in session["subject"]
    assert session["loa"] == "substantial"


def test_unknown_ids_are_404_problems(client: Client) -> None:
    response = retrieve(client, str(uuid.uuid4()))
    assert response.status_code == 404
    assert response["Content-Type"] == PROBLEM
    assert response.json()["status"] == 404


# -- cancel ---------------------------------------------------------------------------------------
def test_cancel_answers_200_with_the_cancelled_session(client: Client) -> None:
    body = create(client, requestedAttributes=["nin"]).json()
    end(client, body["authenticationUrl"])
    response = client.post(f"{SESSIONS}/{body['id']}/cancel", headers=bearer(client))
    assert response.status_code == 200
    assert response.json()["status"] == "CANCELLED"
    assert "subject" not in response.json()
    assert retrieve(client, body["id"]).json()["status"] == "CANCELLED"


def test_cancelling_an_unknown_session_is_a_404_problem(client: Client) -> None:
    response = client.post(f"{SESSIONS}/{uuid.uuid4()}/cancel", headers=bearer(client))
    assert response.status_code == 404
    assert response["Content-Type"] == PROBLEM


# -- lifetime (on the test's clock) ---------------------------------------------------------------
def _hub(clocked: SandboxBroker) -> tuple[EidHubSandbox, str]:
    api = EidHubSandbox(clocked)
    form = f"grant_type=client_credentials&scope=signicat-api&client_id={CLIENT_ID}"
    form += f"&client_secret={SECRET}"
    grant = api.token(authorization=None, content_type=FORM, body=form.encode())
    return api, "Bearer " + grant.body["access_token"]


@pytest.mark.parametrize(("given", "lifetime"), [(None, 1200), (100, 300)])
def test_the_session_is_deleted_at_expiry(
    clocked: SandboxBroker, clock: Clock, given: int | None, lifetime: int
) -> None:
    api, auth = _hub(clocked)
    fields: dict[str, Any] = {"flow": "redirect", "requestedAttributes": ["nin"]}
    fields["callbackUrls"] = CALLBACKS
    if given is not None:
        fields["sessionLifetime"] = given
    created = api.create_session(authorization=auth, query="", body=json.dumps(fields).encode())
    session_id = created.body["id"]
    clocked.identify(session_id, PERSONS.NORWEGIAN)
    clock.now += lifetime - 1
    auth = _hub(clocked)[1]  # tokens last 600 s
    assert api.get_session(authorization=auth, query="", session_id=session_id).status == 200
    clock.now += 1
    gone = api.get_session(authorization=auth, query="", session_id=session_id)
    assert gone.status == 404
    assert gone.headers["Content-Type"] == PROBLEM
    assert clocked.session(session_id) is None


def test_an_unfinished_session_closes_its_page_at_expiry(
    clocked: SandboxBroker, clock: Clock
) -> None:
    api, auth = _hub(clocked)
    fields = {"flow": "redirect", "requestedAttributes": [], "callbackUrls": CALLBACKS}
    session_id = api.create_session(authorization=auth, query="", body=json.dumps(fields).encode())
    clock.now += 1200
    assert clocked.session(session_id.body["id"]) is None


# -- through responses: the eid_broker fixture -----------------------------------------------------
def test_the_fixture_serves_the_hub_and_records_its_calls(eid_broker: EidBroker) -> None:
    grant = requests.post(
        "https://auth.broker.test/auth/open/connect/token",
        data={
            "grant_type": "client_credentials",
            "scope": "signicat-api",
            "client_id": SUITE_CLIENT_ID,
            "client_secret": SUITE_SECRET,
        },
        timeout=5,
    ).json()
    account = claims(grant["access_token"])["account_id"]
    headers = {"Authorization": "Bearer " + grant["access_token"]}
    sessions = "https://api.broker.test/auth/rest/sessions"
    params = {"signicat-accountId": account}
    body = {"flow": "redirect", "requestedAttributes": ["nin"], "callbackUrls": CALLBACKS}
    created = requests.post(sessions, json=body, params=params, headers=headers, timeout=5)
    assert created.status_code == 200
    session_id = created.json()["id"]
    assert eid_broker.create_requests == [body]
    assert eid_broker.issued_tokens == [grant["access_token"]]
    returned = eid_broker.complete(eid_broker.persons.SWEDISH)
    assert returned == created.json()["callbackUrls"]["success"]
    got = requests.get(f"{sessions}/{session_id}", params=params, headers=headers, timeout=5)
    assert got.json()["subject"]["nin"]["issuingCountry"] == "SE"
    assert eid_broker.retrieve_requests == [session_id]
    cancelled = requests.post(f"{sessions}/{session_id}/cancel", headers=headers, timeout=5)
    assert cancelled.json()["status"] == "CANCELLED"
    assert eid_broker.invalidate_requests == [session_id]
    assert eid_broker.token_requests == 1


def test_faults_are_injected_by_endpoint_name(eid_broker: EidBroker) -> None:
    eid_broker.fail_next("token", 503)
    url = "https://auth.broker.test/auth/open/connect/token"
    form = {"grant_type": "client_credentials", "scope": "signicat-api"}
    assert (
        requests.post(url, data=form, auth=(SUITE_CLIENT_ID, SUITE_SECRET), timeout=5).status_code
        == 503
    )
    grant = requests.post(url, data=form, auth=(SUITE_CLIENT_ID, SUITE_SECRET), timeout=5).json()
    headers = {"Authorization": "Bearer " + grant["access_token"]}
    sessions = "https://api.broker.test/auth/rest/sessions"
    body = {"flow": "redirect", "requestedAttributes": [], "callbackUrls": CALLBACKS}
    session_id = requests.post(sessions, json=body, headers=headers, timeout=5).json()["id"]
    eid_broker.inject("retrieve", 404, body={"title": "gone"}, request_id=session_id)
    assert requests.get(f"{sessions}/{session_id}", headers=headers, timeout=5).status_code == 404
    eid_broker.heal("retrieve")
    assert requests.get(f"{sessions}/{session_id}", headers=headers, timeout=5).status_code == 200
    eid_broker.fail_next("invalidate", 500)
    cancel = requests.post(f"{sessions}/{session_id}/cancel", headers=headers, timeout=5)
    assert cancel.status_code == 500
