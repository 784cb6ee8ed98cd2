"""The sandbox speaking Express identification v2: checklist 1.14 of broker-generations.md.

Over HTTP with Django's test client (the sandbox mounted at ``/eid-sandbox/``), over
``responses`` with the ``eid_broker`` fixture, and on a clock the test moves.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.test import Client

from django_eid.sandbox.apis import V2Sandbox
from django_eid.sandbox.broker import SandboxBroker
from django_eid.sandbox.fake import EidBroker
from django_eid.sandbox.persons import builtin_persons
from django_eid.sandbox.wire import append_session_id
from tests.fixtures_client import CLIENT_ID as SUITE_CLIENT_ID
from tests.fixtures_client import SECRET as SUITE_SECRET
from tests.sandbox.conftest import BASIC, FORM, Clock, bearer_of, client_credentials

TOKEN = "/eid-sandbox/oauth/connect/token"
SESSIONS = "/eid-sandbox/identification/v2/sessions"
SETTINGS = {
    "successUrl": "http://shop.test/eid/ok/",
    "abortUrl": "http://shop.test/eid/abort/?keep=1",
    "errorUrl": "http://shop.test/eid/error/",
}
PERSONS = builtin_persons()


def token(client: Client, *, basic: bool = True) -> Any:
    return client_credentials(client, TOKEN, "identify", basic=basic)


def bearer(client: Client) -> dict[str, str]:
    return bearer_of(token(client))


def create(client: Client, **fields: Any) -> Any:
    body = {"flow": "redirect", "redirectSettings": SETTINGS, **fields}
    return client.post(
        SESSIONS, json.dumps(body), content_type="application/json", headers=bearer(client)
    )


def retrieve(client: Client, session_id: str) -> Any:
    return client.get(f"{SESSIONS}/{session_id}", headers=bearer(client))


def end(client: Client, url: str, action: str = "identify", **form: str) -> Any:
    """Open the hosted page at ``url`` and end the session there."""
    path = urlsplit(url).path
    assert client.get(path).status_code == 200
    data = {"action": action, "person": "NORWEGIAN", **form}
    return client.post(path, data)


# -- token ----------------------------------------------------------------------------------
@pytest.mark.parametrize("basic", [True, False], ids=["basic", "client_secret_post"])
def test_the_v1_token_endpoint_serves_v2_with_either_client_authentication(
    client: Client, basic: bool
) -> None:
    response = token(client, basic=basic)
    assert response.status_code == 200
    headers = {"Authorization": "Bearer " + response.json()["access_token"]}
    body = json.dumps({"flow": "redirect", "redirectSettings": SETTINGS})
    created = client.post(SESSIONS, body, content_type="application/json", headers=headers)
    assert created.status_code == 201


def test_without_a_token_the_error_is_v2_shaped(client: Client) -> None:
    response = client.post(SESSIONS, "{}", content_type="application/json")
    assert response.status_code == 401
    assert set(response.json()) == {"message", "code"}


# -- create -----------------------------------------------------------------------------------
def test_create_answers_201_with_the_session_resource_in_camel_case(client: Client) -> None:
    response = create(
        client,
        allowedProviders=["no_bankid_netcentric", "no_bankid_mobile"],
        include=["name", "date_of_birth", "nin"],
        language="no",
        externalReference="6f1c0d7e",
        prefilledInput={"nin": PERSONS.NORWEGIAN.national_identity_number},
    )
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "created"
    assert urlsplit(body["url"]).path == f"/eid-sandbox/login/{body['id']}/"
    assert body["flow"] == "redirect"
    assert body["allowedProviders"] == ["no_bankid_netcentric", "no_bankid_mobile"]
    assert body["include"] == ["name", "date_of_birth", "nin"]
    assert body["language"] == "no"
    assert body["redirectSettings"] == SETTINGS
    assert body["externalReference"] == "6f1c0d7e"
    assert body["created"].endswith("Z")
    assert body["expires"].endswith("Z")
    # camelCase throughout, no v1 PascalCase.
    assert all(key[0].islower() for key in body)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"flow": None}, "flow"),
        ({"flow": "popup"}, "flow"),
        ({"language": "NO"}, "language"),
        ({"include": ["shoe_size"]}, "include"),
        ({"allowedProviders": "se_bankid"}, "allowedProviders"),
        ({"redirectSettings": None}, "redirectSettings"),
        ({"redirectSettings": {**SETTINGS, "errorUrl": "ftp://x"}}, "redirectSettings.errorUrl"),
        ({"flow": "iframe"}, "iframeSettings"),
        ({"flow": "iframe", "iframeSettings": {"parentDomains": ["https://x"]}},
         "iframeSettings.parentDomains"),
        ({"externalReference": 7}, "externalReference"),
    ],
)  # fmt: skip
def test_invalid_create_requests_name_the_field(
    client: Client, fields: dict[str, Any], field: str
) -> None:
    body = {"flow": "redirect", "redirectSettings": SETTINGS, **fields}
    body = {key: value for key, value in body.items() if value is not None}
    response = client.post(
        SESSIONS, json.dumps(body), content_type="application/json", headers=bearer(client)
    )
    assert response.status_code == 400
    answer = response.json()
    assert set(answer) == {"message", "errors"}
    assert field in [error["field"] for error in answer["errors"]]


def test_headless_needs_no_redirect_settings_and_has_a_security_reference(
    client: Client,
) -> None:
    body = json.dumps({"flow": "headless"})
    response = client.post(SESSIONS, body, content_type="application/json", headers=bearer(client))
    assert response.status_code == 201
    assert "url" not in response.json()
    assert len(response.json()["securityReference"]) == 8


# -- the hosted page and the way back ------------------------------------------------------------
def test_success_returns_with_the_session_id_and_no_placeholders(client: Client) -> None:
    body = create(client, externalReference="ref-[2]").json()
    response = end(client, body["url"])
    assert response.status_code == 302
    assert response["Location"] == f"http://shop.test/eid/ok/?sessionId={body['id']}"


def test_abort_appends_to_a_url_that_has_a_query(client: Client) -> None:
    body = create(client).json()
    response = end(client, body["url"], "abort")
    assert response["Location"] == f"http://shop.test/eid/abort/?keep=1&sessionId={body['id']}"
    assert retrieve(client, body["id"]).json()["status"] == "user_aborted"


def test_failure_returns_to_the_error_url_and_the_error_is_in_the_session(client: Client) -> None:
    body = create(client).json()
    response = end(client, body["url"], "fail", error_status="PKI_BLOCKED")
    assert response["Location"] == f"http://shop.test/eid/error/?sessionId={body['id']}"
    session = retrieve(client, body["id"]).json()
    assert session["status"] == "failed"
    assert session["error"]["code"] == "pki_blocked"
    assert session["error"]["providerCode"] == "SANDBOX-PKI_BLOCKED"
    assert session["error"]["message"]
    assert "identity" not in session


def test_a_timeout_at_the_page_reads_timed_out(client: Client) -> None:
    body = create(client).json()
    end(client, body["url"], "fail", error_status="TIMEOUT")
    assert retrieve(client, body["id"]).json()["status"] == "timed_out"


def test_a_session_timed_out_at_the_page_reads_timed_out(client: Client) -> None:
    body = create(client).json()
    response = end(client, body["url"], "fail", error_status="LOGIN", record_status="TIMEOUT")
    assert response["Location"] == f"http://shop.test/eid/error/?sessionId={body['id']}"
    session = retrieve(client, body["id"]).json()
    assert session["status"] == "timed_out"
    assert "error" not in session


def test_v2_publishes_no_unknown_status(client: Client) -> None:
    body = create(client).json()
    path = urlsplit(body["url"]).path
    assert 'value="UNKNOWN"' not in client.get(path).content.decode()
    response = end(client, body["url"], "fail", error_status="LOGIN", record_status="UNKNOWN")
    assert response.status_code == 400
    assert retrieve(client, body["id"]).json()["status"] == "user_initiated"


def test_an_iframe_session_may_be_framed_by_its_parent_domain_and_leaves_to_success(
    client: Client,
) -> None:
    iframe = {"parentDomains": ["shop.test"], "postMessageTargetOrigin": "http://shop.test"}
    body = create(client, flow="iframe", iframeSettings=iframe).json()
    path = urlsplit(body["url"]).path
    page = client.get(path)
    assert "shop.test" in page["Content-Security-Policy"]
    left = client.post(path, {"action": "identify", "person": "NORWEGIAN"})
    assert left.status_code == 200
    assert f"http://shop.test/eid/ok/?sessionId={body['id']}" in left.content.decode()


# -- retrieve -------------------------------------------------------------------------------------
def test_statuses_through_the_session_in_lower_snake_case(client: Client) -> None:
    body = create(client, include=["name", "date_of_birth", "nin"]).json()
    assert retrieve(client, body["id"]).json()["status"] == "created"
    client.get(urlsplit(body["url"]).path)
    assert retrieve(client, body["id"]).json()["status"] == "user_initiated"
    client.post(urlsplit(body["url"]).path, {"action": "identify", "person": "SWEDISH"})
    session = retrieve(client, body["id"]).json()
    assert session["status"] == "success"
    person = PERSONS.SWEDISH
    assert session["provider"] == "se_bankid"
    assert session["identity"] == {
        "providerId": None,  # Swedish BankID gives no unique id
        "fullName": "Astrid Linnéa Lindqvist",
        "firstName": "Astrid",
        "middleName": "Linnéa",
        "lastName": "Lindqvist",
        "dateOfBirth": "1979-08-02",
        "nin": person.national_identity_number,
    }
    assert set(session["environment"]) == {"userAgent", "ipAddress"}


def test_the_number_only_when_included(client: Client) -> None:
    body = create(client, include=["name", "date_of_birth"]).json()
    end(client, body["url"])
    identity = retrieve(client, body["id"]).json()["identity"]
    assert "nin" not in identity
    assert identity["dateOfBirth"] == PERSONS.NORWEGIAN.birth_date.isoformat()


@pytest.mark.parametrize(
    ("person", "provider"),
    [
        ("NORWEGIAN", "no_bankid_netcentric"),
        ("MINOR", "no_bankid_mobile"),
        ("NO_MIDDLE_NAME", "no_buypass"),
        ("DANISH", "mitid"),
        ("FINNISH", "ftn"),
        ("FINNISH_2023", "ftn"),
    ],
)
def test_providers_by_their_v2_names(client: Client, person: str, provider: str) -> None:
    body = create(client).json()
    end(client, body["url"], person=person)
    assert retrieve(client, body["id"]).json()["provider"] == provider


def test_a_single_allowed_provider_is_the_one_used(client: Client) -> None:
    body = create(client, allowedProviders=["se_bankid"]).json()
    end(client, body["url"])
    assert retrieve(client, body["id"]).json()["provider"] == "se_bankid"


def test_unknown_ids_are_404_with_message_and_code(client: Client) -> None:
    response = retrieve(client, "0" * 32)
    assert response.status_code == 404
    assert response.json() == {"message": "Session not found", "code": "ID-1000"}


def test_a_v1_session_is_not_a_v2_session(client: Client) -> None:
    urls = {
        "Success": "http://shop.test/ok",
        "Abort": "http://shop.test/a",
        "Error": "http://e.test/",
    }
    v1 = client.post(
        "/eid-sandbox/identification/session",
        json.dumps({"ReturnUrls": urls}),
        content_type="application/json",
        headers=bearer(client),
    ).json()
    assert retrieve(client, v1["RequestId"]).status_code == 404


# -- invalidate -----------------------------------------------------------------------------------
def test_invalidate_answers_204_and_drops_the_identity(client: Client) -> None:
    body = create(client, include=["nin"]).json()
    end(client, body["url"])
    path = f"{SESSIONS}/{body['id']}/invalidate"
    response = client.post(path, headers=bearer(client))
    assert response.status_code == 204
    assert response.content == b""
    session = retrieve(client, body["id"]).json()
    assert session["status"] == "invalidated"
    assert "identity" not in session


def test_invalidating_an_unknown_session_is_404(client: Client) -> None:
    response = client.post(f"{SESSIONS}/nope/invalidate", headers=bearer(client))
    assert response.status_code == 404
    assert response.json()["code"] == "ID-1000"


# -- the list --------------------------------------------------------------------------------------
def test_the_list_shows_finished_sessions_without_personal_data(client: Client) -> None:
    active = create(client).json()
    first = create(client, externalReference="one", include=["nin"]).json()
    end(client, first["url"])
    second = create(client).json()
    end(client, second["url"], "abort")
    response = client.get(SESSIONS, {"limit": "1"}, headers=bearer(client))
    assert response.status_code == 200
    page = response.json()
    assert page["limit"] == 1
    assert [item["id"] for item in page["data"]] == [second["id"]]
    assert page["data"][0]["status"] == "user_aborted"
    rest = client.get(SESSIONS, {"cursor": page["nextCursor"]}, headers=bearer(client)).json()
    assert [item["id"] for item in rest["data"]] == [first["id"]]
    assert rest["nextCursor"] is None
    item = rest["data"][0]
    assert set(item) == {
        "id",
        "status",
        "created",
        "expires",
        "provider",
        "flow",
        "externalReference",
    }
    assert PERSONS.NORWEGIAN.national_identity_number not in json.dumps(rest)
    assert active["id"] not in json.dumps(rest) + json.dumps(page)


@pytest.mark.parametrize("query", [{"limit": "0"}, {"limit": "101"}, {"cursor": "bm9wZQ"}])
def test_a_bad_list_query_is_a_validation_error(client: Client, query: dict[str, str]) -> None:
    response = client.get(SESSIONS, query, headers=bearer(client))
    assert response.status_code == 400
    assert set(response.json()) == {"message", "errors"}


# -- lifetimes (on the test's clock) ----------------------------------------------------------------
def _v2(clocked: SandboxBroker) -> tuple[V2Sandbox, str]:
    grant = clocked.token(
        authorization=BASIC, content_type=FORM, body=b"grant_type=client_credentials&scope=identify"
    )
    return V2Sandbox(clocked), "Bearer " + grant.body["access_token"]


def test_the_url_expires_after_ten_minutes(clocked: SandboxBroker, clock: Clock) -> None:
    api, auth = _v2(clocked)
    body = json.dumps({"flow": "redirect", "redirectSettings": SETTINGS}).encode()
    created = api.create_session(authorization=auth, body=body).body
    assert created["expires"] == "2025-03-04T10:25:00Z"
    clock.now += 599
    assert clocked.open(created["id"]).in_progress
    clock.now += 1
    session = api.get_session(authorization=auth, session_id=created["id"]).body
    assert session["status"] == "timed_out"
    assert not clocked.open(created["id"]).in_progress


def test_the_identity_is_dropped_an_hour_after_creation(
    clocked: SandboxBroker, clock: Clock
) -> None:
    api, auth = _v2(clocked)
    body = json.dumps({"flow": "redirect", "redirectSettings": SETTINGS, "include": ["nin"]})
    created = api.create_session(authorization=auth, body=body.encode()).body
    clock.now += 300
    clocked.identify(created["id"], PERSONS.NORWEGIAN)
    clock.now += 3299
    assert "identity" in api.get_session(authorization=auth, session_id=created["id"]).body
    clock.now += 1
    auth = _v2(clocked)[1]  # the first token expired meanwhile
    session = api.get_session(authorization=auth, session_id=created["id"]).body
    assert session["status"] == "success"
    assert "identity" not in session
    assert "environment" not in session


# -- through responses: the eid_broker fixture -----------------------------------------------------
def test_the_fixture_serves_v2_and_records_its_calls(eid_broker: EidBroker) -> None:
    token_url = "https://auth.broker.test/oauth/connect/token"
    sessions = "https://api.broker.test/identification/v2/sessions"
    grant = requests.post(
        token_url,
        data={"grant_type": "client_credentials", "scope": "identify"},
        auth=(SUITE_CLIENT_ID, SUITE_SECRET),
        timeout=5,
    ).json()
    headers = {"Authorization": "Bearer " + grant["access_token"]}
    body = {"flow": "redirect", "redirectSettings": SETTINGS, "include": ["nin"]}
    created = requests.post(sessions, json=body, headers=headers, timeout=5)
    assert created.status_code == 201
    session_id = created.json()["id"]
    assert eid_broker.create_requests == [body]
    returned = eid_broker.complete()
    assert returned == append_session_id(SETTINGS["successUrl"], session_id)
    got = requests.get(f"{sessions}/{session_id}", headers=headers, timeout=5).json()
    assert got["identity"]["nin"] == PERSONS.NORWEGIAN.national_identity_number
    assert eid_broker.retrieve_requests == [session_id]
    gone = requests.post(f"{sessions}/{session_id}/invalidate", headers=headers, timeout=5)
    assert (gone.status_code, gone.content) == (204, b"")
    assert eid_broker.invalidate_requests == [session_id]
    assert eid_broker.token_requests == 1
    assert parse_qs(urlsplit(returned).query) == {"sessionId": [session_id]}


def test_faults_are_injected_by_endpoint_name(eid_broker: EidBroker) -> None:
    eid_broker.fail_next("create", 503)
    grant = requests.post(
        "https://auth.broker.test/oauth/connect/token",
        data={"grant_type": "client_credentials", "scope": "identify"},
        auth=(SUITE_CLIENT_ID, SUITE_SECRET),
        timeout=5,
    ).json()
    headers = {"Authorization": "Bearer " + grant["access_token"]}
    sessions = "https://api.broker.test/identification/v2/sessions"
    body = {"flow": "redirect", "redirectSettings": SETTINGS}
    assert requests.post(sessions, json=body, headers=headers, timeout=5).status_code == 503
    session_id = requests.post(sessions, json=body, headers=headers, timeout=5).json()["id"]
    eid_broker.inject("retrieve", 500, request_id=session_id, times=1)
    assert requests.get(f"{sessions}/{session_id}", headers=headers, timeout=5).status_code == 500
    assert requests.get(f"{sessions}/{session_id}", headers=headers, timeout=5).status_code == 200
    listed = requests.get(sessions, params={"limit": 5}, headers=headers, timeout=5)
    assert listed.json() == {"limit": 5, "nextCursor": None, "data": []}  # still active
    eid_broker.fail_next("invalidate", 502)
    gone = requests.post(f"{sessions}/{session_id}/invalidate", headers=headers, timeout=5)
    assert gone.status_code == 502


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://shop.example/ok", "https://shop.example/ok?sessionId=a%2Fb"),
        ("https://shop.example/ok?x=1", "https://shop.example/ok?x=1&sessionId=a%2Fb"),
        ("https://shop.example/ok?", "https://shop.example/ok?sessionId=a%2Fb"),
        ("https://shop.example/ok?x=1&", "https://shop.example/ok?x=1&sessionId=a%2Fb"),
        ("https://shop.example/ok#top", "https://shop.example/ok?sessionId=a%2Fb#top"),
    ],
)
def test_the_session_id_is_appended_with_question_mark_or_ampersand(
    url: str, expected: str
) -> None:
    assert append_session_id(url, "a/b") == expected
