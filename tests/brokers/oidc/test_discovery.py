"""The provider's metadata (``BROKER_API = "oidc"``): its discovery document and its keys
(JWKS), fetched once and cached, fetched again for a key the cache does not have (at a
limited rate), refused when broken, and out of reach at the start (an error page) or at
the callback (the row stays PENDING and spends no code: a reload completes it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import requests
from django.core.cache import caches
from django.test import Client
from joserfc import jwt
from joserfc.jwk import RSAKey

from django_eid.brokers.oidc import OidcApi
from django_eid.client import get_client
from django_eid.exceptions import IdTokenInvalid
from django_eid.models import Identification
from django_eid.sandbox.fake import EidBroker
from tests.brokers.oidc.conftest import (
    START,
    Status,
    assert_clean,
    assert_failed,
    assert_pending_until_healed,
    begin,
    calls,
    document,
    verify,
)
from tests.conftest import reset_eid_state
from tests.fixtures_client import SettingsWrapper
from tests.fixtures_views import Signals

pytestmark = pytest.mark.django_db


# -- the discovery document ------------------------------------------------------------------
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
    op: EidBroker, alice_client: Client, signals: Signals, logs: Any, broken: str
) -> None:
    op.inject("discovery", **broken_documents(op)[broken])
    response = alice_client.post(START)
    assert response.status_code == 502
    assert "django_eid/error.html" in [t.name for t in response.templates]
    (row,) = Identification.objects.all()
    assert (row.status, row.error_code) == (Status.ERROR, "EidProtocolError")
    assert signals.names == []
    assert op.authorization_requests == []
    assert_clean(op, row, logs)
    op.heal()
    assert alice_client.post(START).status_code == 302


@pytest.mark.parametrize(
    "exception", [requests.ReadTimeout, requests.ConnectTimeout, requests.ConnectionError]
)
def test_a_slow_or_unreachable_discovery_fails_the_start_as_unavailable(
    op: EidBroker, alice_client: Client, signals: Signals, exception: type[Exception]
) -> None:
    op.inject("discovery", exception=exception)
    response = alice_client.post(START)
    assert response.status_code == 503
    (row,) = Identification.objects.all()
    assert (row.status, row.error_code) == (Status.ERROR, "EidUnavailable")
    op.heal()
    assert alice_client.post(START).status_code == 302


def test_discovery_and_jwks_are_fetched_once_for_several_logins(
    settings: SettingsWrapper, serve: Callable[..., EidBroker], alice_client: Client
) -> None:
    settings.CACHES = {
        **settings.CACHES,
        "tokens": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "t"},
    }
    op = serve(TOKEN_CACHE="tokens")
    for _ in range(3):
        assert verify(alice_client, op).status == Status.SUCCESS
    assert (len(calls(op, "discovery")), len(calls(op, "jwks"))) == (1, 1)
    caches["default"].clear()  # not TOKEN_CACHE: nothing fetched again
    assert verify(alice_client, op).status == Status.SUCCESS
    assert (len(calls(op, "discovery")), len(calls(op, "jwks"))) == (1, 1)
    caches["tokens"].clear()
    assert verify(alice_client, op).status == Status.SUCCESS
    assert (len(calls(op, "discovery")), len(calls(op, "jwks"))) == (2, 2)
    assert len(calls(op, "token")) == 5


SLASHED = "https://apitest.vipps.no/access-management-1.0/access/"


def test_an_issuer_ending_in_a_slash_is_discovered_at_its_well_known_url(
    serve: Callable[..., EidBroker], alice_client: Client
) -> None:
    """Vipps' issuer ends in '/': its document is at ``{issuer without it}/.well-known/...``
    (OpenID Connect Discovery 4), and its ``issuer`` is compared as it is spelled."""
    op = serve("vipps", OIDC_ISSUER=SLASHED)
    begin(alice_client)
    fetched = [c.request.url for c in op.mock.calls if "well-known" in str(c.request.url)]
    assert fetched == [SLASHED + ".well-known/openid-configuration"]


def test_par_required_without_a_par_endpoint_fails_the_start_clearly(
    serve: Callable[..., EidBroker], alice_client: Client, signals: Signals
) -> None:
    op = serve(OIDC_PAR=True)
    op.inject("discovery", body=document(op, pushed_authorization_request_endpoint=None))
    response = alice_client.post(START)
    assert response.status_code == 502
    assert b"Identification failed" in response.content
    assert op.authorization_requests == []
    (row,) = Identification.objects.all()
    assert (row.status, row.error_code) == (Status.ERROR, "EidProtocolError")
    assert "pushed_authorization_request_endpoint" in row.error_message
    assert signals.names == []


# -- the keys ----------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["idura", "bankid-no"])
def test_a_token_signed_with_a_rotated_key_verifies_after_one_jwks_refetch(
    serve: Callable[..., EidBroker], alice_client: Client, preset: str
) -> None:
    op = serve(preset)
    assert verify(alice_client, op).status == Status.SUCCESS
    assert len(calls(op, "jwks")) == 1
    op.rotate_keys()
    assert verify(alice_client, op).status == Status.SUCCESS
    assert len(calls(op, "jwks")) == 2
    # Later tokens find the new key in the cache.
    assert verify(alice_client, op).status == Status.SUCCESS
    assert len(calls(op, "jwks")) == 2
    assert len(calls(op, "discovery")) == 1


def test_a_key_the_jwks_does_not_have_is_refused_after_one_fetch_again(
    op: EidBroker, alice_client: Client, signals: Signals, logs: Any
) -> None:
    row, _ = begin(alice_client)
    url = op.complete()
    op.tamper_next_token(signing="unknown-key")
    response = alice_client.get(url)
    assert_failed(response, row, "id_token_invalid", signals, says="does not have")
    assert len(calls(op, "jwks")) == 2  # the cached set, then once more for the unknown kid
    assert_clean(op, row, logs)


def test_a_second_key_rotation_within_the_refresh_interval_loses_no_identification(
    op: EidBroker, alice_client: Client
) -> None:
    """The code is spent when the token names a key the JWKS fetched a moment ago does not
    have: a token of the token endpoint may fetch the keys once more within the interval."""
    assert verify(alice_client, op).status == Status.SUCCESS
    op.rotate_keys()
    assert verify(alice_client, op).status == Status.SUCCESS  # the interval's one refetch
    op.rotate_keys()
    assert verify(alice_client, op).status == Status.SUCCESS  # one more, for this token
    assert len(calls(op, "jwks")) == 3


def test_each_token_of_the_token_endpoint_fetches_the_jwks_once_at_most(
    op: EidBroker, alice_client: Client, bob_client: Client
) -> None:
    """Tokens naming unknown keys cannot make the site hammer the provider's JWKS: one
    fetch each, and each needs a login at the provider."""
    for client in (alice_client, bob_client, alice_client):
        row, _ = begin(client)
        url = op.complete()
        op.tamper_next_token(signing="unknown-key")
        assert client.get(url).status_code == 200
        row.refresh_from_db()
        assert (row.status, row.error_code) == (Status.ERROR, "id_token_invalid")
    assert len(calls(op, "jwks")) == 1 + 3


def test_a_token_from_elsewhere_fetches_the_jwks_once_a_minute_at_most(
    op: EidBroker, alice_client: Client
) -> None:
    """A token the client did not ask the provider for (handed to ``validate_id_token``
    from anywhere else) gets the interval's one fetch, and no more."""
    assert verify(alice_client, op).status == Status.SUCCESS
    api = get_client().api
    assert isinstance(api, OidcApi)
    stranger = RSAKey.generate_key(2048, parameters={"kid": "from-elsewhere"})
    token = jwt.encode({"alg": "RS256", "kid": "from-elsewhere"}, {"sub": "x"}, stranger)
    for fetches in (2, 2, 2):
        with pytest.raises(IdTokenInvalid, match="does not have"):
            api.validate_id_token(token, nonce=None)
        assert len(calls(op, "jwks")) == fetches


# -- out of reach at the callback -----------------------------------------------------------------
def test_a_discovery_slow_at_the_callback_leaves_the_row_pending(
    op: EidBroker, alice_client: Client, signals: Signals
) -> None:
    row, _ = begin(alice_client)
    url = op.complete()
    reset_eid_state()  # the cached document is gone: the callback fetches it again
    op.inject("discovery", exception=requests.ReadTimeout)
    assert_pending_until_healed(op, alice_client, url, row, signals)


def test_a_jwks_out_of_reach_at_the_callback_spends_no_code_and_a_reload_completes(
    op: EidBroker, alice_client: Client, signals: Signals
) -> None:
    row, _ = begin(alice_client)
    url = op.complete()
    reset_eid_state()  # the cached keys are gone: the callback fetches them again
    op.inject("jwks", exception=requests.ConnectTimeout)
    assert_pending_until_healed(op, alice_client, url, row, signals)


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
    op: EidBroker, alice_client: Client, signals: Signals, endpoint: str, fault: dict[str, Any]
) -> None:
    row, _ = begin(alice_client)
    url = op.complete()
    reset_eid_state()
    op.inject(endpoint, **fault)
    assert_pending_until_healed(op, alice_client, url, row, signals)
