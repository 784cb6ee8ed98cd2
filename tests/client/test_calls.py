"""The broker client on the wire: token, create and retrieve calls, exactly as documented."""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
import responses
from responses import matchers

from django_eid import __version__
from django_eid.brokers import ReturnUrls
from django_eid.client import EidClient
from django_eid.exceptions import EidProtocolError
from django_eid.records import CreatedSession
from tests.fixtures_client import (
    BASIC,
    CLIENT_ID,
    RECORD,
    REQUEST_ID,
    SECRET,
    SESSION_URL,
    TOKEN_URL,
    SettingsWrapper,
    add_token,
    api_calls,
    eid_settings_with,
    json_body,
)

#: django-eid's return URLs, as the flow hands them to the client.
URLS = ReturnUrls(
    success="https://shop.example/eid/return/ok",
    abort="https://shop.example/eid/return/abort",
    error="https://shop.example/eid/return/error",
)
#: As the v1 create request sends them: with the placeholders, their brackets unencoded.
SENT_URLS = {
    "Success": "https://shop.example/eid/return/ok?externalId=[2]",
    "Abort": "https://shop.example/eid/return/abort?externalId=[2]",
    "Error": "https://shop.example/eid/return/error?status=[0]&externalId=[2]",
}
CREATED = {
    "Url": "https://id.broker.test/NoBankIDWeb/Start?sessionid=Qm9n",
    "RequestId": REQUEST_ID,
}


def add_create(rsps: responses.RequestsMock, **kwargs: Any) -> None:
    rsps.add(responses.POST, SESSION_URL, **({"json": CREATED} | kwargs))


def add_get(rsps: responses.RequestsMock, **kwargs: Any) -> None:
    rsps.add(responses.GET, SESSION_URL, **({"json": RECORD} | kwargs))


# -- the token request ------------------------------------------------------------


def test_token_request_with_basic_authentication(wire: responses.RequestsMock) -> None:
    add_token(wire, "tok-1", expires_in=3600)
    token = EidClient().fetch_token()
    assert (token.access_token, token.token_type, token.expires_in) == ("tok-1", "Bearer", 3600)
    (call,) = wire.calls
    request = call.request
    assert request.method == "POST"
    assert request.url == TOKEN_URL
    assert request.headers["Authorization"] == BASIC
    assert request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert request.body == "grant_type=client_credentials&scope=identify"
    assert SECRET not in request.body


def test_scopes_are_sent_space_delimited(
    settings: SettingsWrapper, wire: responses.RequestsMock
) -> None:
    settings.DJANGO_EID = eid_settings_with(SCOPES=["identify", "document_read", "event"])
    add_token(wire)
    EidClient().fetch_token()
    body = wire.calls[0].request.body
    assert body == "grant_type=client_credentials&scope=identify+document_read+event"
    assert parse_qs(body) == {
        "grant_type": ["client_credentials"],
        "scope": ["identify document_read event"],
    }


def test_post_method_sends_credentials_in_the_form_and_no_authorization_header(
    settings: SettingsWrapper, wire: responses.RequestsMock
) -> None:
    settings.DJANGO_EID = eid_settings_with(TOKEN_AUTH_METHOD="post", CLIENT_SECRET="s+/=&%x")
    add_token(wire)
    EidClient().fetch_token()
    request = wire.calls[0].request
    assert "Authorization" not in request.headers
    assert parse_qs(request.body) == {
        "grant_type": ["client_credentials"],
        "scope": ["identify"],
        "client_id": [CLIENT_ID],
        "client_secret": ["s+/=&%x"],
    }


def test_basic_credentials_are_form_encoded_first(
    settings: SettingsWrapper, wire: responses.RequestsMock
) -> None:
    """RFC 6749 2.3.1: id and secret are form-urlencoded before base64."""
    settings.DJANGO_EID = eid_settings_with(CLIENT_ID="my client", CLIENT_SECRET="a+b/c=d%:é")
    add_token(wire)
    EidClient().fetch_token()
    value = wire.calls[0].request.headers["Authorization"]
    assert value.startswith("Basic ")
    assert base64.b64decode(value[6:]).decode() == "my+client:a%2Bb%2Fc%3Dd%25%3A%C3%A9"


def test_netrc_credentials_never_replace_ours(
    wire: responses.RequestsMock, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    netrc = tmp_path / ".netrc"
    netrc.write_text("machine api.broker.test login intruder password pw\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    add_token(wire, "tok-1")
    add_get(wire)
    EidClient().get_session(REQUEST_ID)
    assert api_calls(wire)[0].request.headers["Authorization"] == "Bearer tok-1"


@pytest.mark.parametrize("expires_in", [3600, "3600"])
def test_token_lifetime_may_come_as_digits(
    wire: responses.RequestsMock, expires_in: object
) -> None:
    body = {"access_token": "t", "expires_in": expires_in, "token_type": "bearer"}
    wire.add(responses.POST, TOKEN_URL, json=body)
    token = EidClient().fetch_token()
    assert (token.expires_in, token.token_type) == (3600, "Bearer")


# -- headers, timeout, session reuse ------------------------------------------------


def test_every_call_sends_the_user_agent_and_the_timeout(
    settings: SettingsWrapper, wire: responses.RequestsMock
) -> None:
    settings.DJANGO_EID = eid_settings_with(TIMEOUT=4.5)
    add_token(wire)
    add_create(wire)
    add_get(wire)
    client = EidClient()
    client.create_session(return_urls=URLS, external_reference="ref-1")
    client.get_session(REQUEST_ID)
    assert len(wire.calls) == 3
    for call in wire.calls:
        assert call.request.headers["User-Agent"].startswith(f"django-eid/{__version__}")
        # The time left of the call's one deadline: at most TIMEOUT, never unlimited.
        assert 4.0 < call.request.req_kwargs["timeout"] <= 4.5
    token_call, create_call = wire.calls[0], wire.calls[1]
    # The token request spends the time of the create call it is part of.
    assert create_call.request.req_kwargs["timeout"] < token_call.request.req_kwargs["timeout"]


def test_one_http_session_per_client(wire: responses.RequestsMock) -> None:
    add_token(wire)
    add_get(wire)
    client = EidClient()
    http = client.http
    assert isinstance(http, requests.Session)
    client.get_session(REQUEST_ID)
    client.get_session(REQUEST_ID)
    assert client.http is http
    assert http.verify is True
    client.close()


def test_a_ca_bundle_can_be_named(settings: SettingsWrapper, tmp_path: Any) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("")
    settings.DJANGO_EID = eid_settings_with(CA_BUNDLE=str(bundle))
    assert EidClient().http.verify == str(bundle)


# -- create a session -------------------------------------------------------------


def test_create_session_minimal_body(wire: responses.RequestsMock) -> None:
    add_token(wire, "tok-1")
    add_create(wire)
    created = EidClient().create_session(return_urls=URLS, external_reference="ref-1")
    assert created == CreatedSession(url=CREATED["Url"], request_id=REQUEST_ID)
    (call,) = api_calls(wire)
    assert call.request.method == "POST"
    assert call.request.url == SESSION_URL
    assert call.request.headers["Authorization"] == "Bearer tok-1"
    assert call.request.headers["Content-Type"] == "application/json"
    assert json_body(call) == {
        "ReturnUrls": SENT_URLS,
        "ExternalReference": "ref-1",
        "GetSocialSecurityNumber": False,
    }


def test_create_session_full_body_is_pascal_case(wire: responses.RequestsMock) -> None:
    add_token(wire)
    add_create(wire)
    EidClient().create_session(
        return_urls=URLS,
        external_reference="6f1c0d7e9b2a4c55a1e3f0b8d2c4e6a8",
        identity_provider="NO_BANKID_WEB",
        language="NO",
        get_social_security_number=True,
        iframe_domain="shop.example",
    )
    (call,) = api_calls(wire)
    assert json_body(call) == {
        "IdentityProvider": "NO_BANKID_WEB",
        "ReturnUrls": SENT_URLS,
        "Language": "NO",
        "GetSocialSecurityNumber": True,
        "ExternalReference": "6f1c0d7e9b2a4c55a1e3f0b8d2c4e6a8",
        # Both spellings of the iframe parent domain.
        "iFrame": {"Domain": "shop.example", "WebMessaging": False},
        "domain": "shop.example",
    }


def test_placeholders_reach_the_broker_unencoded(wire: responses.RequestsMock) -> None:
    add_token(wire)
    add_create(wire)
    EidClient().create_session(return_urls=URLS, external_reference="ref")
    raw = api_calls(wire)[0].request.body
    raw = raw if isinstance(raw, bytes) else raw.encode()
    for placeholder in (b"status=[0]", b"externalId=[2]"):
        assert placeholder in raw
    assert b"%5B" not in raw
    assert b"\\u005b" not in raw.lower()


@pytest.mark.parametrize(
    "answer",
    [
        {"url": CREATED["Url"], "requestId": REQUEST_ID},
        {"URL": CREATED["Url"], "REQUESTID": REQUEST_ID, "Extra": True},
    ],
)
def test_create_answer_names_match_case_insensitively(
    wire: responses.RequestsMock, answer: dict[str, str]
) -> None:
    add_token(wire)
    add_create(wire, json=answer)
    created = EidClient().create_session(return_urls=URLS, external_reference="ref")
    assert (created.url, created.request_id) == (CREATED["Url"], REQUEST_ID)


# -- retrieve a session -----------------------------------------------------------


def test_get_session_encodes_the_request_id(wire: responses.RequestsMock) -> None:
    add_token(wire, "tok-1")
    add_get(wire, match=[matchers.query_param_matcher({"requestId": REQUEST_ID})])
    record = EidClient().get_session(REQUEST_ID)
    assert record.request_id == REQUEST_ID
    (call,) = api_calls(wire)
    assert call.request.method == "GET"
    assert call.request.headers["Authorization"] == "Bearer tok-1"
    query = urlsplit(call.request.url).query
    assert "+" not in query
    assert "/" not in query
    assert query.count("=") == 1
    assert "%2B" in query
    assert "%2F" in query
    assert "%3D" in query
    assert parse_qs(query) == {"requestId": [REQUEST_ID]}


@pytest.mark.parametrize("request_id", ["a b&c=d#e?f", "æøå", "x" * 512])
def test_any_request_id_round_trips(wire: responses.RequestsMock, request_id: str) -> None:
    add_token(wire)
    add_get(
        wire,
        json={**RECORD, "RequestId": request_id},
        match=[matchers.query_param_matcher({"requestId": request_id})],
    )
    assert EidClient().get_session(request_id).request_id == request_id
    query = urlsplit(api_calls(wire)[0].request.url).query
    assert parse_qs(query) == {"requestId": [request_id]}


def test_get_session_with_metadata(wire: responses.RequestsMock) -> None:
    add_token(wire)
    add_get(wire, json={**RECORD, "RequestId": "r1", "MetaData": {"certificate": "MII..."}})
    record = EidClient().get_session("r1", metadata=True)
    query = parse_qs(urlsplit(api_calls(wire)[0].request.url).query)
    assert query == {"requestId": ["r1"], "metaData": ["true"]}
    assert record.metadata == {"certificate": "MII..."}


@pytest.mark.parametrize("named", ["another-session", REQUEST_ID.lower(), ""])
def test_the_record_of_another_session_is_a_protocol_error(
    wire: responses.RequestsMock, named: str | None
) -> None:
    add_token(wire)
    add_get(wire, json={**RECORD, "RequestId": named})
    with pytest.raises(EidProtocolError, match="the record of another session") as info:
        EidClient().get_session(REQUEST_ID)
    assert RECORD["SocialSecurityNumber"] not in str(info.value)
    assert RECORD["LastName"] not in str(info.value)


@pytest.mark.parametrize("absent", ["missing", "null"])
def test_a_record_without_request_id_is_the_one_asked_for(
    wire: responses.RequestsMock, absent: str
) -> None:
    # The published schema requires no field; the id was in the request.
    body = {k: v for k, v in RECORD.items() if k != "RequestId"}
    if absent == "null":
        body["RequestId"] = None
    add_token(wire)
    add_get(wire, json=body)
    record = EidClient().get_session(REQUEST_ID)
    assert record.request_id == REQUEST_ID
    assert record.is_success
    assert record.first_name == "Kari"
    assert "RequestId" not in record.redacted() or record.redacted()["RequestId"] is None


def test_get_session_returns_the_typed_record(wire: responses.RequestsMock) -> None:
    add_token(wire)
    add_get(wire, json={**RECORD, "newField": 1})
    record = EidClient().get_session(REQUEST_ID)
    assert record.is_success
    assert record.first_name == "Kari"
    assert record.environment_info.ip_address == "203.0.113.7"
    assert dict(record.extra) == {"newField": 1}


def test_the_base_url_may_carry_a_path(
    settings: SettingsWrapper, wire: responses.RequestsMock
) -> None:
    settings.DJANGO_EID = eid_settings_with(BASE_URL="https://api.broker.test/v2/")
    add_token(wire)
    wire.add(responses.GET, "https://api.broker.test/v2/identification/session", json=RECORD)
    EidClient().get_session(REQUEST_ID)
    assert wire.calls[-1].request.url.startswith(
        "https://api.broker.test/v2/identification/session?requestId="
    )


def test_json_bodies_are_utf8(wire: responses.RequestsMock) -> None:
    add_token(wire)
    body = json.dumps({**RECORD, "FirstName": "Åse Øyvor"}, ensure_ascii=False).encode()
    wire.add(responses.GET, SESSION_URL, body=body, content_type="application/json")
    assert EidClient().get_session(REQUEST_ID).first_name == "Åse Øyvor"
