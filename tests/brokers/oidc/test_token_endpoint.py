"""The back channel after the return (``BROKER_API = "oidc"``): the code's exchange at the
token endpoint and the identity from userinfo (JSON or a signed JWT), each answering
otherwise: refused, out of reach, without what the protocol requires, about another
subject, redirecting elsewhere. Before the code is spent the row stays PENDING (a reload
completes it); after, it ends once, with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
import requests
from django.test import Client

from django_eid import outcomes
from django_eid.sandbox.fake import EidBroker
from tests.brokers.oidc.conftest import (
    PRESETS,
    SECRET,
    Status,
    assert_clean,
    assert_failed,
    begin,
    unsigned,
)
from tests.fixtures_views import Signals

pytestmark = pytest.mark.django_db


# -- the token endpoint --------------------------------------------------------------------------
def test_invalid_client_at_the_token_endpoint_ends_the_row_and_is_logged_as_an_error(
    op: EidBroker, alice_client: Client, signals: Signals, logs: Any
) -> None:
    row, _ = begin(alice_client)
    url = op.complete()
    op.inject("token", 401, body={"error": "invalid_client", "error_description": SECRET}, times=1)
    response = alice_client.get(url)
    assert_failed(response, row, "invalid_client", signals)
    errors = [
        r for r in logs.records if r.levelno >= logging.ERROR and "invalid_client" in r.getMessage()
    ]
    assert errors, "a refused client (a wrong secret) is an operator's error"
    assert_clean(op, row, logs)


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param({"status": 500, "body": {"error": "server_error"}}, id="a 500"),
        pytest.param({"status": 503, "body": "<h1>Busy</h1>"}, id="a 503 page"),
        pytest.param({"exception": requests.ConnectionError}, id="unreachable"),
        pytest.param({"exception": requests.ReadTimeout}, id="too slow"),
    ],
)
def test_a_token_endpoint_out_of_reach_leaves_the_row_pending_and_a_reload_completes(
    op: EidBroker, alice_client: Client, signals: Signals, logs: Any, fault: dict[str, Any]
) -> None:
    row, _ = begin(alice_client)
    url = op.complete()
    op.inject("token", **fault)
    response = alice_client.get(url)
    assert response.status_code == outcomes.RETRIEVE_UNREACHABLE.status
    row.refresh_from_db()
    assert row.status == Status.PENDING
    assert signals.names == ["identification_started"]
    op.heal()
    done = alice_client.get(url)
    assert (done.status_code, done["Location"]) == (302, "/")
    row.refresh_from_db()
    assert row.status == Status.SUCCESS
    assert signals.names == ["identification_started", "identification_succeeded"]
    assert_clean(op, row, logs)


#: id: (the token endpoint's 200 answer, the error code stored, what it says).
ANSWERS: dict[str, tuple[dict[str, Any], str, str]] = {
    "no id_token": ({"token_type": "Bearer", "access_token": "a" * 43}, "id_token_invalid", ""),
    "an empty id_token": (
        {"token_type": "Bearer", "access_token": "a" * 43, "id_token": ""},
        "id_token_invalid",
        "without an id_token",
    ),
    "another token type": (
        {"token_type": "mac", "access_token": "a" * 43, "id_token": "a.b.c"},
        "protocol_error",
        "Bearer",
    ),
    "no token type": ({"access_token": "a" * 43, "id_token": "a.b.c"}, "protocol_error", "Bearer"),
}


@pytest.mark.parametrize("answer", list(ANSWERS))
def test_a_token_answer_without_what_the_protocol_requires_ends_the_row(
    op: EidBroker, alice_client: Client, signals: Signals, answer: str
) -> None:
    body, code, says = ANSWERS[answer]
    row, _ = begin(alice_client)
    url = op.complete()
    op.inject("token", body=body, times=1)
    response = alice_client.get(url)
    assert_failed(response, row, code, signals, says=says)


def test_a_token_endpoint_redirecting_elsewhere_is_not_followed(
    op: EidBroker, alice_client: Client, signals: Signals, logs: Any
) -> None:
    row, _ = begin(alice_client)
    url = op.complete()
    op.inject("token", 302, body=b"", headers={"Location": "https://evil.example/steal"}, times=1)
    response = alice_client.get(url)
    assert_failed(response, row, "protocol_error", signals)
    assert not [c for c in op.mock.calls if "evil.example" in (c.request.url or "")]
    assert_clean(op, row, logs)


# -- userinfo ----------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["signicat", "vipps"])
def test_userinfo_about_another_subject_is_refused(
    serve: Callable[..., EidBroker], alice_client: Client, signals: Signals, logs: Any, preset: str
) -> None:
    op = serve(preset)
    row, _ = begin(alice_client)
    url = op.complete()
    number = op.persons.NORWEGIAN.national_identity_number
    other = {"sub": "someone-else", "name": "Mallory", "birthdate": "1990-01-01", "nin": number}
    op.inject("userinfo", body=other, times=1)
    response = alice_client.get(url)
    assert_failed(response, row, "id_token_invalid", signals, says="another subject")
    assert_clean(op, row, logs)


@pytest.mark.parametrize("preset", ["signicat", "vipps"])
def test_userinfo_refusing_the_access_token_ends_the_row(
    serve: Callable[..., EidBroker], alice_client: Client, signals: Signals, logs: Any, preset: str
) -> None:
    op = serve(preset)
    row, _ = begin(alice_client)
    url = op.complete()
    op.inject("userinfo", 401, body={"error": "invalid_token"}, times=1)
    response = alice_client.get(url)
    assert_failed(response, row, "invalid_token", signals, says="401")
    assert_clean(op, row, logs)


@pytest.mark.parametrize("preset", ["signicat", "vipps"])
def test_userinfo_out_of_reach_after_the_exchange_ends_the_row_once(
    serve: Callable[..., EidBroker], alice_client: Client, signals: Signals, logs: Any, preset: str
) -> None:
    """The code is spent: a reload cannot exchange it again, so the row ends now, with the
    reason, instead of asking the user to reload into an ``invalid_grant``."""
    op = serve(preset)
    row, _ = begin(alice_client)
    url = op.complete()
    op.inject("userinfo", exception=requests.ReadTimeout)
    response = alice_client.get(url)
    assert_failed(response, row, "provider_unreachable", signals, says="userinfo")
    assert op.token_requests == 1
    again = alice_client.get(url)
    assert again.status_code == 200
    assert op.token_requests == 1
    assert_clean(op, row, logs)


def userinfo_jwt(op: EidBroker, changes: dict[str, Any], signing: str = "RS256") -> bytes:
    """The OP's userinfo of the latest session as a JWT signed with its key (``none``:
    unsigned), with ``changes`` (``None`` removes a claim)."""
    from joserfc import jwt

    from django_eid.sandbox.wire_oidc import signing_key

    assert op.oidc is not None
    claims = {
        **op.oidc.claims(op.sessions[-1]),
        "iss": op.oidc.issuer,
        "aud": PRESETS["signicat"][1],
    }
    claims = {k: v for k, v in {**claims, **changes}.items() if v is not None}
    if signing == "none":
        return unsigned({"alg": "none"}, claims).rsplit(".", 1)[0].encode() + b"."
    kid, key = signing_key(op.store, "RS256")
    return jwt.encode({"alg": "RS256", "kid": kid}, claims, key, algorithms=["RS256"]).encode()


@pytest.mark.parametrize(
    ("changes", "signing", "says"),
    [
        pytest.param({"iss": "https://evil.example"}, "RS256", "issuer", id="another issuer"),
        pytest.param({"aud": "another-client"}, "RS256", "(aud)", id="another audience"),
        pytest.param({"sub": "someone-else"}, "RS256", "another subject", id="another sub"),
        pytest.param({}, "none", "'none'", id="unsigned"),
    ],
)
def test_a_hostile_userinfo_jwt_is_refused(
    serve: Callable[..., EidBroker],
    alice_client: Client,
    signals: Signals,
    logs: Any,
    changes: dict[str, Any],
    signing: str,
    says: str,
) -> None:
    op = serve("signicat")
    row, _ = begin(alice_client)
    url = op.complete()
    body = userinfo_jwt(op, changes, signing)
    op.inject("userinfo", body=body, headers={"Content-Type": "application/jwt"}, times=1)
    response = alice_client.get(url)
    assert_failed(response, row, "id_token_invalid", signals, says=says)
    assert_clean(op, row, logs)


def test_a_signed_userinfo_jwt_of_the_provider_is_read(
    serve: Callable[..., EidBroker], alice_client: Client, signals: Signals
) -> None:
    op = serve("signicat")
    row, _ = begin(alice_client)
    url = op.complete()
    body = userinfo_jwt(op, {})
    op.inject("userinfo", body=body, headers={"Content-Type": "application/jwt"}, times=1)
    response = alice_client.get(url)
    assert (response.status_code, response["Location"]) == (302, "/")
    row.refresh_from_db()
    assert row.status == Status.SUCCESS
    assert row.social_security_number == op.persons.NORWEGIAN.national_identity_number
