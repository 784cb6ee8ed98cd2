"""The authorization request (``BROKER_API = "oidc"``): as the provider receives it (PKCE,
the state, the scopes, the language), pushed (PAR) or through the front channel, the
client's authentication at the PAR and token endpoints, a PAR endpoint answering otherwise,
and the same person's number hinted (``login_hint``) through PAR only."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey

from django_eid.models import Identification
from django_eid.sandbox.fake import EidBroker
from django_eid.sandbox.persons import Person
from tests.brokers.oidc.conftest import (
    NORWEGIAN,
    PERSONS,
    PRESET_NAMES,
    PRESETS,
    REDIRECT_URI,
    SECRET,
    START,
    Status,
    begin,
    calls,
    form_of,
    path_of,
    start_at_the_gate,
    verified_long_ago,
    verify,
)
from tests.fixtures_views import Signals

pytestmark = pytest.mark.django_db

#: The scopes each preset asks for by default, and with GET_SOCIAL_SECURITY_NUMBER.
SCOPES = {
    "idura": ("openid", "openid ssn"),
    "bankid-no": ("openid profile", "openid profile nnin_altsub"),
    "signicat": ("openid profile idp-id", "openid profile idp-id nin"),
    "vipps": ("openid name birthDate", "openid name birthDate nin"),
}


def s256(verifier: str) -> str:
    return (
        base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    )


# -- the request --------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", PRESET_NAMES)
def test_the_authorization_request_as_sent(
    serve: Callable[..., EidBroker], alice_client: Client, preset: str
) -> None:
    op = serve(preset)
    row, location = begin(alice_client)
    (sent,) = op.authorization_requests
    assert row.external_id
    assert {k: sent.get(k) for k in ("response_type", "state", "prompt", "redirect_uri")} == {
        "response_type": "code",
        "state": row.external_id,
        "prompt": "login",
        "redirect_uri": REDIRECT_URI,
    }
    assert sent["client_id"] == PRESETS[preset][1]
    assert sent["scope"] == SCOPES[preset][1]
    assert sent["code_challenge_method"] == "S256"
    assert len(sent["nonce"]) >= 22
    # PAR: the browser's URL carries the client and the pushed request only.
    assert len(calls(op, "par")) == 1
    query = parse_qs(urlsplit(location).query)
    assert set(query) == {"client_id", "request_uri"}
    assert location.startswith(PRESETS[preset][0] + "/authorize?")
    callback = op.complete()
    assert alice_client.get(path_of(callback)).status_code == 302
    # PKCE S256: the verifier goes to the token endpoint only.
    (token_call,) = calls(op, "token")
    verifier = form_of(token_call)["code_verifier"]
    assert len(verifier) == 43
    assert s256(verifier) == sent["code_challenge"]
    for url in (location, callback, *(c.request.url for c in op.mock.calls)):
        assert verifier not in str(url)
    assert verifier not in json.dumps(op.authorization_requests)
    row.refresh_from_db()
    assert row.status == Status.SUCCESS
    assert sent["nonce"] not in json.dumps(row.raw)


@pytest.mark.parametrize("preset", PRESET_NAMES)
def test_without_the_number_no_number_scope_is_asked_and_none_is_stored(
    serve: Callable[..., EidBroker], alice_client: Client, preset: str
) -> None:
    op = serve(preset, GET_SOCIAL_SECURITY_NUMBER=False)
    row = verify(alice_client, op)
    assert op.authorization_requests[0]["scope"] == SCOPES[preset][0]
    assert row.status == Status.SUCCESS
    assert row.social_security_number is None
    assert row.social_security_number_hash is None
    assert NORWEGIAN.national_identity_number not in json.dumps(row.raw)
    assert row.identity_provider_unique_id  # the person is still known by their unique id


@pytest.mark.parametrize(
    ("language", "ui_locales"),
    [("NO", "nb"), ("SV", "sv"), ("DA", "da"), ("FI", "fi"), ("EN", "en")],
)
def test_ui_locales_follow_language(
    serve: Callable[..., EidBroker], alice_client: Client, language: str, ui_locales: str
) -> None:
    op = serve(LANGUAGE=language)
    begin(alice_client)
    assert op.authorization_requests[0]["ui_locales"] == ui_locales


def test_oidc_redirect_uri_is_sent_and_used_in_the_code_exchange(
    serve: Callable[..., EidBroker], alice_client: Client
) -> None:
    op = serve(OIDC_REDIRECT_URI="https://shop.example/eid/oidc/callback/")
    begin(alice_client)
    assert op.authorization_requests[0]["redirect_uri"] == (
        "https://shop.example/eid/oidc/callback/"
    )
    callback = op.complete()
    assert callback.startswith("https://shop.example/eid/oidc/callback/?code=")
    assert alice_client.get(path_of(callback), secure=True).status_code == 302
    (token_call,) = calls(op, "token")
    assert form_of(token_call)["redirect_uri"] == "https://shop.example/eid/oidc/callback/"
    assert Identification.objects.get().status == Status.SUCCESS


@pytest.mark.parametrize("preset", PRESET_NAMES)
def test_without_par_the_request_goes_through_the_front_channel(
    serve: Callable[..., EidBroker], alice_client: Client, preset: str
) -> None:
    op = serve(preset, OIDC_PAR=False)
    row, location = begin(alice_client)
    assert calls(op, "par") == []
    query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
    assert query["state"] == row.external_id
    assert query["code_challenge_method"] == "S256"
    assert "request_uri" not in query
    picker = op.authorize(location)
    assert picker.startswith("http")
    assert op.authorization_requests == [query]
    response = alice_client.get(path_of(op.complete()))
    assert response.status_code == 302
    row.refresh_from_db()
    assert row.status == Status.SUCCESS


@pytest.mark.parametrize(
    ("fault", "page", "code"),
    [
        pytest.param(
            {"status": 201, "body": {"expires_in": 120}},
            502,
            "EidProtocolError",
            id="no request_uri",
        ),
        pytest.param(
            {"status": 201, "body": {"request_uri": "urn:x\n", "expires_in": 120}},
            502,
            "EidProtocolError",
            id="a request_uri with a newline",
        ),
        pytest.param(
            {"status": 400, "body": {"error": "invalid_request"}}, 502, "TokenError", id="a 400"
        ),
        pytest.param(
            {"status": 401, "body": {"error": "invalid_client"}}, 502, "InvalidClient", id="a 401"
        ),
    ],
)
def test_a_par_endpoint_answering_otherwise_fails_the_start_with_a_page(
    op: EidBroker,
    alice_client: Client,
    signals: Signals,
    fault: dict[str, Any],
    page: int,
    code: str,
) -> None:
    op.inject("par", **fault)
    response = alice_client.post(START)
    assert response.status_code == page
    (row,) = Identification.objects.all()
    assert (row.status, row.error_code) == (Status.ERROR, code)
    assert signals.names == []


# -- client authentication ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "values",
    [
        {"TOKEN_AUTH_METHOD": "basic", "CLIENT_SECRET": "s3+cr/3t%:x"},
        {"CLIENT_SECRET": "s3+cr/3t%:x"},  # basic is the default
    ],
    ids=["basic", "the default"],
)
def test_client_secret_basic_urlencodes_before_base64(
    serve: Callable[..., EidBroker], alice_client: Client, values: dict[str, str]
) -> None:
    op = serve(**values)
    row = verify(alice_client, op)
    assert row.status == Status.SUCCESS
    expected = "Basic " + base64.b64encode(b"urn%3Ashop%3Aeid:s3%2Bcr%2F3t%25%3Ax").decode()
    for endpoint in ("par", "token"):
        (call,) = calls(op, endpoint)
        assert call.request.headers["Authorization"] == expected
        assert "client_secret" not in form_of(call)


def test_client_secret_post(serve: Callable[..., EidBroker], alice_client: Client) -> None:
    op = serve(TOKEN_AUTH_METHOD="post")
    row = verify(alice_client, op)
    assert row.status == Status.SUCCESS
    for endpoint in ("par", "token"):
        (call,) = calls(op, endpoint)
        assert "Authorization" not in call.request.headers
        form = form_of(call)
        assert (form["client_id"], form["client_secret"]) == (PRESETS["idura"][1], SECRET)


RSA_PEM = RSAKey.generate_key(2048).as_pem(private=True).decode()
EC_PEM = ECKey.generate_key("P-256").as_pem(private=True).decode()


@pytest.mark.parametrize(
    ("pem", "kid", "alg"),
    [(RSA_PEM, "shop-rsa-1", "RS256"), (EC_PEM, "shop-ec-1", "ES256")],
    ids=["rsa", "ec"],
)
def test_private_key_jwt(
    serve: Callable[..., EidBroker], alice_client: Client, pem: str, kid: str, alg: str
) -> None:
    op = serve(
        TOKEN_AUTH_METHOD="private_key_jwt",
        OIDC_PRIVATE_KEY=pem,
        OIDC_PRIVATE_KEY_ID=kid,
        CLIENT_SECRET=None,
    )
    row = verify(alice_client, op)
    assert row.status == Status.SUCCESS
    key = RSAKey.import_key(pem) if alg == "RS256" else ECKey.import_key(pem)
    assertions = []
    for endpoint in ("par", "token"):
        (call,) = calls(op, endpoint)
        assert "Authorization" not in call.request.headers
        form = form_of(call)
        assert "client_secret" not in form
        assert form["client_assertion_type"] == (
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        )
        token = jwt.decode(form["client_assertion"], key, algorithms=[alg])
        assert token.header["kid"] == kid
        assert token.header["alg"] == alg
        claims = token.claims
        assert claims["iss"] == claims["sub"] == PRESETS["idura"][1]
        assert claims["aud"] == call.request.url
        assert 0 < claims["exp"] - claims["iat"] <= 300
        assertions.append(claims["jti"])
    assert len(set(assertions)) == 2  # a new jti for each call


# -- a same-person re-verification: the login_hint ------------------------------------------
#: (preset, provider, person, the login_hint of the person's number)
HINTS = [
    ("idura", "no-bankid", NORWEGIAN, "BID:{}"),
    ("idura", "no-bankid-substantial", NORWEGIAN, "BIS:{}"),
    ("idura", "se-bankid", PERSONS.SWEDISH, "sub:{}"),
    ("idura", "dk-mitid", PERSONS.DANISH, "sub:{}"),
    ("bankid-no", "bid", NORWEGIAN, "BID:{}"),
    ("bankid-no", "bis", NORWEGIAN, "BIS:{}"),
    ("bankid-no", None, NORWEGIAN, ":{}"),
    ("signicat", "nbid", NORWEGIAN, None),
    ("vipps", None, NORWEGIAN, None),
]


@pytest.mark.parametrize(
    ("preset", "provider", "person", "hint"),
    HINTS,
    ids=[f"{p}-{name}" for p, name, *_ in HINTS],
)
def test_a_same_person_reverification_hints_the_number_through_par_only(
    serve: Callable[..., EidBroker],
    alice_client: Client,
    preset: str,
    provider: str | None,
    person: Person,
    hint: str | None,
) -> None:
    op = serve(preset, PREFILL_SAME_PERSON=True, IDENTITY_PROVIDER=provider)
    assert verify(alice_client, op, person).status == Status.SUCCESS
    assert "login_hint" not in op.authorization_requests[0]
    row, location = start_at_the_gate(alice_client)
    sent = op.authorization_requests[1]
    number = person.national_identity_number
    if hint is None:
        assert "login_hint" not in sent
    else:
        assert sent["login_hint"] == hint.format(number)
    assert number not in location
    response = alice_client.get(path_of(op.complete(person)))
    assert response.status_code == 302
    row.refresh_from_db()
    assert (row.status, row.same_person) == (Status.SUCCESS, True)


@pytest.mark.parametrize("par", [None, False], ids=["PAR", "no PAR"])
def test_the_number_is_hinted_only_through_par(
    serve: Callable[..., EidBroker], alice_client: Client, par: bool | None
) -> None:
    # No eID named: the hint names none either (":<number>").
    op = serve("bankid-no", PREFILL_SAME_PERSON=True, OIDC_PAR=par, IDENTITY_PROVIDER=None)
    number = NORWEGIAN.national_identity_number
    verified_long_ago(alice_client, op)
    _, location = start_at_the_gate(alice_client)
    assert number not in location
    page = op.authorize(location)
    assert number not in page
    request = op.authorization_requests[-1]
    if par is None:
        assert request["login_hint"] == f":{number}"  # pushed: the back channel
        assert set(parse_qs(urlsplit(location).query)) == {"client_id", "request_uri"}
    else:
        assert number not in json.dumps(request)
        assert "login_hint" not in parse_qs(urlsplit(location).query)
