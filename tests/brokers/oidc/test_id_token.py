"""The id_token, one check of the relying party at a time (``BROKER_API = "oidc"``): each
claim check, the leeway for clock skew, the signature and its algorithm (a preset's, or a
generic provider's list), tokens of other shapes, a key of another type.

Each hostile token ends the row as ``ERROR`` with ``id_token_invalid``: the failure page
(never a 500), no success signal, and neither the number, the secret nor a token in a log
line or the stored error (:func:`~tests.brokers.oidc.conftest.assert_clean`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from django_eid.sandbox.fake import EidBroker
from tests.brokers.oidc.conftest import (
    PRESETS,
    Status,
    assert_clean,
    assert_failed,
    begin,
    document,
    now,
    unsigned,
)
from tests.fixtures_views import Signals

pytestmark = pytest.mark.django_db


#: Seconds past what any clock skew explains (the spec allows at most 2 minutes) and
#: well within it: literal, so a check that changes the relying party's leeway fails.
BEYOND_SKEW = 150
WITHIN_SKEW = 60


#: id: (the tampered claims, what the stored error says). Each breaks one check of
#: ``OidcApi._check_claims`` / ``validate_id_token``; every other claim stays valid.
CLAIMS: dict[str, tuple[Callable[[], dict[str, Any]], str]] = {
    "another issuer": (lambda: {"iss": "https://evil.example"}, "issuer"),
    "the issuer with a trailing slash": (lambda: {"iss": PRESETS["idura"][0] + "/"}, "issuer"),
    "no issuer": (lambda: {"iss": None}, "issuer"),
    "another audience": (lambda: {"aud": "another-client"}, "(aud)"),
    "no audience": (lambda: {"aud": None}, "(aud)"),
    "another audience too": (
        lambda: {"aud": [PRESETS["idura"][1], "another-client"]},
        "another audience too",
    ),
    "another audience too, azp this client": (
        lambda: {"aud": [PRESETS["idura"][1], "another-client"], "azp": PRESETS["idura"][1]},
        "another audience too",
    ),
    "the audience twice, no azp": (
        lambda: {"aud": [PRESETS["idura"][1], PRESETS["idura"][1]]},
        "several audiences",
    ),
    "the audience twice, azp of another": (
        lambda: {"aud": [PRESETS["idura"][1], PRESETS["idura"][1]], "azp": "another-client"},
        "several audiences",
    ),
    "azp of another client": (lambda: {"azp": "another-client"}, "azp is another client"),
    "expired past the leeway": (lambda: {"exp": now() - BEYOND_SKEW}, "(exp)"),
    "no exp": (lambda: {"exp": None}, "(exp)"),
    "exp a string": (lambda: {"exp": str(now() + 300)}, "(exp)"),
    "issued in the future": (lambda: {"iat": now() + BEYOND_SKEW}, "(iat)"),
    "no iat": (lambda: {"iat": None}, "(iat)"),
    "issued at the epoch": (lambda: {"iat": 0}, "issued too long ago (iat)"),
    "issued an hour ago": (lambda: {"iat": now() - 3600}, "issued too long ago (iat)"),
    "not valid yet": (lambda: {"nbf": now() + BEYOND_SKEW}, "(nbf)"),
    "nbf a string": (lambda: {"nbf": "soon"}, "(nbf)"),
    "no sub": (lambda: {"sub": None}, "no sub"),
    "an empty sub": (lambda: {"sub": ""}, "no sub"),
    "another nonce": (lambda: {"nonce": "A" * 43}, "nonce"),
    "no nonce": (lambda: {"nonce": None}, "nonce"),
    "another at_hash": (lambda: {"at_hash": "AAAAAAAAAAAAAAAAAAAAAA"}, "at_hash"),
}


@pytest.mark.parametrize("claims", list(CLAIMS))
def test_an_id_token_failing_a_claim_check_ends_the_row_as_an_error(
    op: EidBroker, alice_client: Client, signals: Signals, logs: Any, claims: str
) -> None:
    tampered, says = CLAIMS[claims]
    row, _ = begin(alice_client)
    url = op.complete()
    op.tamper_next_token(claims=tampered())
    response = alice_client.get(url)
    assert_failed(response, row, "id_token_invalid", signals, says=says)
    assert op.token_requests == 1
    assert_clean(op, row, logs)
    # The code is spent: a reload shows the same outcome, and asks nothing again.
    again = alice_client.get(url)
    assert again.status_code == 200
    assert op.token_requests == 1
    row.refresh_from_db()
    assert row.status == Status.ERROR


@pytest.mark.parametrize(
    "claims",
    [
        pytest.param(lambda: {"exp": now() - WITHIN_SKEW}, id="expired within the leeway"),
        pytest.param(lambda: {"iat": now() + WITHIN_SKEW}, id="iat within the leeway"),
        pytest.param(lambda: {"iat": now() - 600 - WITHIN_SKEW}, id="iat ten minutes ago"),
        pytest.param(lambda: {"nbf": now() + WITHIN_SKEW}, id="nbf within the leeway"),
        pytest.param(lambda: {"at_hash": None}, id="no at_hash"),
        pytest.param(lambda: {"aud": [PRESETS["idura"][1]]}, id="aud a list of one"),
        pytest.param(
            lambda: {"aud": [PRESETS["idura"][1]] * 2, "azp": PRESETS["idura"][1]},
            id="the audience twice, azp this client",
        ),
    ],
)
def test_an_id_token_within_the_rules_succeeds(
    op: EidBroker, alice_client: Client, signals: Signals, claims: Callable[[], dict[str, Any]]
) -> None:
    """The checks refuse only what they must (a leeway of 0 would refuse clock skew)."""
    row, _ = begin(alice_client)
    url = op.complete()
    op.tamper_next_token(claims=claims())
    response = alice_client.get(url)
    assert (response.status_code, response["Location"]) == (302, "/")
    row.refresh_from_db()
    assert row.status == Status.SUCCESS
    assert signals.names == ["identification_started", "identification_succeeded"]


# -- the signature and the algorithm ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("preset", "signing", "header", "says"),
    [
        ("idura", "none", {}, "'none'"),
        ("idura", "hs256", {}, "'HS256'"),
        ("idura", "bad-signature", {}, "signature does not verify"),
        ("bankid-no", "bad-signature", {}, "signature does not verify"),
        # BankID Norge signs ES256 only (its discovery says so): an RS256 token is refused.
        ("bankid-no", None, {"alg": "RS256"}, "'RS256'"),
        # Idura's preset is RS256 only, whatever its discovery document lists (below).
        ("idura", None, {"alg": "ES256"}, "'ES256'"),
    ],
)
def test_an_id_token_signed_otherwise_is_refused(
    serve: Callable[..., EidBroker],
    alice_client: Client,
    signals: Signals,
    logs: Any,
    preset: str,
    signing: str | None,
    header: dict[str, Any],
    says: str,
) -> None:
    op = serve(preset)
    if preset == "idura" and header.get("alg") == "ES256":
        op.inject(
            "discovery", body=document(op, id_token_signing_alg_values_supported=["RS256", "ES256"])
        )
    row, _ = begin(alice_client)
    url = op.complete()
    op.tamper_next_token(header=header, signing=signing)
    response = alice_client.get(url)
    assert_failed(response, row, "id_token_invalid", signals, says=says)
    assert_clean(op, row, logs)


@pytest.mark.parametrize("signing", ["none", "hs256"])
def test_a_generic_op_listing_none_and_hs256_still_gets_no_such_token_through(
    serve: Callable[..., EidBroker], alice_client: Client, signals: Signals, signing: str
) -> None:
    """Without a preset, the OP's list decides, narrowed to asymmetric algorithms."""
    op = serve("generic")
    listed = ["RS256", "ES256", "HS256", "none"]
    op.inject("discovery", body=document(op, id_token_signing_alg_values_supported=listed))
    row, _ = begin(alice_client)
    url = op.complete()
    op.tamper_next_token(signing=signing)
    response = alice_client.get(url)
    assert_failed(response, row, "id_token_invalid", signals, says="not one of")


def test_a_generic_op_token_signed_as_listed_succeeds(
    serve: Callable[..., EidBroker], alice_client: Client, signals: Signals
) -> None:
    op = serve("generic")
    row, _ = begin(alice_client)
    response = alice_client.get(op.complete())
    assert response.status_code == 302
    row.refresh_from_db()
    assert row.status == Status.SUCCESS


#: id: (the header, how many parts, what the stored error says); what the sandbox OP
#: cannot sign, answered by its token endpoint as it is.
SHAPES: dict[str, tuple[dict[str, Any], int, str]] = {
    "JWE-shaped": ({"alg": "RSA-OAEP", "enc": "A256GCM"}, 5, "encrypted (JWE)"),
    "four parts": ({"alg": "RS256"}, 4, "not a signed JWT"),
    "two parts": ({"alg": "RS256"}, 2, "not a signed JWT"),
    "no alg": ({"kid": "k"}, 3, "'NoneType'"),
    "alg a list": ({"alg": ["RS256"]}, 3, "'list'"),
    "a kid that is a number": ({"alg": "RS256", "kid": 42}, 3, "does not have"),
    "no kid, forged signature": ({"alg": "RS256"}, 3, "signature does not verify"),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_an_id_token_of_another_shape_is_refused(
    op: EidBroker, alice_client: Client, signals: Signals, logs: Any, shape: str
) -> None:
    header, parts, says = SHAPES[shape]
    row, _ = begin(alice_client)
    url = op.complete()
    issuer, client_id = PRESETS["idura"]
    claims = {"iss": issuer, "aud": client_id, "sub": "{x}", "iat": now(), "exp": now() + 300}
    token = unsigned(header, claims, parts)
    body = {"token_type": "Bearer", "access_token": "at-" + "x" * 40, "id_token": token}
    op.inject("token", body=body, times=1)
    response = alice_client.get(url)
    assert_failed(response, row, "id_token_invalid", signals, says=says)
    assert_clean(op, row, logs)


def test_a_kid_of_a_key_of_another_type_is_refused(
    serve: Callable[..., EidBroker], alice_client: Client, signals: Signals
) -> None:
    """RS256 (allowed here) over the kid of the OP's EC key: never verified with that key."""
    op = serve("bankid-no")
    listed = ["ES256", "RS256"]
    op.inject("discovery", body=document(op, id_token_signing_alg_values_supported=listed))
    row, _ = begin(alice_client)
    url = op.complete()
    op.tamper_next_token(header={"alg": "RS256"})  # the kid stays the EC key's
    response = alice_client.get(url)
    assert_failed(response, row, "id_token_invalid", signals, says="does not have")
