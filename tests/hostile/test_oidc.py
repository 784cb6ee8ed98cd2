"""Hostile OpenID Connect: every check of the relying party (``BROKER_API = "oidc"``).

Through the start view and the one callback URL, against the sandbox's OpenID provider
(the ``eid_broker`` of django-eid, here :func:`serve`): a hostile id_token (each claim
check, each signing trick), a hostile discovery document, userinfo and token endpoint,
and hostile returns (replayed, crossed, another user's or browser's). Each asserts what
the user sees (a page, never a 500), the row (``ERROR`` with the step's code, or still
``PENDING`` where a reload is right), that no success signal fired, and that neither the
number, the secret nor a token reached a log line or the stored error.
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client
from django.utils import timezone

from django_eid import outcomes
from django_eid.models import Identification
from django_eid.sandbox.fake import EidBroker
from tests.conftest import reset_eid_state
from tests.hostile.conftest import Fired, Status, changed, logged_in, snapshot

pytestmark = pytest.mark.django_db

START = "/eid/start/"
CALLBACK = "/eid/oidc/callback/"
SECRET = "s3cr3t-of-the-shop-client"
#: Each preset's OP, at an issuer of the broker's shape, with a client id of its shape.
PRESETS: dict[str, tuple[str, str]] = {
    "idura": ("https://shop-test.idura.broker", "urn:shop:eid"),
    "bankid-no": ("https://auth.current.bankid.no/auth/realms/current", "shop-eid-client"),
    "signicat": ("https://shop.signicat.example/auth/open", "shop-eid-client"),
    "vipps": ("https://apitest.vipps.no/access-management-1.0/access", "shop-eid-client"),
    "generic": ("https://op.example/realm", "shop-eid-client"),
}


# -- the OP and the steps of a flow ------------------------------------------------------
@pytest.fixture
def serve(settings: Any) -> Iterator[Callable[..., EidBroker]]:
    """``serve(preset="idura", **DJANGO_EID)``: the site set up for ``preset``'s OP, and
    the OP served (a second call replaces the settings and serves another)."""
    with ExitStack() as stack:

        def run(preset: str = "idura", **values: Any) -> EidBroker:
            issuer, client_id = PRESETS[preset]
            settings.DJANGO_EID = {
                **settings.DJANGO_EID,
                "BROKER_API": "oidc",
                "OIDC_PRESET": None if preset == "generic" else preset,
                "OIDC_ISSUER": issuer,
                "CLIENT_ID": client_id,
                "CLIENT_SECRET": SECRET,
                "GET_SOCIAL_SECURITY_NUMBER": True,
                "SCOPES": None,
                "BASE_URL": None,
                "AUTH_URL": None,
                **values,
            }
            return stack.enter_context(EidBroker.from_settings())

        yield run


@pytest.fixture
def op(serve: Callable[..., EidBroker]) -> EidBroker:
    return serve()


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="django_eid")
    return caplog


def begin(client: Client, op: EidBroker | None = None, **post: str) -> Identification:
    """Start from the start page; the new PENDING row. With ``op``, the browser then
    visits the authorization endpoint (needed without PAR)."""
    response = client.post(START, post)
    assert response.status_code == 302, response.content.decode()[:500]
    if op is not None:
        op.authorize(response["Location"])
    row = Identification.objects.order_by("-pk").first()
    assert row is not None
    assert row.status == Status.PENDING
    return row


def jwks_fetches(op: EidBroker) -> int:
    assert op.oidc is not None
    jwks = op.oidc.endpoint("jwks")
    return len([call for call in op.mock.calls if call.request.url == jwks])


def document(op: EidBroker, **changes: Any) -> dict[str, Any]:
    """The OP's own discovery document with ``changes`` (``None`` removes a field)."""
    body = dict(op.oidc.discovery().body)  # type: ignore[union-attr]
    body.update(changes)
    return {k: v for k, v in body.items() if v is not None}


def unsigned(header: dict[str, Any], claims: dict[str, Any], parts: int = 3) -> str:
    def b64(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return ".".join([b64(header), b64(claims)] + ["c2ln"] * (parts - 2))


def assert_clean(op: EidBroker, row: Identification, logs: pytest.LogCaptureFixture) -> None:
    """No number, secret or token in a log line or the stored error."""
    person = op.persons.NORWEGIAN
    secrets_ = [person.national_identity_number, SECRET, *op.issued_tokens]
    for text, where in ((logs.text, "the log"), (row.error_message, "the stored error")):
        for value in secrets_:
            assert value not in text, f"{value[:4]}... is in {where}"
        assert "eyJ" not in text, f"a JWT is in {where}"


def assert_failed(
    response: Any,
    row: Identification,
    code: str,
    fired: Fired,
    *,
    says: str = "",
    page: int = 200,
    signals: tuple[str, ...] = ("started", "failed"),
) -> None:
    """The callback ended ``row`` as ERROR with ``code``: the failure page, no success."""
    assert response.status_code == page
    assert "django_eid/error.html" in [t.name for t in response.templates]
    row.refresh_from_db()
    assert (row.status, row.error_code) == (Status.ERROR, code), row.error_message
    assert says in row.error_message
    assert row.social_security_number in ("", None)
    assert row.identity_provider_unique_id in ("", None)
    assert fired.names == list(signals)


def assert_pending_until_healed(
    op: EidBroker, client: Client, url: str, row: Identification, fired: Fired
) -> None:
    """The callback at ``url`` could not reach the provider before the code was spent: the
    unavailable page, the row PENDING, no token call; once the provider is back, a reload
    completes the identification."""
    response = client.get(url)
    assert response.status_code == outcomes.RETRIEVE_UNREACHABLE.status
    row.refresh_from_db()
    assert row.status == Status.PENDING
    assert fired.names == ["started"]
    assert op.token_requests == 0  # the code is not spent on an answer that cannot be used
    op.heal()
    done = client.get(url)
    assert (done.status_code, done["Location"]) == (302, "/")
    row.refresh_from_db()
    assert row.status == Status.SUCCESS
    assert fired.names == ["started", "succeeded"]


# == the id_token, one check at a time ================================================================
def now() -> int:
    return int(time.time())


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
    op: EidBroker, alice_client: Client, fired: Fired, logs: Any, claims: str
) -> None:
    tampered, says = CLAIMS[claims]
    row = begin(alice_client)
    url = op.complete()
    op.tamper_next_token(claims=tampered())
    response = alice_client.get(url)
    assert_failed(response, row, "id_token_invalid", fired, says=says)
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
    op: EidBroker, alice_client: Client, fired: Fired, claims: Callable[[], dict[str, Any]]
) -> None:
    """The checks refuse only what they must (a leeway of 0 would refuse clock skew)."""
    row = begin(alice_client)
    url = op.complete()
    op.tamper_next_token(claims=claims())
    response = alice_client.get(url)
    assert (response.status_code, response["Location"]) == (302, "/")
    row.refresh_from_db()
    assert row.status == Status.SUCCESS
    assert fired.names == ["started", "succeeded"]


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
    fired: Fired,
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
    row = begin(alice_client)
    url = op.complete()
    op.tamper_next_token(header=header, signing=signing)
    response = alice_client.get(url)
    assert_failed(response, row, "id_token_invalid", fired, says=says)
    assert_clean(op, row, logs)


@pytest.mark.parametrize("signing", ["none", "hs256"])
def test_a_generic_op_listing_none_and_hs256_still_gets_no_such_token_through(
    serve: Callable[..., EidBroker], alice_client: Client, fired: Fired, signing: str
) -> None:
    """Without a preset, the OP's list decides, narrowed to asymmetric algorithms."""
    op = serve("generic")
    listed = ["RS256", "ES256", "HS256", "none"]
    op.inject("discovery", body=document(op, id_token_signing_alg_values_supported=listed))
    row = begin(alice_client)
    url = op.complete()
    op.tamper_next_token(signing=signing)
    response = alice_client.get(url)
    assert_failed(response, row, "id_token_invalid", fired, says="not one of")


def test_a_generic_op_token_signed_as_listed_succeeds(
    serve: Callable[..., EidBroker], alice_client: Client, fired: Fired
) -> None:
    op = serve("generic")
    row = begin(alice_client)
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
    op: EidBroker, alice_client: Client, fired: Fired, logs: Any, shape: str
) -> None:
    header, parts, says = SHAPES[shape]
    row = begin(alice_client)
    url = op.complete()
    issuer, client_id = PRESETS["idura"]
    claims = {"iss": issuer, "aud": client_id, "sub": "{x}", "iat": now(), "exp": now() + 300}
    token = unsigned(header, claims, parts)
    body = {"token_type": "Bearer", "access_token": "at-" + "x" * 40, "id_token": token}
    op.inject("token", body=body, times=1)
    response = alice_client.get(url)
    assert_failed(response, row, "id_token_invalid", fired, says=says)
    assert_clean(op, row, logs)


# -- a key the JWKS does not have, and rotation -------------------------------------------------------
def test_a_key_the_jwks_does_not_have_is_refused_after_one_fetch_again(
    op: EidBroker, alice_client: Client, fired: Fired, logs: Any
) -> None:
    row = begin(alice_client)
    url = op.complete()
    op.tamper_next_token(signing="unknown-key")
    response = alice_client.get(url)
    assert_failed(response, row, "id_token_invalid", fired, says="does not have")
    assert jwks_fetches(op) == 2  # the cached set, then once more for the unknown kid
    assert_clean(op, row, logs)


def test_a_rotated_key_is_accepted_after_the_jwks_is_fetched_again(
    op: EidBroker, alice: AbstractBaseUser, alice_client: Client, fired: Fired
) -> None:
    first = begin(alice_client)
    assert alice_client.get(op.complete()).status_code == 302
    assert jwks_fetches(op) == 1
    op.rotate_keys()
    second = begin(alice_client)
    response = alice_client.get(op.complete())
    assert (response.status_code, response["Location"]) == (302, "/")
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, second.status) == (Status.SUCCESS, Status.SUCCESS)
    assert jwks_fetches(op) == 2
    # Later tokens find the new key in the cache.
    third = begin(alice_client)
    assert alice_client.get(op.complete()).status_code == 302
    third.refresh_from_db()
    assert third.status == Status.SUCCESS
    assert jwks_fetches(op) == 2


def test_fetching_the_jwks_again_is_rate_limited(
    op: EidBroker, alice_client: Client, bob_client: Client
) -> None:
    """Tokens naming unknown keys cannot make the site hammer the provider's JWKS."""
    for client in (alice_client, bob_client, alice_client):
        row = begin(client)
        url = op.complete()
        op.tamper_next_token(signing="unknown-key")
        assert client.get(url).status_code == 200
        row.refresh_from_db()
        assert (row.status, row.error_code) == (Status.ERROR, "id_token_invalid")
    assert jwks_fetches(op) == 2


# == the returns ====================================================================================
def test_a_replayed_callback_shows_the_finished_row_and_asks_nothing_again(
    op: EidBroker, alice_client: Client, fired: Fired
) -> None:
    row = begin(alice_client)
    url = op.complete()
    assert alice_client.get(url).status_code == 302
    assert op.token_requests == 1
    before = snapshot()
    fired.clear()
    for client in (alice_client, Client()):
        again = client.get(url)
        assert again.status_code in (200, 302)
        assert again.status_code != 500
    assert op.token_requests == 1
    assert snapshot() == before
    assert fired.names == []
    row.refresh_from_db()
    assert row.status == Status.SUCCESS


def test_the_state_of_one_session_with_the_code_of_another_is_refused(
    op: EidBroker, alice_client: Client, bob_client: Client, fired: Fired, logs: Any
) -> None:
    """Alice's state with Bob's code: the OP refuses the exchange (PKCE, invalid_grant);
    Alice's row ends, Bob's is untouched."""
    mine = begin(alice_client)
    theirs = begin(bob_client)
    fired.clear()
    sessions = op.sessions
    op.complete(request_id=sessions[0].request_id)
    their_url = op.complete(op.persons.SWEDISH, request_id=sessions[1].request_id)
    their_code = parse_qs(urlsplit(their_url).query)["code"][0]
    before = snapshot()
    response = alice_client.get(CALLBACK, {"code": their_code, "state": mine.external_id})
    assert_failed(response, mine, "invalid_grant", fired, says="invalid_grant", signals=("failed",))
    assert changed(before, snapshot()) == {mine.pk}
    theirs.refresh_from_db()
    assert theirs.status == Status.PENDING
    assert_clean(op, mine, logs)


@pytest.mark.parametrize("who", ["another user", "the owner in another browser", "nobody"])
def test_a_callback_in_another_users_or_browsers_hands_is_refused(
    op: EidBroker,
    alice: AbstractBaseUser,
    alice_client: Client,
    bob_client: Client,
    fired: Fired,
    who: str,
) -> None:
    row = begin(alice_client)
    url = op.complete()
    before = snapshot()
    if who == "another user":
        response = bob_client.get(url)
        assert response.status_code == outcomes.INVALID_LINK.status
    elif who == "the owner in another browser":
        response = logged_in(alice).get(url)
        assert response.status_code == 200
        assert response.templates[0].name == "django_eid/elsewhere.html"
    else:
        response = Client().get(url + "&eid_retry=1")
        assert response.status_code in (200, 403)
    assert op.persons.NORWEGIAN.first_name not in response.content.decode()
    assert op.token_requests == 0
    assert snapshot() == before
    assert fired.names == ["started"]
    # The code was not spent: the browser that started still completes.
    done = alice_client.get(url)
    assert (done.status_code, done["Location"]) == (302, "/")
    row.refresh_from_db()
    assert row.status == Status.SUCCESS


@pytest.mark.parametrize(
    "query",
    [
        pytest.param(lambda row: {"code": "abc", "state": "f" * 32}, id="a state naming no row"),
        pytest.param(lambda row: {"code": "abc"}, id="no state"),
        pytest.param(lambda row: {"code": "abc", "state": ""}, id="an empty state"),
        pytest.param(lambda row: {"code": "abc", "state": "x" * 5000}, id="a huge state"),
        pytest.param(
            lambda row: {"code": "abc", "state": [row.external_id, row.external_id]},
            id="the state twice",
        ),
    ],
)
def test_a_callback_naming_no_row_is_refused(
    op: EidBroker, alice_client: Client, fired: Fired, query: Callable[[Any], dict[str, Any]]
) -> None:
    row = begin(alice_client)
    before = snapshot()
    response = alice_client.get(CALLBACK, query(row))
    assert response.status_code == outcomes.INVALID_LINK.status
    assert op.token_requests == 0
    assert snapshot() == before
    assert fired.names == ["started"]


@pytest.mark.parametrize("twice", ["code", "error"])
def test_a_duplicated_code_or_error_ends_the_row_without_a_token_call(
    op: EidBroker, alice_client: Client, fired: Fired, twice: str
) -> None:
    row = begin(alice_client)
    url = op.complete()
    code = parse_qs(urlsplit(url).query)["code"][0]
    values = [code, code] if twice == "code" else ["access_denied", "access_denied"]
    response = alice_client.get(CALLBACK, {twice: values, "state": row.external_id})
    assert_failed(response, row, "invalid_request", fired)
    assert op.token_requests == 0


def test_a_callback_with_more_parameters_than_django_reads_is_a_malformed_link(
    op: EidBroker, alice_client: Client, fired: Fired, settings: Any
) -> None:
    """Past ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` no broker's return: refused before the row is
    looked up; the genuine return still completes it afterwards."""
    row = begin(alice_client)
    url = op.complete()
    flood = "&".join(f"x{i}=1" for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1))
    response = alice_client.get(f"{url}&{flood}")
    assert response.status_code == outcomes.MALFORMED_LINK.status
    row.refresh_from_db()
    assert row.status == Status.PENDING
    assert (op.token_requests, fired.names) == (0, ["started"])
    assert alice_client.get(url).status_code == 302
    row.refresh_from_db()
    assert row.status == Status.SUCCESS


def test_an_error_other_than_access_denied_ends_the_row_with_its_code_and_no_number(
    op: EidBroker, alice_client: Client, fired: Fired, logs: Any
) -> None:
    row = begin(alice_client)
    number = op.persons.NORWEGIAN.national_identity_number
    url = op.fail("login_required", message=f"No login for {number}, try again")
    response = alice_client.get(url)
    assert response.status_code == 200
    row.refresh_from_db()
    assert (row.status, row.error_code, row.error_status) == (
        Status.ERROR,
        "login_required",
        "login_required",
    )
    assert number not in row.error_message
    assert "No login for" in row.error_message
    assert fired.names == ["started", "failed"]
    assert op.token_requests == 0
    assert_clean(op, row, logs)


def test_access_denied_aborts_the_row(op: EidBroker, alice_client: Client, fired: Fired) -> None:
    row = begin(alice_client)
    response = alice_client.get(op.abort())
    assert (response.status_code, response["Location"]) == (302, START)
    assert str(outcomes.ABORTED.message) in alice_client.get(START).content.decode()
    row.refresh_from_db()
    assert row.status == Status.ABORTED
    assert fired.names == ["started", "aborted"]
    assert op.token_requests == 0


# == the discovery document =======================================================================
def broken_documents(op: EidBroker) -> dict[str, Any]:
    issuer = op.oidc.issuer  # type: ignore[union-attr]
    return {
        "another issuer": dict(body=document(op, issuer="https://evil.example")),
        "a token endpoint over http": dict(
            body=document(op, token_endpoint=issuer.replace("https://", "http://") + "/token")
        ),
        "a jwks_uri over http": dict(
            body=document(op, jwks_uri=issuer.replace("https://", "http://") + "/jwks")
        ),
        "no token endpoint": dict(body=document(op, token_endpoint=None)),
        "a relative authorization endpoint": dict(
            body=document(op, authorization_endpoint="/authorize")
        ),
        "no S256": dict(body=document(op, code_challenge_methods_supported=["plain"])),
        "not JSON": dict(body="<html><body>Maintenance</body></html>"),
        "a JSON list": dict(body=[1, 2]),
        "a 404": dict(status=404, body=document(op)),
        "huge": dict(body=b'{"issuer": "' + b"x" * (1024 * 1024 + 1) + b'"}'),
    }


DOCUMENTS = [
    "another issuer",
    "a token endpoint over http",
    "a jwks_uri over http",
    "no token endpoint",
    "a relative authorization endpoint",
    "no S256",
    "not JSON",
    "a JSON list",
    "a 404",
    "huge",
]


@pytest.mark.parametrize("broken", DOCUMENTS)
def test_a_broken_discovery_document_fails_the_start_with_a_page(
    op: EidBroker, alice_client: Client, fired: Fired, logs: Any, broken: str
) -> None:
    op.inject("discovery", **broken_documents(op)[broken])
    response = alice_client.post(START)
    assert response.status_code == 502
    assert "django_eid/error.html" in [t.name for t in response.templates]
    (row,) = Identification.objects.all()
    assert (row.status, row.error_code) == (Status.ERROR, "EidProtocolError")
    assert fired.names == []
    assert op.authorization_requests == []
    assert_clean(op, row, logs)
    op.heal()
    assert alice_client.post(START).status_code == 302


@pytest.mark.parametrize(
    "exception", [requests.ReadTimeout, requests.ConnectTimeout, requests.ConnectionError]
)
def test_a_slow_or_unreachable_discovery_fails_the_start_as_unavailable(
    op: EidBroker, alice_client: Client, fired: Fired, exception: type[Exception]
) -> None:
    op.inject("discovery", exception=exception)
    response = alice_client.post(START)
    assert response.status_code == 503
    (row,) = Identification.objects.all()
    assert (row.status, row.error_code) == (Status.ERROR, "EidUnavailable")
    op.heal()
    assert alice_client.post(START).status_code == 302


def test_a_discovery_slow_at_the_callback_leaves_the_row_pending(
    op: EidBroker, alice_client: Client, fired: Fired
) -> None:
    row = begin(alice_client)
    url = op.complete()
    reset_eid_state()  # the cached document is gone: the callback fetches it again
    op.inject("discovery", exception=requests.ReadTimeout)
    assert_pending_until_healed(op, alice_client, url, row, fired)


# == userinfo ======================================================================================
@pytest.mark.parametrize("preset", ["signicat", "vipps"])
def test_userinfo_about_another_subject_is_refused(
    serve: Callable[..., EidBroker], alice_client: Client, fired: Fired, logs: Any, preset: str
) -> None:
    op = serve(preset)
    row = begin(alice_client)
    url = op.complete()
    number = op.persons.NORWEGIAN.national_identity_number
    other = {"sub": "someone-else", "name": "Mallory", "birthdate": "1990-01-01", "nin": number}
    op.inject("userinfo", body=other, times=1)
    response = alice_client.get(url)
    assert_failed(response, row, "id_token_invalid", fired, says="another subject")
    assert_clean(op, row, logs)


@pytest.mark.parametrize("preset", ["signicat", "vipps"])
def test_userinfo_refusing_the_access_token_ends_the_row(
    serve: Callable[..., EidBroker], alice_client: Client, fired: Fired, logs: Any, preset: str
) -> None:
    op = serve(preset)
    row = begin(alice_client)
    url = op.complete()
    op.inject("userinfo", 401, body={"error": "invalid_token"}, times=1)
    response = alice_client.get(url)
    assert_failed(response, row, "invalid_token", fired, says="401")
    assert_clean(op, row, logs)


# == the token endpoint ============================================================================
def test_invalid_client_at_the_token_endpoint_ends_the_row_and_is_logged_as_an_error(
    op: EidBroker, alice_client: Client, fired: Fired, logs: Any
) -> None:
    row = begin(alice_client)
    url = op.complete()
    op.inject("token", 401, body={"error": "invalid_client", "error_description": SECRET}, times=1)
    response = alice_client.get(url)
    assert_failed(response, row, "invalid_client", fired)
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
    op: EidBroker, alice_client: Client, fired: Fired, logs: Any, fault: dict[str, Any]
) -> None:
    row = begin(alice_client)
    url = op.complete()
    op.inject("token", **fault)
    response = alice_client.get(url)
    assert response.status_code == outcomes.RETRIEVE_UNREACHABLE.status
    row.refresh_from_db()
    assert row.status == Status.PENDING
    assert fired.names == ["started"]
    op.heal()
    done = alice_client.get(url)
    assert (done.status_code, done["Location"]) == (302, "/")
    row.refresh_from_db()
    assert row.status == Status.SUCCESS
    assert fired.names == ["started", "succeeded"]
    assert_clean(op, row, logs)


# == the number in the back channel only, and the same person ================================================
def verified_long_ago(client: Client, op: EidBroker) -> Identification:
    """Alice verified as Kari (number stored) an hour ago: the payout gate asks again."""
    row = begin(client, op)
    assert client.get(op.complete()).status_code == 302
    row.refresh_from_db()
    assert row.status == Status.SUCCESS
    assert row.social_security_number == op.persons.NORWEGIAN.national_identity_number
    hour_ago = timezone.now() - datetime.timedelta(hours=1)
    Identification.objects.filter(pk=row.pk).update(completed_at=hour_ago)
    return row


def start_at_the_gate(client: Client) -> tuple[Identification, str]:
    gate = client.get("/gated/payout/")
    assert gate.status_code == 302
    response = client.post(START, {"next": "/gated/payout/"})
    assert response.status_code == 302
    row = Identification.objects.order_by("-pk").first()
    assert row is not None
    assert (row.status, row.same_person) == (Status.PENDING, True)
    return row, response["Location"]


@pytest.mark.parametrize("par", [None, False])
def test_the_number_is_hinted_only_through_par(
    serve: Callable[..., EidBroker], alice_client: Client, par: bool | None
) -> None:
    op = serve("bankid-no", PREFILL_SAME_PERSON=True, OIDC_PAR=par)
    number = op.persons.NORWEGIAN.national_identity_number
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


def test_an_id_token_of_another_person_on_a_same_person_gate_is_rejected(
    serve: Callable[..., EidBroker], alice_client: Client, fired: Fired
) -> None:
    op = serve("bankid-no", PREFILL_SAME_PERSON=True)
    verified_long_ago(alice_client, op)
    row, _ = start_at_the_gate(alice_client)
    fired.clear()
    response = alice_client.get(op.complete(op.persons.NO_MIDDLE_NAME))
    assert response.status_code == 200
    row.refresh_from_db()
    assert (row.status, row.error_code) == (Status.REJECTED, outcomes.NOT_SAME_PERSON)
    assert fired.names == ["failed"]
    assert alice_client.get("/gated/payout/").status_code == 302


def test_a_level_below_min_loa_is_rejected(
    serve: Callable[..., EidBroker], alice_client: Client, fired: Fired
) -> None:
    op = serve("bankid-no", MIN_LOA="high", IDENTITY_PROVIDER="bis")
    row = begin(alice_client)
    response = alice_client.get(op.complete())
    assert response.status_code == 200
    row.refresh_from_db()
    assert (row.status, row.error_code) == (Status.REJECTED, outcomes.LOA_TOO_LOW)
    assert row.level_of_assurance == "substantial"
    assert fired.names == ["started", "failed"]


def test_bid_meets_min_loa_high(serve: Callable[..., EidBroker], alice_client: Client) -> None:
    op = serve("bankid-no", MIN_LOA="high", IDENTITY_PROVIDER="bid")
    row = begin(alice_client)
    assert alice_client.get(op.complete()).status_code == 302
    row.refresh_from_db()
    assert (row.status, row.level_of_assurance) == (Status.SUCCESS, "high")


def test_a_kid_of_a_key_of_another_type_is_refused(
    serve: Callable[..., EidBroker], alice_client: Client, fired: Fired
) -> None:
    """RS256 (allowed here) over the kid of the OP's EC key: never verified with that key."""
    op = serve("bankid-no")
    listed = ["ES256", "RS256"]
    op.inject("discovery", body=document(op, id_token_signing_alg_values_supported=listed))
    row = begin(alice_client)
    url = op.complete()
    op.tamper_next_token(header={"alg": "RS256"})  # the kid stays the EC key's
    response = alice_client.get(url)
    assert_failed(response, row, "id_token_invalid", fired, says="does not have")


# == the token endpoint's answer, the code, PAR ==========================================================
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
    op: EidBroker, alice_client: Client, fired: Fired, answer: str
) -> None:
    body, code, says = ANSWERS[answer]
    row = begin(alice_client)
    url = op.complete()
    op.inject("token", body=body, times=1)
    response = alice_client.get(url)
    assert_failed(response, row, code, fired, says=says)


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("abc def", id="a space"),
        pytest.param("abc\ndef", id="a newline"),
        pytest.param("x" * 2049, id="too long"),
        pytest.param("k\u00e5de", id="not ASCII"),
    ],
)
def test_a_code_no_provider_issues_ends_the_row_without_a_token_call(
    op: EidBroker, alice_client: Client, fired: Fired, code: str
) -> None:
    row = begin(alice_client)
    op.complete()
    response = alice_client.get(CALLBACK, {"code": code, "state": row.external_id})
    assert_failed(response, row, "invalid_request", fired)
    assert op.token_requests == 0


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
    op: EidBroker, alice_client: Client, fired: Fired, fault: dict[str, Any], page: int, code: str
) -> None:
    op.inject("par", **fault)
    response = alice_client.post(START)
    assert response.status_code == page
    (row,) = Identification.objects.all()
    assert (row.status, row.error_code) == (Status.ERROR, code)
    assert fired.names == []


def test_oidc_par_true_without_a_par_endpoint_fails_the_start(
    serve: Callable[..., EidBroker], alice_client: Client, fired: Fired
) -> None:
    op = serve(OIDC_PAR=True)
    op.inject("discovery", body=document(op, pushed_authorization_request_endpoint=None))
    response = alice_client.post(START)
    assert response.status_code == 502
    (row,) = Identification.objects.all()
    assert (row.status, row.error_code) == (Status.ERROR, "EidProtocolError")
    assert op.authorization_requests == []


# == the JSON API ====================================================================================
API = "/eid/api/identifications/"


def api_begin(client: Client, op: EidBroker) -> tuple[Identification, str]:
    response = client.generic("POST", API, "{}", content_type="application/json")
    assert response.status_code == 201, response.content.decode()[:500]
    started = response.json()
    row = Identification.objects.get(reference=started["reference"])
    return row, started["secret"]


def api_return(client: Client, row: Identification, secret: str, query: str) -> Any:
    body = json.dumps({"query": query, "secret": secret})
    url = f"{API}{row.reference}/return/"
    return client.generic("POST", url, body, content_type="application/json")


def test_the_json_api_finishes_an_oidc_return_and_checks_it_as_the_callback_does(
    op: EidBroker, alice_client: Client, fired: Fired, logs: Any
) -> None:
    row, secret = api_begin(alice_client, op)
    url = op.complete()
    op.tamper_next_token(claims={"nonce": "A" * 43})
    response = api_return(alice_client, row, secret, "eid_return=success&" + urlsplit(url).query)
    assert response.status_code == 200
    assert response.json()["status"] == Status.ERROR
    row.refresh_from_db()
    assert (row.status, row.error_code) == (Status.ERROR, "id_token_invalid")
    assert fired.names == ["started", "failed"]
    assert_clean(op, row, logs)
    assert "eyJ" not in response.content.decode()


def test_access_denied_sent_to_the_json_api_as_a_success_aborts(
    op: EidBroker, alice_client: Client, fired: Fired
) -> None:
    """The front end names the kind of return; the provider's ``error`` decides."""
    row, secret = api_begin(alice_client, op)
    url = op.abort()
    response = api_return(alice_client, row, secret, "eid_return=success&" + urlsplit(url).query)
    assert response.status_code == 200
    row.refresh_from_db()
    assert row.status == Status.ABORTED
    assert fired.names == ["started", "aborted"]
    assert op.token_requests == 0


# == out of reach before and after the code is spent ====================================================
def test_a_jwks_out_of_reach_at_the_callback_spends_no_code_and_a_reload_completes(
    op: EidBroker, alice_client: Client, fired: Fired
) -> None:
    row = begin(alice_client)
    url = op.complete()
    reset_eid_state()  # the cached keys are gone: the callback fetches them again
    op.inject("jwks", exception=requests.ConnectTimeout)
    assert_pending_until_healed(op, alice_client, url, row, fired)


@pytest.mark.parametrize("preset", ["signicat", "vipps"])
def test_userinfo_out_of_reach_after_the_exchange_ends_the_row_once(
    serve: Callable[..., EidBroker], alice_client: Client, fired: Fired, logs: Any, preset: str
) -> None:
    """The code is spent: a reload cannot exchange it again, so the row ends now, with the
    reason, instead of asking the user to reload into an ``invalid_grant``."""
    op = serve(preset)
    row = begin(alice_client)
    url = op.complete()
    op.inject("userinfo", exception=requests.ReadTimeout)
    response = alice_client.get(url)
    assert_failed(response, row, "provider_unreachable", fired, says="userinfo")
    assert op.token_requests == 1
    again = alice_client.get(url)
    assert again.status_code == 200
    assert op.token_requests == 1
    assert_clean(op, row, logs)


def test_a_token_endpoint_redirecting_elsewhere_is_not_followed(
    op: EidBroker, alice_client: Client, fired: Fired, logs: Any
) -> None:
    row = begin(alice_client)
    url = op.complete()
    op.inject("token", 302, body=b"", headers={"Location": "https://evil.example/steal"}, times=1)
    response = alice_client.get(url)
    assert_failed(response, row, "protocol_error", fired)
    assert not [c for c in op.mock.calls if "evil.example" in (c.request.url or "")]
    assert_clean(op, row, logs)


@pytest.mark.parametrize("endpoint", ["jwks", "discovery"])
@pytest.mark.parametrize(
    "fault",
    [
        pytest.param({"status": 503, "body": "<h1>Maintenance</h1>"}, id="a 503 page"),
        pytest.param({"status": 502, "body": {"error": "bad_gateway"}}, id="a 502"),
        pytest.param({"status": 429, "body": {}}, id="a 429"),
    ],
)
def test_metadata_unavailable_at_the_callback_leaves_the_row_pending(
    op: EidBroker, alice_client: Client, fired: Fired, endpoint: str, fault: dict[str, Any]
) -> None:
    row = begin(alice_client)
    url = op.complete()
    reset_eid_state()
    op.inject(endpoint, **fault)
    assert_pending_until_healed(op, alice_client, url, row, fired)


def test_an_error_return_with_hostile_text_is_stored_short_and_printable(
    op: EidBroker, alice_client: Client, fired: Fired
) -> None:
    row = begin(alice_client)
    error = "server_error\x00\n<script>" + "x" * 500
    query = {"error": error, "error_description": "d" * 5000, "state": row.external_id}
    response = alice_client.get(CALLBACK, query)
    assert response.status_code == 200
    row.refresh_from_db()
    assert row.status == Status.ERROR
    assert row.error_code.startswith("server_error<script>")
    assert len(row.error_code) <= 64
    assert all(32 < ord(c) < 127 for c in row.error_code + row.error_status)
    assert len(row.error_message) <= 300
    assert op.token_requests == 0


# -- userinfo as a signed JWT ----------------------------------------------------------------------
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
    fired: Fired,
    logs: Any,
    changes: dict[str, Any],
    signing: str,
    says: str,
) -> None:
    op = serve("signicat")
    row = begin(alice_client)
    url = op.complete()
    body = userinfo_jwt(op, changes, signing)
    op.inject("userinfo", body=body, headers={"Content-Type": "application/jwt"}, times=1)
    response = alice_client.get(url)
    assert_failed(response, row, "id_token_invalid", fired, says=says)
    assert_clean(op, row, logs)


def test_a_signed_userinfo_jwt_of_the_provider_is_read(
    serve: Callable[..., EidBroker], alice_client: Client, fired: Fired
) -> None:
    op = serve("signicat")
    row = begin(alice_client)
    url = op.complete()
    body = userinfo_jwt(op, {})
    op.inject("userinfo", body=body, headers={"Content-Type": "application/jwt"}, times=1)
    response = alice_client.get(url)
    assert (response.status_code, response["Location"]) == (302, "/")
    row.refresh_from_db()
    assert row.status == Status.SUCCESS
    assert row.social_security_number == op.persons.NORWEGIAN.national_identity_number
