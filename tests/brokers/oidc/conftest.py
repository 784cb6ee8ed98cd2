"""Shared by the OpenID Connect tests: the site set up for a preset's provider, that
provider served (the sandbox's OP, :class:`~django_eid.sandbox.fake.EidBroker`, at an issuer
of the preset's shape), the steps of a login, and what every hostile case asserts.

``op`` is the OP of the ``idura`` preset; ``serve(preset, **DJANGO_EID)`` sets the site up
for another preset or other settings and serves its OP (a second call replaces both).
"""

from __future__ import annotations

import base64
import copy
import datetime
import json
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from django_eid import outcomes
from django_eid.models import Identification
from django_eid.sandbox import wire_oidc
from django_eid.sandbox.fake import EidBroker
from django_eid.sandbox.persons import Person, builtin_persons
from tests.fixtures_broker import jwts_in, op_keys
from tests.fixtures_client import SettingsWrapper
from tests.fixtures_views import Signals

Status = Identification.Status
PERSONS = builtin_persons()
NORWEGIAN = PERSONS.NORWEGIAN
START = "/eid/start/"
CALLBACK = "/eid/oidc/callback/"
#: The redirect URI as the provider receives it.
REDIRECT_URI = f"http://testserver{CALLBACK}"
SECRET = "s3cr3t-of-the-shop-client"
#: Each preset's OP, at an issuer of the broker's shape, with a client id of its shape;
#: ``generic``: no preset, the provider's discovery document decides.
PRESETS: dict[str, tuple[str, str]] = {
    "idura": ("https://shop-test.idura.broker", "urn:shop:eid"),
    "bankid-no": ("https://auth.current.bankid.no/auth/realms/current", "shop-eid-client"),
    "signicat": ("https://shop.sandbox.signicat.com/auth/open", "shop-eid-client"),
    "vipps": ("https://apitest.vipps.no/access-management-1.0/access", "shop-eid-client"),
    "generic": ("https://op.example/realm", "shop-eid-client"),
}
#: The presets of django-eid (``OIDC_PRESET``).
PRESET_NAMES = sorted(name for name in PRESETS if name != "generic")
#: The eID each preset's site asks for unless a test says otherwise (``IDENTITY_PROVIDER``):
#: a Norwegian's BankID (Vipps has no other).
DEFAULT_PROVIDER = {"idura": "no-bankid", "bankid-no": "bid", "signicat": "nbid"}
#: The presets whose identity comes from userinfo too.
USERINFO_PRESETS = ("signicat", "vipps")


def from_the_op(params: dict[str, Any]) -> dict[str, Any]:
    """An authorization response's ``params`` as the provider sends them: with its ``iss``
    (RFC 9207, which the sandbox OP advertises), for a return a test builds by hand."""
    from django_eid.conf import eid_settings

    return {**params, "iss": eid_settings.OIDC_ISSUER}


# -- the OP -------------------------------------------------------------------------------
def site_settings(base: dict[str, Any], preset: str, **values: Any) -> dict[str, Any]:
    """``DJANGO_EID`` of a site whose broker is ``preset``'s OP (see :data:`PRESETS`)."""
    issuer, client_id = PRESETS[preset]
    return {
        **base,
        "BROKER_API": "oidc",
        "OIDC_PRESET": None if preset == "generic" else preset,
        "OIDC_ISSUER": issuer,
        "CLIENT_ID": client_id,
        "CLIENT_SECRET": SECRET,
        # The generic preset reads no number (check W035 says so if asked for).
        "GET_SOCIAL_SECURITY_NUMBER": preset != "generic",
        "SCOPES": None,
        "BASE_URL": None,
        "AUTH_URL": None,
        "IDENTITY_PROVIDER": DEFAULT_PROVIDER.get(preset),
        **values,
    }


@pytest.fixture
def serve(settings: SettingsWrapper) -> Iterator[Callable[..., EidBroker]]:
    """``serve(preset="idura", **DJANGO_EID)``: the site set up for ``preset``'s OP, and
    the OP served (a second call replaces the settings and serves another)."""
    with ExitStack() as stack:

        def run(preset: str = "idura", **values: Any) -> EidBroker:
            settings.DJANGO_EID = site_settings(settings.DJANGO_EID, preset, **values)
            op = stack.enter_context(EidBroker.from_settings())
            # The keys of the run (a 2048-bit RSA key takes some 70 ms to make): the OP
            # makes its own on first use, so they are in place before any.
            op.store.set(wire_oidc._KEYS, copy.deepcopy(op_keys()), wire_oidc.KEYS_LIFETIME)
            return op

        yield run


@pytest.fixture
def op(serve: Callable[..., EidBroker]) -> EidBroker:
    """The OP of the ``idura`` preset, the site set up for it."""
    return serve()


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level("DEBUG", logger="django_eid")
    return caplog


# -- the steps of a login ----------------------------------------------------------------------
def path_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


def begin(client: Client, **post: str) -> tuple[Identification, str]:
    """POST the start view: the new PENDING row, and where the browser is sent."""
    response = client.post(START, post)
    assert response.status_code == 302, response.content.decode()[:500]
    row = Identification.objects.latest("pk")
    assert row.status == Status.PENDING
    return row, response["Location"]


def verify(
    client: Client, op: EidBroker, person: Person = NORWEGIAN, **post: str
) -> Identification:
    """A whole login with PAR: start, the person at the provider, the callback."""
    row, _ = begin(client, **post)
    response = client.get(path_of(op.complete(person)))
    assert (response.status_code, response["Location"]) == (302, post.get("next", "/"))
    row.refresh_from_db()
    return row


def gate(client: Client) -> None:
    """Make the payout gate (verified in the last 5 minutes, the same person) ask again:
    the account's identifications are older than that."""
    old = timezone.now() - datetime.timedelta(minutes=10)
    Identification.objects.update(completed_at=old)
    assert client.get("/gated/payout/").status_code == 302


def verified_long_ago(client: Client, op: EidBroker) -> Identification:
    """Alice verified as Kari, the number stored; the browser visits the authorization
    endpoint (as it must without PAR). :func:`start_at_the_gate` makes it long ago."""
    row, location = begin(client)
    op.authorize(location)
    assert client.get(op.complete()).status_code == 302
    row.refresh_from_db()
    assert row.status == Status.SUCCESS
    assert row.social_security_number == NORWEGIAN.national_identity_number
    return row


def start_at_the_gate(client: Client) -> tuple[Identification, str]:
    """Make the payout gate ask again (:func:`gate`) and start there: a same-person
    identification, PENDING; the row and where the browser is sent."""
    gate(client)
    row, location = begin(client, next="/gated/payout/")
    assert row.same_person
    return row, location


def calls(op: EidBroker, endpoint: str) -> list[Any]:
    """The calls the app made to one endpoint of the provider (``"discovery"`` too)."""
    assert op.oidc is not None
    url = (
        f"{op.oidc.issuer}/.well-known/openid-configuration"
        if endpoint == "discovery"
        else op.oidc.endpoint(endpoint)
    )
    return [c for c in op.mock.calls if (c.request.url or "").split("?")[0] == url]


def form_of(call: Any) -> dict[str, str]:
    body = call.request.body
    text = body.decode() if isinstance(body, bytes) else str(body or "")
    return {k: v[0] for k, v in parse_qs(text, keep_blank_values=True).items()}


def stored_ciphertext(row: Identification) -> str:
    """The number's column as the database has it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT social_security_number FROM django_eid_identification WHERE id = %s", [row.pk]
        )
        (value,) = cursor.fetchone()
    return str(value)


def document(op: EidBroker, **changes: Any) -> dict[str, Any]:
    """The OP's own discovery document with ``changes`` (``None`` removes a field)."""
    assert op.oidc is not None
    body = dict(op.oidc.discovery().body)
    body.update(changes)
    return {k: v for k, v in body.items() if v is not None}


def unsigned(header: dict[str, Any], claims: dict[str, Any], parts: int = 3) -> str:
    """A JWT of ``parts`` parts whose signature (any part past the claims) is junk."""

    def b64(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return ".".join([b64(header), b64(claims)] + ["c2ln"] * (parts - 2))


def now() -> int:
    return int(time.time())


# -- what every hostile case asserts ------------------------------------------------------------
def assert_clean(op: EidBroker, row: Identification, logs: pytest.LogCaptureFixture) -> None:
    """No number, secret or token in a log line or the stored error."""
    secrets_ = [NORWEGIAN.national_identity_number, SECRET, *op.issued_tokens]
    for text, where in ((logs.text, "the log"), (row.error_message, "the stored error")):
        for value in secrets_:
            assert value not in text, f"{value[:4]}... is in {where}"
        assert not jwts_in(text), f"a JWT is in {where}"


def assert_failed(
    response: Any,
    row: Identification,
    code: str,
    signals: Signals,
    *,
    says: str = "",
    page: int = 200,
    sent: tuple[str, ...] = ("identification_started", "identification_failed"),
) -> None:
    """The callback ended ``row`` as ERROR with ``code``: the failure page, no identity,
    and the signals ``sent``, no success."""
    assert response.status_code == page
    assert "django_eid/error.html" in [t.name for t in response.templates]
    row.refresh_from_db()
    assert (row.status, row.error_code) == (Status.ERROR, code), row.error_message
    assert says in row.error_message
    assert row.social_security_number in ("", None)
    assert row.identity_provider_unique_id in ("", None)
    assert signals.names == list(sent)


def assert_pending_until_healed(
    op: EidBroker, client: Client, url: str, row: Identification, signals: Signals
) -> None:
    """The callback at ``url`` could not reach the provider before the code was spent: the
    unavailable page, the row PENDING, no token call; once the provider is back, a reload
    completes the identification."""
    response = client.get(url)
    assert response.status_code == outcomes.RETRIEVE_UNREACHABLE.status
    row.refresh_from_db()
    assert row.status == Status.PENDING
    assert signals.names == ["identification_started"]
    assert op.token_requests == 0  # the code is not spent on an answer that cannot be used
    op.heal()
    done = client.get(url)
    assert (done.status_code, done["Location"]) == (302, "/")
    row.refresh_from_db()
    assert row.status == Status.SUCCESS
    assert signals.names == ["identification_started", "identification_succeeded"]
