"""Invalidating a broker session (what ``api-cancel`` asks): the client's call, with each
REST API (``broker_api``: OpenID Connect has no session to end), and the sandbox's answer
over HTTP (v1's).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import requests
from django.test import Client

from django_eid.client import get_client
from django_eid.exceptions import EidApiError, EidUnavailable
from django_eid.sandbox.broker import CLIENT_ID, CLIENT_SECRET, SandboxBroker, SessionFinished
from django_eid.sandbox.store import CacheStore
from tests.fixtures_broker import (
    ACCESS_TOKEN,
    NO_SESSION_TO_ASK,
    RECORD_PROPERTIES,
    REST_APIS,
    SAMPLE,
    ScriptedBroker,
)
from tests.fixtures_client import SettingsWrapper, sandbox_settings

#: The client's calls: with each REST API.
EACH_REST_API = pytest.mark.apis(*REST_APIS, reason=NO_SESSION_TO_ASK)
INVALIDATE_URL = "https://api.broker.test/identification/session/invalidate"
#: What v1's record says of the person (all but how the session went, and with which eID).
IDENTITY_FIELDS = set(RECORD_PROPERTIES) - {"Status", "IdentityProvider", "Error", "MetaData"}


def created(broker: ScriptedBroker) -> str:
    """A session created through the client; its request id."""
    from django_eid.client import ReturnUrls

    urls = ReturnUrls(
        success="https://shop.test/ok?requestId=[1]&externalId=[2]",
        abort="https://shop.test/abort?requestId=[1]&externalId=[2]",
        error="https://shop.test/error?status=[0]&requestId=[1]&externalId=[2]",
    )
    return get_client().create_session(return_urls=urls, external_reference="ext-1").request_id


# -- the client ---------------------------------------------------------------------------------
def test_the_client_puts_the_request_id_with_its_bearer_token(broker: ScriptedBroker) -> None:
    """v1's call (the default API's)."""
    request_id = created(broker)
    assert get_client().invalidate_session(request_id) is None
    (call,) = [c for c in broker.mock.calls if c.request.method == "PUT"]
    assert call.request.url == INVALIDATE_URL
    assert call.request.headers["Authorization"] == f"Bearer {ACCESS_TOKEN}"
    assert call.request.headers["Content-Type"] == "application/json"
    assert json.loads(call.request.body) == {"RequestId": request_id}
    assert broker.invalidate_requests == [request_id]
    session = broker.broker.session(request_id)
    assert session is not None
    assert session.status == "INVALIDATED"


@EACH_REST_API
@pytest.mark.parametrize(
    ("status", "body"),
    [
        (404, {"message": "No identification session has this requestId.", "code": "NOT_FOUND"}),
        (400, {"message": "A session that ended in ERROR cannot be invalidated."}),
        (403, {"message": "Forbidden", "code": "FORBIDDEN"}),
    ],
)
def test_a_4xx_answer_raises_eid_api_error(
    broker_api: str, broker: ScriptedBroker, status: int, body: dict[str, Any]
) -> None:
    request_id = created(broker)
    broker.inject("invalidate", status, body=body, times=None)
    with pytest.raises(EidApiError) as raised:
        get_client().invalidate_session(request_id)
    assert raised.value.status_code == status
    assert broker.invalidate_requests == [request_id]  # a 4xx is not retried


@EACH_REST_API
def test_the_sandbox_s_refusals_reach_the_client(broker_api: str, broker: ScriptedBroker) -> None:
    with pytest.raises(EidApiError) as unknown:
        get_client().invalidate_session("X" * 200)
    assert unknown.value.status_code == 404
    failed = created(broker)
    broker.broker.open(failed)
    broker.broker.fail(failed, "TIMEOUT")
    with pytest.raises(EidApiError) as error:
        get_client().invalidate_session(failed)
    assert error.value.status_code == 400


@EACH_REST_API
def test_a_passing_outage_is_retried(broker_api: str, broker: ScriptedBroker) -> None:
    request_id = created(broker)
    broker.fail_next("invalidate", 503)
    get_client().invalidate_session(request_id)
    assert broker.invalidate_requests == [request_id, request_id]
    assert broker.broker.session(request_id).status == "INVALIDATED"  # type: ignore[union-attr]


@EACH_REST_API
def test_an_outage_raises_eid_unavailable(broker_api: str, broker: ScriptedBroker) -> None:
    request_id = created(broker)
    broker.fail_next("invalidate", exception=requests.ConnectionError("down"), times=None)
    with pytest.raises(EidUnavailable):
        get_client().invalidate_session(request_id)


@EACH_REST_API
def test_invalidating_twice_is_harmless(broker_api: str, broker: ScriptedBroker) -> None:
    request_id = created(broker)
    get_client().invalidate_session(request_id)
    get_client().invalidate_session(request_id)
    assert broker.broker.session(request_id).status == "INVALIDATED"  # type: ignore[union-attr]


# -- the sandbox over HTTP ---------------------------------------------------------------------------
SANDBOX = "/eid-sandbox"
SESSION = f"{SANDBOX}/identification/session"
INVALIDATE = f"{SESSION}/invalidate"
BASIC = "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()


@pytest.fixture
def sandbox(settings: SettingsWrapper) -> SandboxBroker:
    """The sandbox app enabled; its broker over the same store, to act as the person."""
    settings.DJANGO_EID = sandbox_settings()
    return SandboxBroker(
        CacheStore("default"),
        client_id=CLIENT_ID,
        client_secret=CLIENT_SECRET,
        login_url=lambda request_id: f"http://testserver{SANDBOX}/login/{request_id}/",
    )


@pytest.fixture
def bearer(client: Client, sandbox: SandboxBroker) -> dict[str, str]:
    answer = client.post(
        f"{SANDBOX}/oauth/connect/token",
        "grant_type=client_credentials&scope=identify",
        content_type="application/x-www-form-urlencoded",
        headers={"Authorization": BASIC},
    )
    return {"Authorization": "Bearer " + answer.json()["access_token"]}


def create(client: Client, bearer: dict[str, str]) -> str:
    body = {
        "ReturnUrls": {
            "Success": "http://shop.test/ok/?requestId=[1]&externalId=[2]",
            "Abort": "http://shop.test/abort/?requestId=[1]&externalId=[2]",
            "Error": "http://shop.test/error/?status=[0]&requestId=[1]&externalId=[2]",
        },
        "ExternalReference": "ext-1",
        "GetSocialSecurityNumber": True,
    }
    answer = client.post(SESSION, json.dumps(body), content_type="application/json", headers=bearer)
    assert answer.status_code == 200
    request_id: str = answer.json()["RequestId"]
    return request_id


def invalidate(client: Client, bearer: dict[str, str], *, query: str = "", body: Any = None) -> Any:
    url = f"{INVALIDATE}?{query}" if query else INVALIDATE
    data = "" if body is None else json.dumps(body)
    return client.put(url, data, content_type="application/json", headers=bearer)


def record(client: Client, bearer: dict[str, str], request_id: str) -> dict[str, Any]:
    answer = client.get(SESSION, {"requestId": request_id}, headers=bearer)
    assert answer.status_code == 200
    body: dict[str, Any] = answer.json()
    return body


def test_a_success_session_becomes_invalidated_without_its_identity(
    client: Client, bearer: dict[str, str], sandbox: SandboxBroker
) -> None:
    request_id = create(client, bearer)
    sandbox.open(request_id)
    sandbox.identify(request_id, SAMPLE)
    assert record(client, bearer, request_id)["Name"] == SAMPLE.name
    answer = invalidate(client, bearer, body={"RequestId": request_id})
    assert (answer.status_code, answer.json()) == (200, {})
    after = record(client, bearer, request_id)
    assert after["Status"] == "INVALIDATED"
    assert not IDENTITY_FIELDS & set(after)
    assert SAMPLE.national_identity_number not in json.dumps(after)
    done = client.get(f"{SESSION}/status", {"requestId": request_id}, headers=bearer)
    assert done.json() == {"Done": True}


def test_the_request_id_in_the_query_works_too(
    client: Client, bearer: dict[str, str], sandbox: SandboxBroker
) -> None:
    request_id = create(client, bearer)
    answer = invalidate(client, bearer, query=f"requestId={request_id}")
    assert answer.status_code == 200
    assert record(client, bearer, request_id)["Status"] == "INVALIDATED"
    with pytest.raises(SessionFinished):
        sandbox.identify(request_id, SAMPLE)


def test_the_property_s_case_does_not_matter(client: Client, bearer: dict[str, str]) -> None:
    request_id = create(client, bearer)
    assert invalidate(client, bearer, body={"requestid": request_id}).status_code == 200


def test_an_unknown_session_is_404(client: Client, bearer: dict[str, str]) -> None:
    answer = invalidate(client, bearer, body={"RequestId": "X" * 200})
    assert answer.status_code == 404
    assert answer.json()["code"] == "NOT_FOUND"


def test_an_error_session_cannot_be_invalidated(
    client: Client, bearer: dict[str, str], sandbox: SandboxBroker
) -> None:
    request_id = create(client, bearer)
    sandbox.open(request_id)
    sandbox.fail(request_id, "TIMEOUT")
    answer = invalidate(client, bearer, body={"RequestId": request_id})
    assert answer.status_code == 400
    assert answer.json()["code"] == "INVALID_STATUS"
    assert record(client, bearer, request_id)["Status"] == "ERROR"


@pytest.mark.parametrize(
    ("query", "body"),
    [
        ("", None),
        ("", {}),
        ("", {"RequestId": ""}),
        ("", {"RequestId": 5}),
        ("", ["x"]),
        ("requestId=a&requestId=b", None),
    ],
)
def test_exactly_one_request_id_is_required(
    client: Client, bearer: dict[str, str], query: str, body: Any
) -> None:
    answer = invalidate(client, bearer, query=query, body=body)
    assert answer.status_code == 400


def test_one_in_the_query_and_one_in_the_body_is_two(
    client: Client, bearer: dict[str, str]
) -> None:
    request_id = create(client, bearer)
    answer = invalidate(client, bearer, query=f"requestId={request_id}", body={"RequestId": "x"})
    assert answer.status_code == 400
    assert record(client, bearer, request_id)["Status"] == "CREATED"


def test_a_body_that_is_not_json_is_400(client: Client, bearer: dict[str, str]) -> None:
    answer = client.put(INVALIDATE, b"{", content_type="application/json", headers=bearer)
    assert answer.status_code == 400


def test_without_a_token_is_401(client: Client, sandbox: SandboxBroker) -> None:
    answer = invalidate(client, {}, body={"RequestId": "x"})
    assert answer.status_code == 401
    assert answer["WWW-Authenticate"].startswith("Bearer")


def test_only_put(client: Client, bearer: dict[str, str]) -> None:
    assert (
        client.post(INVALIDATE, "{}", content_type="application/json", headers=bearer).status_code
        == 405
    )
