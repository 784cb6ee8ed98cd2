"""The sandbox as an OpenID provider through the ``eid_broker`` fixture (``responses``):
each preset's id_token and userinfo for each built-in person, the scopes and acr values,
the keys and their rotation, a tampered token, what the fixture records, and the faults a
test injects. Every id_token is verified with the OP's JWKS through joserfc."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest
import requests
from joserfc import jws
from joserfc.errors import JoseError

from django_eid.sandbox.fake import EidBroker
from django_eid.sandbox.persons import Person
from django_eid.sandbox.wire_oidc import at_hash
from tests.fixtures_client import SettingsWrapper
from tests.sandbox.oidc_rp import CALLBACK, VERIFIER, oidc_settings, query, request_params, verify

FIXTURE_ISSUER = "https://op.test/oidc"


FIXTURE_PRESET = "idura"


@pytest.fixture
def oidc_site(settings: SettingsWrapper, request: pytest.FixtureRequest) -> str:
    """The site's broker is the fixture's OP (``preset`` from the test's parameter)."""
    preset = getattr(request, "param", FIXTURE_PRESET)
    settings.DJANGO_EID = oidc_settings(preset, issuer=f"{FIXTURE_ISSUER}/{preset}")
    return str(preset)


def rp_login(
    broker: EidBroker,
    preset: str,
    person: Person,
    *,
    par: bool = True,
    **fields: str,
) -> tuple[dict[str, Any], dict[str, str]]:
    """What an RP does: PAR (or a front-channel URL), the person identifies, the token."""
    issuer = f"{FIXTURE_ISSUER}/{preset}"
    params = request_params(client_id=broker.broker.client_id, **fields)
    secret = (broker.broker.client_id, broker.broker.client_secret)
    if par:
        pushed = requests.post(f"{issuer}/par", data=params, auth=secret, timeout=5)
        assert pushed.status_code == 201, pushed.text
    else:
        login = broker.authorize(f"{issuer}/authorize?{urlencode(params)}")
        assert "/login/" in login
    callback = broker.complete(person)
    answer = query(callback)
    assert answer["state"] == params["state"]
    form = {
        "grant_type": "authorization_code",
        "code": answer["code"],
        "redirect_uri": CALLBACK,
        "code_verifier": VERIFIER,
    }
    response = requests.post(f"{issuer}/token", data=form, auth=secret, timeout=5)
    assert response.status_code == 200, response.text
    return response.json(), params


def _jwks(preset: str) -> dict[str, Any]:
    return requests.get(f"{FIXTURE_ISSUER}/{preset}/jwks", timeout=5).json()  # type: ignore[no-any-return]


NUMBER_SCOPE = {"idura": "ssn", "signicat": "nin", "bankid-no": "nnin_altsub", "vipps": "nin"}


@pytest.mark.parametrize("oidc_site", ["idura", "signicat", "bankid-no", "vipps"], indirect=True)
@pytest.mark.parametrize("who", ["NORWEGIAN", "SWEDISH", "DANISH", "FINNISH"])
def test_id_token_and_userinfo_per_preset(oidc_site: str, eid_broker: EidBroker, who: str) -> None:
    preset = oidc_site
    person: Person = getattr(eid_broker.persons, who)
    scope = f"openid profile {NUMBER_SCOPE[preset]}"
    body, params = rp_login(eid_broker, preset, person, scope=scope)
    alg = "ES256" if preset == "bankid-no" else "RS256"
    claims = verify(body["id_token"], _jwks(preset), alg)
    assert claims["iss"] == f"{FIXTURE_ISSUER}/{preset}"
    assert claims["aud"] == eid_broker.broker.client_id
    assert claims["nonce"] == params["nonce"]
    assert claims["at_hash"] == at_hash(body["access_token"])
    assert claims["exp"] - claims["iat"] == 300
    bearer = {"Authorization": f"Bearer {body['access_token']}"}
    info = requests.get(f"{FIXTURE_ISSUER}/{preset}/userinfo", headers=bearer, timeout=5).json()
    assert info["sub"] == claims["sub"]
    number = person.national_identity_number
    country = {"NORWEGIAN": "NO", "SWEDISH": "SE", "DANISH": "DK", "FINNISH": "FI"}[who]
    if preset == "idura":
        data = claims
        number_claim, scheme = {
            "NO": ("socialno", "nobankid-oidc"),
            "SE": ("ssn", "sebankid"),
            "DK": ("cprNumberIdentifier", "dkmitid"),
            "FI": ("hetu", "fitupas"),
        }[country]
        assert data["identityscheme"] == scheme
        assert data["country"] == country
        assert data["sub"].startswith("{")
        assert data["sub"].endswith("}")
        assert data[number_claim] == number
        if country == "NO":
            assert data["uniqueuserid"] == person.identity_provider_unique_id
        if country == "DK":
            assert data["uuid"]
        if country == "FI":
            assert data["authenticationtype"] == "urn:grn:authn:fi:bank-id"
    elif preset == "bankid-no":
        data = claims
        assert claims["azp"] == eid_broker.broker.client_id
        assert data["acr"] == "urn:bankid:bid;LOA=4"
        assert data["amr"] == ["bid"]
        assert data["nnin_altsub"] == number
        assert data["bankid_altsub"]
        assert data["api_ver"] == 4
    elif preset == "signicat":
        data = info
        assert set(claims) >= {"sub", "idp", "acr"}
        assert "name" not in claims
        idp = {"NO": "nbid", "SE": "sbid", "DK": "mitid", "FI": "ftn"}[country]
        assert claims["idp"] == info["idp"] == idp
        assert claims["acr"] == f"idp:{idp}"
        assert info["nin"] == number
        assert info["nin_type"] == ("BIRTH" if country == "NO" else "PERSON")
        assert info["nin_issuing_country"] == country
        assert info["idp_id"]
    else:
        data = info
        assert "name" not in claims
        assert "nin" not in claims
        assert info["nin"] == number
        assert info["email"]
        assert info["phone_number"]
    given = f"{person.first_name} {person.middle_name}" if person.middle_name else person.first_name
    assert data["given_name"] == given
    assert data["family_name"] == person.last_name
    assert data["birthdate"] == person.birth_date.isoformat()


@pytest.mark.parametrize("oidc_site", ["idura", "bankid-no", "signicat", "vipps"], indirect=True)
def test_the_number_only_with_its_scope(oidc_site: str, eid_broker: EidBroker) -> None:
    preset = oidc_site
    body, _ = rp_login(eid_broker, preset, eid_broker.persons.NORWEGIAN, scope="openid profile")
    bearer = {"Authorization": f"Bearer {body['access_token']}"}
    info = requests.get(f"{FIXTURE_ISSUER}/{preset}/userinfo", headers=bearer, timeout=5).json()
    claims = verify(body["id_token"], _jwks(preset), "ES256" if preset == "bankid-no" else "RS256")
    number = eid_broker.persons.NORWEGIAN.national_identity_number
    assert number not in str(claims) + str(info)


@pytest.mark.parametrize("oidc_site", ["idura", "signicat", "vipps", "generic"], indirect=True)
def test_the_subject_is_stable_per_person(oidc_site: str, eid_broker: EidBroker) -> None:
    first, _ = rp_login(eid_broker, oidc_site, eid_broker.persons.SWEDISH)
    second, _ = rp_login(eid_broker, oidc_site, eid_broker.persons.SWEDISH, scope="openid profile")
    other, _ = rp_login(eid_broker, oidc_site, eid_broker.persons.DANISH)
    jwks = _jwks(oidc_site)

    def sub(body: dict[str, Any]) -> str:
        return str(verify(body["id_token"], jwks, "RS256")["sub"])

    assert sub(first) == sub(second) != sub(other)


@pytest.mark.parametrize("oidc_site", ["bankid-no"], indirect=True)
def test_bankid_sub_changes_but_altsub_stays(oidc_site: str, eid_broker: EidBroker) -> None:
    first, _ = rp_login(eid_broker, oidc_site, eid_broker.persons.NORWEGIAN)
    second, _ = rp_login(eid_broker, oidc_site, eid_broker.persons.NORWEGIAN)
    jwks = _jwks(oidc_site)
    a, b = (verify(body["id_token"], jwks, "ES256") for body in (first, second))
    assert a["sub"] != b["sub"]
    assert a["bankid_altsub"] == b["bankid_altsub"] == "9578-6000-4-112233"


@pytest.mark.parametrize("oidc_site", ["idura"], indirect=True)
def test_acr_values_choose_the_eid(oidc_site: str, eid_broker: EidBroker) -> None:
    # A Norwegian at Swedish BankID: the eID asked for decides the claim shapes.
    body, _ = rp_login(
        eid_broker,
        oidc_site,
        eid_broker.persons.NORWEGIAN,
        acr_values="urn:grn:authn:no:bankid:substantial",
    )
    claims = verify(body["id_token"], _jwks(oidc_site), "RS256")
    assert claims["authenticationtype"] == "urn:grn:authn:no:bankid:substantial"
    assert eid_broker.sessions[-1].identity_provider == "NO_BANKID_MOBILE"


def test_rotated_keys_stay_in_the_jwks(oidc_site: str, eid_broker: EidBroker) -> None:
    before = _jwks(oidc_site)
    old_token, _ = rp_login(eid_broker, oidc_site, eid_broker.persons.NORWEGIAN)
    eid_broker.rotate_keys()
    after = _jwks(oidc_site)
    old_kids = {k["kid"] for k in before["keys"]}
    assert len(after["keys"]) == 4
    assert old_kids < {k["kid"] for k in after["keys"]}
    new_token, _ = rp_login(eid_broker, oidc_site, eid_broker.persons.NORWEGIAN)
    new_kid = jws.extract_compact(new_token["id_token"].encode()).protected["kid"]
    assert new_kid not in old_kids
    verify(old_token["id_token"], after, "RS256")  # the previous key still verifies
    with pytest.raises(JoseError):
        verify(new_token["id_token"], before, "RS256")


@pytest.mark.parametrize("signing", ["unknown-key", "none", "hs256", "bad-signature"])
def test_a_tampered_token_does_not_verify(
    oidc_site: str, eid_broker: EidBroker, signing: str
) -> None:
    eid_broker.tamper_next_token(signing=signing)
    body, _ = rp_login(eid_broker, oidc_site, eid_broker.persons.NORWEGIAN)
    with pytest.raises((JoseError, ValueError)):
        verify(body["id_token"], _jwks(oidc_site), "RS256")
    # Only the next one: the following token is sound again.
    again, _ = rp_login(eid_broker, oidc_site, eid_broker.persons.NORWEGIAN)
    verify(again["id_token"], _jwks(oidc_site), "RS256")


def test_tampered_claims_are_signed_with_the_right_key(
    oidc_site: str, eid_broker: EidBroker
) -> None:
    eid_broker.tamper_next_token(claims={"iss": "https://evil.test", "nonce": None})
    body, _ = rp_login(eid_broker, oidc_site, eid_broker.persons.NORWEGIAN)
    claims = verify(body["id_token"], _jwks(oidc_site), "RS256")
    assert claims["iss"] == "https://evil.test"
    assert "nonce" not in claims


def test_authorization_requests_are_recorded_without_credentials(
    oidc_site: str, eid_broker: EidBroker
) -> None:
    rp_login(eid_broker, oidc_site, eid_broker.persons.NORWEGIAN, login_hint="BID:17029012345")
    (pushed,) = eid_broker.authorization_requests
    assert pushed["login_hint"] == "BID:17029012345"
    assert "client_secret" not in pushed
    rp_login(eid_broker, oidc_site, eid_broker.persons.NORWEGIAN, par=False)
    assert eid_broker.authorization_requests[-1]["client_id"] == eid_broker.broker.client_id
    assert eid_broker.token_requests == 2


def test_front_channel_abort_and_fail(oidc_site: str, eid_broker: EidBroker) -> None:
    issuer = f"{FIXTURE_ISSUER}/{oidc_site}"
    params = request_params(client_id=eid_broker.broker.client_id, state="s-1")
    eid_broker.authorize(f"{issuer}/authorize?{urlencode(params)}")
    assert query(eid_broker.abort()) == {
        "error": "access_denied",
        "error_description": "The person cancelled the identification.",
        "state": "s-1",
        "iss": issuer,  # RFC 9207
    }
    eid_broker.authorize(f"{issuer}/authorize?{urlencode(params)}")
    assert query(eid_broker.fail("login_required"))["error"] == "login_required"
    with pytest.raises(ValueError, match="invalid_client"):
        eid_broker.authorize(f"{issuer}/authorize?{urlencode({**params, 'client_id': 'x'})}")


def test_faults_of_the_op_endpoints(oidc_site: str, eid_broker: EidBroker) -> None:
    issuer = f"{FIXTURE_ISSUER}/{oidc_site}"
    eid_broker.fail_next("discovery", 503)
    assert requests.get(f"{issuer}/.well-known/openid-configuration", timeout=5).status_code == 503
    assert requests.get(f"{issuer}/.well-known/openid-configuration", timeout=5).status_code == 200
    eid_broker.inject("jwks", 200, body={"keys": []}, times=1)
    assert requests.get(f"{issuer}/jwks", timeout=5).json() == {"keys": []}
    eid_broker.fail_next("userinfo", exception=requests.ConnectTimeout)
    with pytest.raises(requests.ConnectTimeout):
        requests.get(f"{issuer}/userinfo", timeout=5)
