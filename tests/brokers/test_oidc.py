"""``BROKER_API = "oidc"`` through the start view and the callback URL, against the sandbox's
OpenID provider (the ``eid_broker`` fixture): what each preset stores for each built-in
person, the authorization request as the provider receives it (PKCE, PAR or the front
channel, the same-person ``login_hint``), the client authentications, the caching of the
provider's metadata, a cancel and an error, and the JSON API."""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import uuid
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.messages import get_messages
from django.core.cache import caches
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey

from django_eid import national_id
from django_eid.models import Identification
from django_eid.sandbox.fake import EidBroker
from django_eid.sandbox.persons import Person, builtin_persons
from tests.fixtures_client import SettingsWrapper
from tests.fixtures_views import logged_in

pytestmark = pytest.mark.django_db

Status = Identification.Status
PERSONS = builtin_persons()
NORWEGIAN, SWEDISH, DANISH, FINNISH = (
    PERSONS.NORWEGIAN,
    PERSONS.SWEDISH,
    PERSONS.DANISH,
    PERSONS.FINNISH,
)
CLIENT_ID = "urn:shop:eid"
CLIENT_SECRET = "s3cr3t"
CALLBACK = "http://testserver/eid/oidc/callback/"
#: Each preset's provider at its own (realistic) issuer.
ISSUERS = {
    "idura": "https://shop-test.idura.broker",
    "bankid-no": "https://auth.current.bankid.no/auth/realms/current",
    "signicat": "https://shop.sandbox.signicat.com/auth/open",
    "vipps": "https://apitest.vipps.no/access-management-1.0/access",
}
#: The scopes each preset asks for by default, and with GET_SOCIAL_SECURITY_NUMBER.
SCOPES = {
    "idura": ("openid", "openid ssn"),
    "bankid-no": ("openid profile", "openid profile nnin_altsub"),
    "signicat": ("openid profile idp-id", "openid profile idp-id nin"),
    "vipps": ("openid name birthDate", "openid name birthDate nin"),
}
#: The provider each preset's flow uses unless a test says otherwise.
DEFAULT_PROVIDER = {"idura": "no-bankid", "bankid-no": "bid", "signicat": "nbid", "vipps": None}
USERINFO_PRESETS = ("signicat", "vipps")
KIND = {
    national_id.NORWAY: national_id.FODSELSNUMMER,
    national_id.SWEDEN: national_id.PERSONNUMMER,
    national_id.DENMARK: national_id.CPR,
    national_id.FINLAND: national_id.HENKILOTUNNUS,
}


def oidc_settings(base: dict[str, Any], preset: str, **overrides: Any) -> dict[str, Any]:
    return {
        **base,
        "BROKER_API": "oidc",
        "OIDC_PRESET": preset,
        "OIDC_ISSUER": ISSUERS[preset],
        "CLIENT_ID": CLIENT_ID,
        "CLIENT_SECRET": CLIENT_SECRET,
        "GET_SOCIAL_SECURITY_NUMBER": True,
        "SCOPES": None,
        "BASE_URL": None,
        "AUTH_URL": None,
        "IDENTITY_PROVIDER": DEFAULT_PROVIDER[preset],
        **overrides,
    }


@pytest.fixture
def preset() -> str:
    """The preset of the test (a test parametrizes ``preset`` to change it)."""
    return "idura"


@pytest.fixture
def overrides() -> dict[str, Any]:
    """``DJANGO_EID`` keys of the test beside the preset's (parametrized to change them)."""
    return {}


@pytest.fixture
def site(settings: SettingsWrapper, preset: str, overrides: dict[str, Any]) -> str:
    settings.DJANGO_EID = oidc_settings(settings.DJANGO_EID, preset, **overrides)
    return preset


@pytest.fixture
def eid_broker(site: str, eid_broker: EidBroker) -> EidBroker:
    """The plugin's ``eid_broker``, made once the site's settings are in place (it serves
    the OpenID provider of ``OIDC_PRESET`` at ``OIDC_ISSUER``)."""
    return eid_broker


@pytest.fixture
def browser(alice: AbstractBaseUser) -> Client:
    return logged_in(alice)


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


def start(client: Client, **post: str) -> tuple[Identification, str]:
    """POST the start view; the new row and where the browser is sent."""
    response = client.post(reverse("django_eid:start"), post)
    assert response.status_code == 302, response.content
    return Identification.objects.latest("pk"), response["Location"]


def verify(
    client: Client,
    eid_broker: EidBroker,
    person: Person = NORWEGIAN,
    **post: str,
) -> Identification:
    """A whole login with PAR: start, the person at the provider, the callback."""
    row, _ = start(client, **post)
    response = client.get(path_of(eid_broker.complete(person)))
    assert response.status_code == 302, response.content
    row.refresh_from_db()
    return row


def gate(client: Client) -> None:
    """Make the payout gate (verified in the last 5 minutes, the same person) ask again:
    the account's identifications are older than that."""
    old = timezone.now() - datetime.timedelta(minutes=10)
    Identification.objects.update(completed_at=old)
    assert client.get("/gated/payout/").status_code == 302


def calls(eid_broker: EidBroker, endpoint: str) -> list[Any]:
    """The calls the app made to one endpoint of the provider."""
    assert eid_broker.oidc is not None
    issuer = eid_broker.oidc.issuer
    url = (
        f"{issuer}/.well-known/openid-configuration"
        if endpoint == "discovery"
        else eid_broker.oidc.endpoint(endpoint)
    )
    return [c for c in eid_broker.mock.calls if (c.request.url or "").split("?")[0] == url]


def form_of(call: Any) -> dict[str, str]:
    body = call.request.body
    text = body.decode() if isinstance(body, bytes) else str(body or "")
    return {k: v[0] for k, v in parse_qs(text, keep_blank_values=True).items()}


def stored_ciphertext(row: Identification) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT social_security_number FROM django_eid_identification WHERE id = %s", [row.pk]
        )
        (value,) = cursor.fetchone()
    return str(value)


def s256(verifier: str) -> str:
    return (
        base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    )


# -- what each preset stores, per person and provider ----------------------------------------
#: (preset, provider, person, acr_values sent, level of assurance, unique id claim)
#: The unique id claim: "pid" is the person's PID (their identity_provider_unique_id), any
#: other name is the claim of the raw record that must carry it.
IDENTITIES = [
    ("idura", "no-bankid", NORWEGIAN, "urn:grn:authn:no:bankid", "high", "pid"),
    (
        "idura",
        "no-bankid-substantial",
        NORWEGIAN,
        "urn:grn:authn:no:bankid:substantial",
        "substantial",
        "pid",
    ),
    ("idura", "no-vipps", NORWEGIAN, "urn:grn:authn:no:vipps", "substantial", "sub"),
    ("idura", "se-bankid", SWEDISH, "urn:grn:authn:se:bankid", "substantial", "sub"),
    ("idura", "dk-mitid", DANISH, "urn:grn:authn:dk:mitid:substantial", "substantial", "uuid"),
    ("idura", "dk-mitid-high", DANISH, "urn:grn:authn:dk:mitid:high", "high", "uuid"),
    ("idura", "fi-ftn", FINNISH, "urn:grn:authn:fi:all", "substantial", "sub"),
    ("bankid-no", "bid", NORWEGIAN, "urn:bankid:bid", "high", "pid"),
    ("bankid-no", "bis", NORWEGIAN, "urn:bankid:bis", "substantial", "pid"),
    # A D-number is a Norwegian number of another kind.
    ("bankid-no", "bid", PERSONS.D_NUMBER, "urn:bankid:bid", "high", "pid"),
    ("signicat", "nbid", NORWEGIAN, "idp:nbid", "high", "pid"),
    ("signicat", "nbid", PERSONS.D_NUMBER, "idp:nbid", "high", "pid"),
    ("signicat", "sbid", SWEDISH, "idp:sbid", "substantial", "idp_id"),
    ("signicat", "mitid", DANISH, "idp:mitid", "substantial", "idp_id"),
    ("signicat", "ftn", FINNISH, "idp:ftn", "substantial", "idp_id"),
    ("vipps", "vipps", NORWEGIAN, None, "substantial", "sub"),
]


@pytest.mark.parametrize(
    ("preset", "provider", "person", "acr", "level", "unique_claim"),
    IDENTITIES,
    ids=[f"{p}-{name}-{person.key}" for p, name, person, *_ in IDENTITIES],
)
@pytest.mark.parametrize("how", ["IDENTITY_PROVIDER", "ALLOWED_PROVIDERS"])
def test_each_preset_stores_the_person(
    settings: SettingsWrapper,
    eid_broker: EidBroker,
    browser: Client,
    preset: str,
    provider: str,
    person: Person,
    acr: str | None,
    level: str,
    unique_claim: str,
    how: str,
) -> None:
    post: dict[str, str] = {}
    if how == "IDENTITY_PROVIDER":
        settings.DJANGO_EID = {**settings.DJANGO_EID, "IDENTITY_PROVIDER": provider}
    else:
        # Several offered: the person's choice on the start form picks the acr value.
        others = [name for of, name, *_ in IDENTITIES if of == preset and name != provider]
        settings.DJANGO_EID = {
            **settings.DJANGO_EID,
            "IDENTITY_PROVIDER": None,
            "ALLOWED_PROVIDERS": [*others[:1], provider],
        }
        if others:
            post["provider"] = provider
    row = verify(browser, eid_broker, person, **post)

    (sent,) = eid_broker.authorization_requests
    assert sent.get("acr_values") == acr
    assert row.status == Status.SUCCESS
    assert row.identity_provider == provider
    assert row.level_of_assurance == level
    given = f"{person.first_name} {person.middle_name}"
    assert (row.name, row.first_name, row.last_name) == (
        f"{given} {person.last_name}",
        given,
        person.last_name,
    )
    assert row.date_of_birth == person.birth_date
    # The number: decrypted on reading, never stored in clear, with its country and kind.
    number = person.national_identity_number
    assert row.social_security_number == number
    assert number not in stored_ciphertext(row)
    country = _country(provider)
    kind = national_id.D_NUMBER if person.key == "D_NUMBER" else KIND[country]
    assert (row.national_id_country, row.national_id_kind) == (country, kind)
    # The stable unique id of the person at the eID.
    if unique_claim == "pid":
        assert row.identity_provider_unique_id == person.identity_provider_unique_id
    else:
        assert row.identity_provider_unique_id == row.raw[unique_claim]
    if unique_claim == "uuid":
        assert row.identity_provider_unique_id != row.raw["sub"]
        uuid.UUID(row.identity_provider_unique_id)
    # What is kept as received: no number, no protocol claims of this one authorization.
    raw = json.dumps(row.raw)
    assert number not in raw
    assert not {"nonce", "at_hash", "aud", "exp"} & set(row.raw)
    assert len(calls(eid_broker, "userinfo")) == (1 if preset in USERINFO_PRESETS else 0)


def _country(provider: str) -> str:
    from django_eid.brokers.oidc_presets import PRESETS

    found = {p.providers[provider].country for p in PRESETS.values() if provider in p.providers}
    (country,) = found
    assert country is not None
    return country


@pytest.mark.parametrize("preset", sorted(ISSUERS))
@pytest.mark.parametrize("overrides", [{"GET_SOCIAL_SECURITY_NUMBER": False}])
def test_without_the_number_no_number_scope_is_asked_and_none_is_stored(
    eid_broker: EidBroker, browser: Client, preset: str
) -> None:
    row = verify(browser, eid_broker)
    assert eid_broker.authorization_requests[0]["scope"] == SCOPES[preset][0]
    assert row.status == Status.SUCCESS
    assert row.social_security_number is None
    assert row.social_security_number_hash is None
    assert NORWEGIAN.national_identity_number not in json.dumps(row.raw)
    assert row.identity_provider_unique_id  # the person is still known by their unique id


#: Each preset's claim of the number, as a provider releases it unasked (Idura's static
#: scope strategy releases what the dashboard says, whatever the scope).
NUMBER_CLAIMS = {"idura": "socialno", "bankid-no": "nnin_altsub"}


@pytest.mark.parametrize("preset", sorted(NUMBER_CLAIMS))
@pytest.mark.parametrize("overrides", [{"GET_SOCIAL_SECURITY_NUMBER": False}])
def test_a_number_released_unasked_is_not_kept(
    eid_broker: EidBroker, browser: Client, preset: str
) -> None:
    number = NORWEGIAN.national_identity_number
    start(browser)
    eid_broker.tamper_next_token(claims={NUMBER_CLAIMS[preset]: number})
    browser.get(path_of(eid_broker.complete()))
    row = Identification.objects.get()
    assert row.status == Status.SUCCESS
    assert (row.social_security_number, row.social_security_number_hash) == (None, None)
    assert number not in json.dumps(row.raw)
    assert number not in stored_ciphertext(row)


@pytest.mark.parametrize("overrides", [{"GET_SOCIAL_SECURITY_NUMBER": False}])
@pytest.mark.parametrize("preset", ["bankid-no", "idura"])
def test_two_logins_of_one_person_give_one_unique_id(
    eid_broker: EidBroker, browser: Client, preset: str
) -> None:
    """BankID Norge's ``sub`` is new at each login: the PID (bankid_altsub) is the id."""
    first = verify(browser, eid_broker)
    second = verify(browser, eid_broker)
    assert first.identity_provider_unique_id == second.identity_provider_unique_id
    assert first.identity_provider_unique_id == NORWEGIAN.identity_provider_unique_id
    if preset == "bankid-no":
        assert first.raw["sub"] != second.raw["sub"]


@pytest.mark.parametrize("preset", sorted(ISSUERS))
@pytest.mark.parametrize(
    "overrides", [{"GET_SOCIAL_SECURITY_NUMBER": False, "ONE_ACCOUNT_PER_PERSON": True}]
)
def test_one_account_per_person_and_same_person_know_the_person_again(
    eid_broker: EidBroker, browser: Client, bob: AbstractBaseUser
) -> None:
    """Without the number, the unique id alone says who: a second login of the person
    on the account passes the same-person gate, another account is refused them."""
    assert verify(browser, eid_broker).status == Status.SUCCESS
    gate(browser)
    again = verify(browser, eid_broker, next="/gated/payout/")
    assert (again.status, again.same_person) == (Status.SUCCESS, True)
    assert browser.get("/gated/payout/").status_code == 200
    other = logged_in(bob)
    stranger, _ = start(other)
    page = other.get(path_of(eid_broker.complete()))
    assert page.status_code == 200  # the page that says why
    stranger.refresh_from_db()
    assert stranger.status == Status.REJECTED


# -- the authorization request ---------------------------------------------------------------
@pytest.mark.parametrize("preset", sorted(ISSUERS))
def test_the_authorization_request_as_sent(
    eid_broker: EidBroker, browser: Client, preset: str
) -> None:
    row, location = start(browser)
    (sent,) = eid_broker.authorization_requests
    assert row.external_id
    assert {k: sent.get(k) for k in ("response_type", "state", "prompt", "redirect_uri")} == {
        "response_type": "code",
        "state": row.external_id,
        "prompt": "login",
        "redirect_uri": CALLBACK,
    }
    assert sent["client_id"] == CLIENT_ID
    assert sent["scope"] == SCOPES[preset][1]
    assert sent["code_challenge_method"] == "S256"
    assert len(sent["nonce"]) >= 22
    # PAR: the browser's URL carries the client and the pushed request only.
    assert len(calls(eid_broker, "par")) == 1
    query = parse_qs(urlsplit(location).query)
    assert set(query) == {"client_id", "request_uri"}
    assert location.startswith(ISSUERS[preset] + "/authorize?")
    callback = eid_broker.complete()
    assert browser.get(path_of(callback)).status_code == 302
    # PKCE S256: the verifier goes to the token endpoint only.
    (token_call,) = calls(eid_broker, "token")
    verifier = form_of(token_call)["code_verifier"]
    assert len(verifier) == 43
    assert s256(verifier) == sent["code_challenge"]
    for url in (location, callback, *(c.request.url for c in eid_broker.mock.calls)):
        assert verifier not in str(url)
    assert verifier not in json.dumps(eid_broker.authorization_requests)
    row.refresh_from_db()
    assert row.status == Status.SUCCESS
    assert sent["nonce"] not in json.dumps(row.raw)


@pytest.mark.parametrize(
    ("language", "ui_locales"),
    [("NO", "nb"), ("SV", "sv"), ("DA", "da"), ("FI", "fi"), ("EN", "en")],
)
def test_ui_locales_follow_language(
    settings: SettingsWrapper,
    eid_broker: EidBroker,
    browser: Client,
    language: str,
    ui_locales: str,
) -> None:
    settings.DJANGO_EID = {**settings.DJANGO_EID, "LANGUAGE": language}
    start(browser)
    assert eid_broker.authorization_requests[0]["ui_locales"] == ui_locales


@pytest.mark.parametrize(
    "overrides", [{"OIDC_REDIRECT_URI": "https://shop.example/eid/oidc/callback/"}]
)
def test_oidc_redirect_uri_is_sent_and_used_in_the_code_exchange(
    eid_broker: EidBroker, browser: Client
) -> None:
    start(browser)
    assert eid_broker.authorization_requests[0]["redirect_uri"] == (
        "https://shop.example/eid/oidc/callback/"
    )
    callback = eid_broker.complete()
    assert callback.startswith("https://shop.example/eid/oidc/callback/?code=")
    assert browser.get(path_of(callback), secure=True).status_code == 302
    (token_call,) = calls(eid_broker, "token")
    assert form_of(token_call)["redirect_uri"] == "https://shop.example/eid/oidc/callback/"
    assert Identification.objects.get().status == Status.SUCCESS


@pytest.mark.parametrize("preset", sorted(ISSUERS))
@pytest.mark.parametrize("overrides", [{"OIDC_PAR": False}])
def test_without_par_the_request_goes_through_the_front_channel(
    eid_broker: EidBroker, browser: Client, preset: str
) -> None:
    row, location = start(browser)
    assert calls(eid_broker, "par") == []
    query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
    assert query["state"] == row.external_id
    assert query["code_challenge_method"] == "S256"
    assert "request_uri" not in query
    picker = eid_broker.authorize(location)
    assert picker.startswith("http")
    assert eid_broker.authorization_requests == [query]
    response = browser.get(path_of(eid_broker.complete()))
    assert response.status_code == 302
    row.refresh_from_db()
    assert row.status == Status.SUCCESS


SLASHED = "https://apitest.vipps.no/access-management-1.0/access/"


@pytest.mark.parametrize("preset", ["vipps"])
@pytest.mark.parametrize("overrides", [{"OIDC_ISSUER": SLASHED}])
def test_an_issuer_ending_in_a_slash_is_discovered_at_its_well_known_url(
    eid_broker: EidBroker, browser: Client
) -> None:
    """Vipps' issuer ends in '/': its document is at ``{issuer without it}/.well-known/...``
    (OpenID Connect Discovery 4), and its ``issuer`` is compared as it is spelled."""
    well_known = SLASHED + ".well-known/openid-configuration"
    start(browser)
    fetched = [c.request.url for c in eid_broker.mock.calls if "well-known" in str(c.request.url)]
    assert fetched == [well_known]


@pytest.mark.parametrize("overrides", [{"OIDC_PAR": True}])
def test_par_required_without_a_par_endpoint_fails_clearly(
    eid_broker: EidBroker, browser: Client
) -> None:
    assert eid_broker.oidc is not None
    document = dict(eid_broker.oidc.discovery().body)
    del document["pushed_authorization_request_endpoint"]
    eid_broker.inject("discovery", body=document)
    response = browser.post(reverse("django_eid:start"))
    assert response.status_code == 502
    assert b"Identification failed" in response.content
    assert eid_broker.authorization_requests == []
    row = Identification.objects.get()
    assert row.status == Status.ERROR
    assert "pushed_authorization_request_endpoint" in row.error_message


# -- a same-person re-verification: the login_hint ------------------------------------------
HINTS = [
    ("idura", "no-bankid", NORWEGIAN, "BID:{}"),
    ("idura", "no-bankid-substantial", NORWEGIAN, "BIS:{}"),
    ("idura", "se-bankid", SWEDISH, "sub:{}"),
    ("idura", "dk-mitid", DANISH, "sub:{}"),
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
@pytest.mark.parametrize("overrides", [{"PREFILL_SAME_PERSON": True}])
def test_a_same_person_reverification_hints_the_number_through_par_only(
    settings: SettingsWrapper,
    eid_broker: EidBroker,
    browser: Client,
    provider: str | None,
    person: Person,
    hint: str | None,
) -> None:
    settings.DJANGO_EID = {**settings.DJANGO_EID, "IDENTITY_PROVIDER": provider}
    assert verify(browser, eid_broker, person).status == Status.SUCCESS
    assert "login_hint" not in eid_broker.authorization_requests[0]
    gate(browser)
    row, location = start(browser, next="/gated/payout/")
    assert row.same_person
    sent = eid_broker.authorization_requests[1]
    number = person.national_identity_number
    if hint is None:
        assert "login_hint" not in sent
    else:
        assert sent["login_hint"] == hint.format(number)
    assert number not in location
    response = browser.get(path_of(eid_broker.complete(person)))
    assert response.status_code == 302
    row.refresh_from_db()
    assert (row.status, row.same_person) == (Status.SUCCESS, True)


@pytest.mark.parametrize("overrides", [{"PREFILL_SAME_PERSON": True, "OIDC_PAR": False}])
def test_without_par_the_number_is_never_hinted(eid_broker: EidBroker, browser: Client) -> None:
    _, location = start(browser)
    eid_broker.authorize(location)
    browser.get(path_of(eid_broker.complete()))
    gate(browser)
    _, location = start(browser, next="/gated/payout/")
    assert NORWEGIAN.national_identity_number not in location
    assert "login_hint" not in parse_qs(urlsplit(location).query)


# -- client authentication ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "overrides",
    [
        {"TOKEN_AUTH_METHOD": "basic", "CLIENT_SECRET": "s3+cr/3t%:x"},
        {"CLIENT_SECRET": "s3+cr/3t%:x"},  # basic is the default
    ],
)
def test_client_secret_basic_urlencodes_before_base64(
    eid_broker: EidBroker, browser: Client
) -> None:
    row = verify(browser, eid_broker)
    assert row.status == Status.SUCCESS
    expected = "Basic " + base64.b64encode(b"urn%3Ashop%3Aeid:s3%2Bcr%2F3t%25%3Ax").decode()
    for endpoint in ("par", "token"):
        (call,) = calls(eid_broker, endpoint)
        assert call.request.headers["Authorization"] == expected
        assert "client_secret" not in form_of(call)


@pytest.mark.parametrize("overrides", [{"TOKEN_AUTH_METHOD": "post"}])
def test_client_secret_post(eid_broker: EidBroker, browser: Client) -> None:
    row = verify(browser, eid_broker)
    assert row.status == Status.SUCCESS
    for endpoint in ("par", "token"):
        (call,) = calls(eid_broker, endpoint)
        assert "Authorization" not in call.request.headers
        form = form_of(call)
        assert (form["client_id"], form["client_secret"]) == (CLIENT_ID, CLIENT_SECRET)


RSA_PEM = RSAKey.generate_key(2048).as_pem(private=True).decode()
EC_PEM = ECKey.generate_key("P-256").as_pem(private=True).decode()


@pytest.mark.parametrize(
    ("overrides", "alg"),
    [
        (
            {
                "TOKEN_AUTH_METHOD": "private_key_jwt",
                "OIDC_PRIVATE_KEY": RSA_PEM,
                "OIDC_PRIVATE_KEY_ID": "shop-rsa-1",
                "CLIENT_SECRET": None,
            },
            "RS256",
        ),
        (
            {
                "TOKEN_AUTH_METHOD": "private_key_jwt",
                "OIDC_PRIVATE_KEY": EC_PEM,
                "OIDC_PRIVATE_KEY_ID": "shop-ec-1",
                "CLIENT_SECRET": None,
            },
            "ES256",
        ),
    ],
    ids=["rsa", "ec"],
)
def test_private_key_jwt(
    eid_broker: EidBroker, browser: Client, overrides: dict[str, Any], alg: str
) -> None:
    row = verify(browser, eid_broker)
    assert row.status == Status.SUCCESS
    key = RSAKey.import_key(RSA_PEM) if alg == "RS256" else ECKey.import_key(EC_PEM)
    assertions = []
    for endpoint in ("par", "token"):
        (call,) = calls(eid_broker, endpoint)
        assert "Authorization" not in call.request.headers
        form = form_of(call)
        assert "client_secret" not in form
        assert form["client_assertion_type"] == (
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        )
        token = jwt.decode(form["client_assertion"], key, algorithms=[alg])
        assert token.header["kid"] == overrides["OIDC_PRIVATE_KEY_ID"]
        assert token.header["alg"] == alg
        claims = token.claims
        assert claims["iss"] == claims["sub"] == CLIENT_ID
        assert claims["aud"] == call.request.url
        assert 0 < claims["exp"] - claims["iat"] <= 300
        assertions.append(claims["jti"])
    assert len(set(assertions)) == 2  # a new jti for each call


# -- caching ----------------------------------------------------------------------------------
@pytest.mark.parametrize("overrides", [{"TOKEN_CACHE": "tokens"}])
def test_discovery_and_jwks_are_fetched_once_for_several_logins(
    settings: SettingsWrapper, site: str, browser: Client
) -> None:
    settings.CACHES = {
        **settings.CACHES,
        "tokens": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "t"},
    }
    with EidBroker.from_settings() as eid_broker:
        for _ in range(3):
            assert verify(browser, eid_broker).status == Status.SUCCESS
        assert (len(calls(eid_broker, "discovery")), len(calls(eid_broker, "jwks"))) == (1, 1)
        caches["default"].clear()  # not TOKEN_CACHE: nothing fetched again
        assert verify(browser, eid_broker).status == Status.SUCCESS
        assert (len(calls(eid_broker, "discovery")), len(calls(eid_broker, "jwks"))) == (1, 1)
        caches["tokens"].clear()
        assert verify(browser, eid_broker).status == Status.SUCCESS
        assert (len(calls(eid_broker, "discovery")), len(calls(eid_broker, "jwks"))) == (2, 2)
        assert len(calls(eid_broker, "token")) == 5


@pytest.mark.parametrize("preset", ["idura", "bankid-no"])
def test_a_token_signed_with_a_rotated_key_verifies_after_one_jwks_refetch(
    eid_broker: EidBroker, browser: Client, preset: str
) -> None:
    assert verify(browser, eid_broker).status == Status.SUCCESS
    assert len(calls(eid_broker, "jwks")) == 1
    eid_broker.rotate_keys()
    assert verify(browser, eid_broker).status == Status.SUCCESS
    assert len(calls(eid_broker, "jwks")) == 2
    assert verify(browser, eid_broker).status == Status.SUCCESS
    assert len(calls(eid_broker, "jwks")) == 2
    assert len(calls(eid_broker, "discovery")) == 1


# -- a cancel and an error ----------------------------------------------------------------------
@pytest.mark.parametrize("preset", sorted(ISSUERS))
def test_a_cancel_at_the_provider(eid_broker: EidBroker, browser: Client, preset: str) -> None:
    row, _ = start(browser)
    url = eid_broker.abort()
    assert "error=access_denied" in url
    response = browser.get(path_of(url))
    assert response.status_code == 302
    assert response["Location"] == reverse("django_eid:start")
    row.refresh_from_db()
    assert row.status == Status.ABORTED
    assert calls(eid_broker, "token") == []
    page = browser.get(response["Location"])
    assert [str(m) for m in get_messages(page.wsgi_request)] == [
        "You cancelled the identification."
    ]


def test_an_error_at_the_provider(eid_broker: EidBroker, browser: Client) -> None:
    row, _ = start(browser)
    response = browser.get(path_of(eid_broker.fail("login_required")))
    assert response.status_code in (200, 302)
    row.refresh_from_db()
    assert row.status == Status.ERROR
    assert (row.error_status, row.error_code) == ("login_required", "login_required")
    assert calls(eid_broker, "token") == []


# -- the JSON API -------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["idura", "signicat"])
def test_an_identification_started_through_the_api(
    eid_broker: EidBroker, browser: Client, preset: str
) -> None:
    response = browser.post(reverse("django_eid:api-start"), {}, content_type="application/json")
    assert response.status_code == 201, response.content
    started = response.json()
    assert started["url"].startswith(ISSUERS[preset] + "/authorize?")
    row = Identification.objects.get(reference=started["reference"])
    assert eid_broker.authorization_requests[0]["state"] == row.external_id
    assert eid_broker.authorization_requests[0]["redirect_uri"] == CALLBACK
    pending = browser.get(reverse("django_eid:api-identification", args=[row.reference]))
    assert pending.json()["status"] == "PENDING"
    browser.get(path_of(eid_broker.complete()))
    answer = browser.get(reverse("django_eid:api-identification", args=[row.reference]))
    assert answer.status_code == 200
    body = answer.json()
    assert body["status"] == "SUCCESS"
    assert body["identity"]["last_name"] == NORWEGIAN.last_name
    assert NORWEGIAN.national_identity_number not in answer.content.decode()
