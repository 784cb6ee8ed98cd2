"""The sandbox speaking v1 over HTTP (Django's test client): the token endpoint, the session
API and its status call, as wire-format.md gives them."""

from __future__ import annotations

import base64
import time

import pytest
from django.test import Client

from django_eid.sandbox.broker import CLIENT_ID, CLIENT_SECRET
from tests.fixtures_client import SettingsWrapper
from tests.sandbox.conftest import BASIC, FORM
from tests.sandbox.over_http import STATUS, TOKEN, bearer, create, login_path, retrieve, token


# -- token endpoint ------------------------------------------------------------------------------
def test_token_with_basic_authentication(client: Client) -> None:
    response = token(client)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 3600
    assert body["access_token"].count(".") == 2


def test_token_with_client_secret_post(client: Client) -> None:
    body = (
        "grant_type=client_credentials&scope=identify"
        f"&client_id={CLIENT_ID}&client_secret={CLIENT_SECRET}"
    )
    response = client.post(TOKEN, body, content_type=FORM)
    assert response.status_code == 200


def test_token_lifetime_is_a_setting(client: Client, settings: SettingsWrapper) -> None:
    settings.DJANGO_EID = {**settings.DJANGO_EID, "SANDBOX_TOKEN_LIFETIME": 120}
    assert token(client).json()["expires_in"] == 120


@pytest.mark.parametrize(
    ("scope", "auth", "status", "error"),
    [
        ("identify%20admin", BASIC, 400, "invalid_scope"),
        (
            "identify",
            "Basic " + base64.b64encode(f"{CLIENT_ID}:wrong".encode()).decode(),
            401,
            "invalid_client",
        ),
        ("identify", None, 401, "invalid_client"),
    ],
)
def test_token_errors(
    client: Client, scope: str, auth: str | None, status: int, error: str
) -> None:
    response = token(client, scope=scope, auth=auth)
    assert response.status_code == status
    assert response.json()["error"] == error


def test_unsupported_grant_type(client: Client) -> None:
    body = "grant_type=password&scope=identify&username=a&password=b"
    response = client.post(TOKEN, body, content_type=FORM, headers={"Authorization": BASIC})
    assert response.status_code == 400
    assert response.json()["error"] == "unsupported_grant_type"


def test_token_endpoint_allows_only_post(client: Client) -> None:
    assert client.get(TOKEN).status_code == 405


# -- session API ---------------------------------------------------------------------------------
def test_create_and_retrieve(client: Client) -> None:
    response = create(client, IdentityProvider="NO_BANKID_WEB")
    assert response.status_code == 200
    body = response.json()
    assert body["Url"].startswith("http://testserver/eid-sandbox/login/")
    assert len(body["RequestId"]) == 200
    record = retrieve(client, body["RequestId"]).json()
    assert record["Status"] == "CREATED"
    assert record["IdentityProvider"] == "NO_BANKID_WEB"


def test_create_validation_errors(client: Client) -> None:
    response = create(client, ReturnUrls={"Success": "/relative"}, Language="DE")
    assert response.status_code == 400
    fields = {e["field"] for e in response.json()["errors"]}
    assert {"ReturnUrls.Success", "ReturnUrls.Abort", "ReturnUrls.Error", "Language"} <= fields


def test_unknown_session_is_404_json(client: Client) -> None:
    response = retrieve(client, "0" * 200)
    assert response.status_code == 404
    assert set(response.json()) == {"message", "code"}


@pytest.mark.parametrize("auth", [None, "Bearer", "Bearer not-a-token", BASIC])
def test_missing_or_wrong_bearer_is_401(client: Client, auth: str | None) -> None:
    headers = {"Authorization": auth} if auth else {}
    assert create(client, headers=headers).status_code == 401
    response = retrieve(client, "x", headers=headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_expired_bearer_is_401(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    headers = bearer(client)
    request_id = create(client, headers=headers).json()["RequestId"]
    assert retrieve(client, request_id, headers=headers).status_code == 200
    later = time.time() + 3601
    monkeypatch.setattr(time, "time", lambda: later)
    assert retrieve(client, request_id, headers=headers).status_code == 401


def test_a_token_without_identify_is_403(client: Client) -> None:
    headers = {"Authorization": "Bearer " + token(client, scope="event").json()["access_token"]}
    assert create(client, headers=headers).status_code == 403


def test_latency_is_simulated(
    client: Client, settings: SettingsWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[float] = []
    monkeypatch.setattr("django_eid.sandbox.views.time.sleep", slept.append)
    settings.DJANGO_EID = {**settings.DJANGO_EID, "SANDBOX_LATENCY": 0.25}
    create(client)
    assert slept == [0.25, 0.25]  # the token request, then the create request


def test_the_status_call_says_done_without_personal_data(client: Client) -> None:
    path, request_id = login_path(client)
    headers = bearer(client)
    answer = client.get(STATUS, {"requestId": request_id}, headers=headers)
    assert (answer.status_code, answer.json()) == (200, {"Done": False})
    client.get(path)  # the person opens the page: USERINITIATED, still not done
    assert client.get(STATUS, {"requestId": request_id}, headers=headers).json() == {"Done": False}
    client.post(path, {"action": "identify", "person": "NORWEGIAN"})
    answer = client.get(STATUS, {"requestId": request_id}, headers=headers)
    assert answer.json() == {"Done": True}
    assert "Nordmann" not in answer.content.decode()
    assert client.get(STATUS, {"requestId": "nope"}, headers=headers).status_code == 404
    assert client.get(STATUS, {"requestId": request_id}).status_code == 401
