"""What each preset stores (``BROKER_API = "oidc"``): for each built-in person and eID, the
identity, the number (encrypted, with its country and kind; not kept when not asked for),
the stable unique id that says who without it (one account per person, the same person
again), and the level of assurance against ``MIN_LOA``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from django_eid import national_id, outcomes
from django_eid.brokers.oidc_presets import PRESETS as PRESET_SPECS
from django_eid.models import Identification
from django_eid.sandbox.fake import EidBroker
from django_eid.sandbox.persons import Person
from tests.brokers.oidc.conftest import (
    NORWEGIAN,
    PERSONS,
    PRESET_NAMES,
    USERINFO_PRESETS,
    Status,
    begin,
    calls,
    gate,
    path_of,
    start_at_the_gate,
    stored_ciphertext,
    verified_long_ago,
    verify,
)
from tests.fixtures_views import Signals, logged_in

pytestmark = pytest.mark.django_db

SWEDISH, DANISH, FINNISH = PERSONS.SWEDISH, PERSONS.DANISH, PERSONS.FINNISH
KIND = {
    national_id.NORWAY: national_id.FODSELSNUMMER,
    national_id.SWEDEN: national_id.PERSONNUMMER,
    national_id.DENMARK: national_id.CPR,
    national_id.FINLAND: national_id.HENKILOTUNNUS,
}

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


def country_of(provider: str) -> str:
    """The country of ``provider``'s eID, as its preset says."""
    found = {
        p.providers[provider].country for p in PRESET_SPECS.values() if provider in p.providers
    }
    (country,) = found
    assert country is not None
    return country


@pytest.mark.parametrize(
    ("preset", "provider", "person", "acr", "level", "unique_claim"),
    IDENTITIES,
    ids=[f"{p}-{name}-{person.key}" for p, name, person, *_ in IDENTITIES],
)
@pytest.mark.parametrize("how", ["IDENTITY_PROVIDER", "ALLOWED_PROVIDERS"])
def test_each_preset_stores_the_person(
    serve: Callable[..., EidBroker],
    alice_client: Client,
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
        op = serve(preset, IDENTITY_PROVIDER=provider)
    else:
        # Several offered: the person's choice on the start form picks the acr value.
        others = [name for of, name, *_ in IDENTITIES if of == preset and name != provider]
        op = serve(preset, IDENTITY_PROVIDER=None, ALLOWED_PROVIDERS=[*others[:1], provider])
        if others:
            post["provider"] = provider
    row = verify(alice_client, op, person, **post)

    (sent,) = op.authorization_requests
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
    country = country_of(provider)
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
    assert len(calls(op, "userinfo")) == (1 if preset in USERINFO_PRESETS else 0)


#: Each preset's claim of the number, as a provider releases it unasked (Idura's static
#: scope strategy releases what the dashboard says, whatever the scope).
NUMBER_CLAIMS = {"idura": "socialno", "bankid-no": "nnin_altsub"}


@pytest.mark.parametrize("preset", sorted(NUMBER_CLAIMS))
def test_a_number_released_unasked_is_not_kept(
    serve: Callable[..., EidBroker], alice_client: Client, preset: str
) -> None:
    op = serve(preset, GET_SOCIAL_SECURITY_NUMBER=False)
    number = NORWEGIAN.national_identity_number
    begin(alice_client)
    op.tamper_next_token(claims={NUMBER_CLAIMS[preset]: number})
    alice_client.get(path_of(op.complete()))
    row = Identification.objects.get()
    assert row.status == Status.SUCCESS
    assert (row.social_security_number, row.social_security_number_hash) == (None, None)
    assert number not in json.dumps(row.raw)
    assert number not in stored_ciphertext(row)


# -- the person known again by the unique id -------------------------------------------------------
@pytest.mark.parametrize("preset", ["bankid-no", "idura"])
def test_two_logins_of_one_person_give_one_unique_id(
    serve: Callable[..., EidBroker], alice_client: Client, preset: str
) -> None:
    """BankID Norge's ``sub`` is new at each login: the PID (bankid_altsub) is the id."""
    op = serve(preset, GET_SOCIAL_SECURITY_NUMBER=False)
    first = verify(alice_client, op)
    second = verify(alice_client, op)
    assert first.identity_provider_unique_id == second.identity_provider_unique_id
    assert first.identity_provider_unique_id == NORWEGIAN.identity_provider_unique_id
    if preset == "bankid-no":
        assert first.raw["sub"] != second.raw["sub"]


@pytest.mark.parametrize("preset", PRESET_NAMES)
def test_one_account_per_person_and_same_person_know_the_person_again(
    serve: Callable[..., EidBroker], alice_client: Client, bob: AbstractBaseUser, preset: str
) -> None:
    """Without the number, the unique id alone says who: a second login of the person
    on the account passes the same-person gate, another account is refused them."""
    op = serve(preset, GET_SOCIAL_SECURITY_NUMBER=False, ONE_ACCOUNT_PER_PERSON=True)
    assert verify(alice_client, op).status == Status.SUCCESS
    gate(alice_client)
    again = verify(alice_client, op, next="/gated/payout/")
    assert (again.status, again.same_person) == (Status.SUCCESS, True)
    assert alice_client.get("/gated/payout/").status_code == 200
    other = logged_in(bob)
    stranger, _ = begin(other)
    page = other.get(path_of(op.complete()))
    assert page.status_code == 200  # the page that says why
    stranger.refresh_from_db()
    assert stranger.status == Status.REJECTED


def test_an_id_token_of_another_person_on_a_same_person_gate_is_rejected(
    serve: Callable[..., EidBroker], alice_client: Client, signals: Signals
) -> None:
    op = serve("bankid-no", PREFILL_SAME_PERSON=True)
    verified_long_ago(alice_client, op)
    row, _ = start_at_the_gate(alice_client)
    signals.clear()
    response = alice_client.get(op.complete(op.persons.NO_MIDDLE_NAME))
    assert response.status_code == 200
    row.refresh_from_db()
    assert (row.status, row.error_code) == (Status.REJECTED, outcomes.NOT_SAME_PERSON)
    assert signals.names == ["identification_failed"]
    assert alice_client.get("/gated/payout/").status_code == 302


def test_a_level_below_min_loa_is_rejected(
    serve: Callable[..., EidBroker], alice_client: Client, signals: Signals
) -> None:
    op = serve("bankid-no", MIN_LOA="high", IDENTITY_PROVIDER="bis")
    row, _ = begin(alice_client)
    response = alice_client.get(op.complete())
    assert response.status_code == 200
    row.refresh_from_db()
    assert (row.status, row.error_code) == (Status.REJECTED, outcomes.LOA_TOO_LOW)
    assert row.level_of_assurance == "substantial"
    assert signals.names == ["identification_started", "identification_failed"]


def test_bid_meets_min_loa_high(serve: Callable[..., EidBroker], alice_client: Client) -> None:
    op = serve("bankid-no", MIN_LOA="high", IDENTITY_PROVIDER="bid")
    row, _ = begin(alice_client)
    assert alice_client.get(op.complete()).status_code == 302
    row.refresh_from_db()
    assert (row.status, row.level_of_assurance) == (Status.SUCCESS, "high")


# -- an eID or a level the preset does not list ------------------------------------------------
@pytest.mark.parametrize(
    ("asked", "refused"),
    [("dk-mitid", outcomes.PROVIDER_NOT_ALLOWED), (None, outcomes.LOA_TOO_LOW)],
    ids=["dk-mitid asked for", "the provider's chooser"],
)
def test_an_unlisted_level_is_unknown_never_the_eids_usual_one(
    serve: Callable[..., EidBroker],
    alice_client: Client,
    signals: Signals,
    asked: str | None,
    refused: str,
) -> None:
    """Idura's MitID ``low`` is MitID, but not at the level MitID usually gives: not the
    ``dk-mitid`` (substantial) that was asked for, and, asked for none, below MIN_LOA
    "substantial" as the ``dk-mitid`` entry's level would not be."""
    op = serve("idura", IDENTITY_PROVIDER=asked, MIN_LOA="substantial")
    row, _ = begin(alice_client, **({} if asked else {"provider": ""}))
    op.tamper_next_token(claims={"authenticationtype": "urn:grn:authn:dk:mitid:low"})
    assert alice_client.get(path_of(op.complete(DANISH))).status_code == 200
    row.refresh_from_db()
    assert (row.status, row.error_code) == (Status.REJECTED, refused)
    assert (row.identity_provider, row.level_of_assurance) == ("dk-mitid", "")


@pytest.mark.parametrize("how", ["IDENTITY_PROVIDER", "ALLOWED_PROVIDERS"])
def test_an_eid_the_preset_does_not_list_is_not_the_one_asked_for(
    serve: Callable[..., EidBroker], alice_client: Client, signals: Signals, how: str
) -> None:
    """A token for SE Freja (Idura offers it; the preset does not list it) is stored under
    its own name and refused, not stored as the SE BankID that was asked for."""
    wanted = "se-bankid"
    if how == "IDENTITY_PROVIDER":
        op = serve("idura", IDENTITY_PROVIDER=wanted)
        row, _ = begin(alice_client)
    else:
        op = serve("idura", IDENTITY_PROVIDER=None, ALLOWED_PROVIDERS=["no-bankid", wanted])
        row, _ = begin(alice_client, provider=wanted)
    op.tamper_next_token(
        claims={"identityscheme": "sefrejaid", "authenticationtype": "urn:grn:authn:se:frejaid"}
    )
    assert alice_client.get(path_of(op.complete(SWEDISH))).status_code == 200
    row.refresh_from_db()
    assert (row.status, row.error_code) == (Status.REJECTED, outcomes.PROVIDER_NOT_ALLOWED)
    assert (row.identity_provider, row.level_of_assurance) == ("sefrejaid", "")
    assert signals.names == ["identification_started", "identification_failed"]


def test_an_acr_variant_of_a_listed_eid_keeps_its_level(
    serve: Callable[..., EidBroker], alice_client: Client
) -> None:
    """Idura names the SE BankID flow used (``...:se:bankid:same-device``): SE BankID, at
    its level."""
    op = serve("idura", IDENTITY_PROVIDER="se-bankid", MIN_LOA="substantial")
    row, _ = begin(alice_client)
    op.tamper_next_token(claims={"authenticationtype": "urn:grn:authn:se:bankid:same-device"})
    assert alice_client.get(path_of(op.complete(SWEDISH))).status_code == 302
    row.refresh_from_db()
    assert (row.status, row.identity_provider, row.level_of_assurance) == (
        Status.SUCCESS,
        "se-bankid",
        "substantial",
    )


# -- what the site asked for is what it got --------------------------------------------------------
def test_a_number_scope_removed_in_the_browser_is_noticed(
    serve: Callable[..., EidBroker], alice_client: Client, signals: Signals
) -> None:
    """Without PAR the authorization request travels in the browser's URL: a user who strips
    the number's scope gets no verified identity without the number (it would escape
    ONE_ACCOUNT_PER_PERSON through another eID); the granted scope says so."""
    op = serve("idura", OIDC_PAR=False, ONE_ACCOUNT_PER_PERSON=True)
    row, location = begin(alice_client)
    parts = urlsplit(location)
    query = parse_qs(parts.query)
    assert query["scope"] == ["openid ssn"]
    query["scope"] = ["openid"]
    op.authorize(urlunsplit(parts._replace(query=urlencode(query, doseq=True))))
    assert alice_client.get(path_of(op.complete())).status_code == 200
    row.refresh_from_db()
    assert (row.status, row.error_code) == (Status.REJECTED, outcomes.SCOPE_NOT_GRANTED)
    assert row.social_security_number is None
    assert signals.names == ["identification_started", "identification_failed"]


def test_a_number_asked_for_and_missing_is_rejected(
    serve: Callable[..., EidBroker], alice_client: Client
) -> None:
    op = serve("idura")
    row, _ = begin(alice_client)
    url = op.complete()
    op.tamper_next_token(claims={"socialno": None})
    assert alice_client.get(path_of(url)).status_code == 200
    row.refresh_from_db()
    assert (row.status, row.error_code) == (Status.REJECTED, outcomes.NUMBER_MISSING)


def test_a_generic_providers_person_is_their_sub_at_its_issuer(
    serve: Callable[..., EidBroker], alice_client: Client, bob: AbstractBaseUser
) -> None:
    """No preset, no IDENTITY_PROVIDER: the rows name the issuer as their provider, so that
    ONE_ACCOUNT_PER_PERSON holds (it claimed nothing before: no provider, no person key)."""
    op = serve("generic", IDENTITY_PROVIDER=None, ONE_ACCOUNT_PER_PERSON=True)
    alices = verify(alice_client, op)
    assert alices.status == Status.SUCCESS
    assert alices.identity_provider == op.oidc.issuer.split("://")[1]  # type: ignore[union-attr]
    bob_client = logged_in(bob)
    bobs, _ = begin(bob_client)
    assert bob_client.get(path_of(op.complete())).status_code == 200
    bobs.refresh_from_db()
    assert (bobs.status, bobs.error_code) == (Status.REJECTED, outcomes.ONE_ACCOUNT_PER_PERSON)
