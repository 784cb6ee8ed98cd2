"""The sandbox as an OpenID provider: checklist 3.12 of broker-generations.md.

Over HTTP with Django's test client (the sandbox mounted at ``/eid-sandbox/``, issuers
``/eid-sandbox/oidc/<preset>``), and on a clock the test moves; through the ``eid_broker``
fixture in test_wire_oidc_fixture.py. Every id_token is verified with the OP's JWKS
through joserfc.
"""

from __future__ import annotations

import base64
import secrets
import time
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest
from django.test import Client
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, RSAKey

from django_eid.sandbox.broker import SandboxBroker
from django_eid.sandbox.wire import Reply
from django_eid.sandbox.wire_oidc import ASSERTION_TYPE, OpenIdProvider
from tests.fixtures_client import SANDBOX_URL, SettingsWrapper
from tests.sandbox.conftest import BASIC, CLIENT_ID, FORM, SECRET, Clock
from tests.sandbox.oidc_rp import (
    CALLBACK,
    PERSONS,
    VERIFIER,
    oidc_settings,
    query,
    request_params,
    verify,
)

MOUNT = "/eid-sandbox/oidc"
FIXTURE_ISSUER = "https://op.test/oidc"


# -- over HTTP ---------------------------------------------------------------------------
@pytest.fixture
def http_op(settings: SettingsWrapper) -> str:
    """Preset ``idura`` over HTTP; tests switch the preset with :func:`use`."""
    settings.DJANGO_EID = oidc_settings("idura")
    return "idura"


def use(settings: SettingsWrapper, preset: str, **overrides: Any) -> None:
    settings.DJANGO_EID = oidc_settings(preset, **overrides)


def authorize(client: Client, preset: str, **fields: str) -> Any:
    return client.get(f"{MOUNT}/{preset}/authorize", request_params(**fields))


def end(client: Client, login_url: str, action: str = "identify", **form: str) -> str:
    """On the picker page, end the session; returns the redirect back to the RP."""
    path = urlsplit(login_url).path
    assert client.get(path).status_code == 200
    response = client.post(path, {"action": action, "person": "NORWEGIAN", **form})
    assert response.status_code == 302, response.content
    return str(response["Location"])


def code_for(client: Client, preset: str, person: str = "NORWEGIAN", **fields: str) -> str:
    response = authorize(client, preset, **fields)
    assert response.status_code == 302
    back = end(client, response["Location"], person=person)
    return query(back)["code"]


def token(client: Client, preset: str, code: str, *, auth: str = "basic", **fields: str) -> Any:
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": CALLBACK,
        "code_verifier": VERIFIER,
        **fields,
    }
    headers = {}
    if auth == "basic":
        headers["Authorization"] = BASIC
    elif auth == "post":
        form.update(client_id=CLIENT_ID, client_secret=SECRET)
    return client.post(
        f"{MOUNT}/{preset}/token", urlencode(form), content_type=FORM, headers=headers
    )


@pytest.mark.parametrize("preset", ["idura", "bankid-no", "signicat", "vipps", "generic"])
def test_discovery_per_preset(client: Client, settings: SettingsWrapper, preset: str) -> None:
    use(settings, preset)
    document = client.get(f"{MOUNT}/{preset}/.well-known/openid-configuration").json()
    issuer = f"{SANDBOX_URL}/oidc/{preset}"
    assert document["issuer"] == issuer
    assert document["authorization_endpoint"] == f"{issuer}/authorize"
    assert document["token_endpoint"] == f"{issuer}/token"
    assert document["userinfo_endpoint"] == f"{issuer}/userinfo"
    assert document["jwks_uri"] == f"{issuer}/jwks"
    assert document["pushed_authorization_request_endpoint"] == f"{issuer}/par"
    assert document["code_challenge_methods_supported"] == ["S256"]
    alg = "ES256" if preset == "bankid-no" else "RS256"
    assert document["id_token_signing_alg_values_supported"] == [alg]
    assert set(document["token_endpoint_auth_methods_supported"]) == {
        "client_secret_basic",
        "client_secret_post",
        "private_key_jwt",
    }
    assert "openid" in document["scopes_supported"]
    assert {"sub", "iss", "aud", "nonce"} <= set(document["claims_supported"])
    expected_acr = {
        "idura": {"urn:grn:authn:no:bankid", "urn:grn:authn:se:bankid", "urn:grn:authn:fi:all"},
        "bankid-no": {"urn:bankid:bid", "urn:bankid:bis"},
        "signicat": {"idp:nbid", "idp:sbid", "idp:mitid", "idp:ftn"},
        "vipps": set(),
        "generic": {"http://eidas.europa.eu/LoA/substantial"},
    }[preset]
    assert expected_acr <= set(document["acr_values_supported"])
    if preset == "vipps":
        assert document["subject_types_supported"] == ["pairwise"]


def test_an_unknown_preset_is_404(client: Client, http_op: str) -> None:
    assert client.get(f"{MOUNT}/criipto/.well-known/openid-configuration").status_code == 404


def test_the_op_answers_404_to_a_site_whose_issuer_is_elsewhere(
    client: Client, settings: SettingsWrapper
) -> None:
    use(settings, "idura", issuer="https://shop-test.idura.broker")
    assert client.get(f"{MOUNT}/idura/.well-known/openid-configuration").status_code == 404
    assert client.get(f"{MOUNT}/idura/authorize", request_params()).status_code == 404
    # Any of the sandbox's issuers opens all of them (one sandbox, one client).
    use(settings, "signicat")
    assert client.get(f"{MOUNT}/idura/.well-known/openid-configuration").status_code == 200


def test_jwks_has_rsa_and_ec_keys_that_verify_the_preset_tokens(
    client: Client, settings: SettingsWrapper
) -> None:
    use(settings, "bankid-no")
    keys = client.get(f"{MOUNT}/bankid-no/jwks").json()
    assert {(k["kty"], k["alg"]) for k in keys["keys"]} == {("RSA", "RS256"), ("EC", "ES256")}
    assert all("d" not in k for k in keys["keys"])  # public keys only
    code = code_for(client, "bankid-no")
    id_token = token(client, "bankid-no", code).json()["id_token"]
    claims = verify(id_token, keys, "ES256")
    assert claims["iss"] == f"{SANDBOX_URL}/oidc/bankid-no"
    with pytest.raises(JoseError):
        verify(id_token, keys, "RS256")  # ES256 at BankID Norge, nothing else


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"response_type": "token"}, "unsupported_response_type"),
        ({"scope": "profile"}, "invalid_scope"),
        ({"state": ""}, "invalid_request"),
        ({"nonce": ""}, "invalid_request"),
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"code_challenge": ""}, "invalid_request"),
        ({"response_mode": "fragment"}, "invalid_request"),
        ({"acr_values": "urn:grn:authn:de:personalausweis"}, "invalid_request"),
        ({"prompt": "none"}, "login_required"),
    ],
)
def test_authorize_errors_go_back_to_a_trusted_redirect_uri(
    client: Client, http_op: str, fields: dict[str, str], error: str
) -> None:
    response = authorize(client, "idura", **{"state": "s-err", **fields})
    assert response.status_code == 302
    location = response["Location"]
    assert location.startswith(CALLBACK + "?")
    answer = query(location)
    assert answer["error"] == error
    assert answer["error_description"]
    assert answer.get("state") == ("s-err" if "state" not in fields else None)
    assert "code" not in answer


@pytest.mark.parametrize(
    "fields",
    [{"client_id": "someone-else"}, {"redirect_uri": "/relative/"}, {"redirect_uri": ""}],
    ids=["unknown client", "relative redirect_uri", "no redirect_uri"],
)
def test_an_untrusted_redirect_uri_gets_a_400_page(
    client: Client, http_op: str, fields: dict[str, str]
) -> None:
    response = authorize(client, "idura", **fields)
    assert response.status_code == 400
    assert "Location" not in response


#: Near misses of CALLBACK (http://testserver/eid/oidc/callback/), each of which a prefix,
#: substring, normalising or parsing comparison could take for it.
NOT_REGISTERED = {
    "another origin": "https://evil.example/eid/oidc/callback/",
    "another scheme": "https://testserver/eid/oidc/callback/",
    "another port": "http://testserver:8080/eid/oidc/callback/",
    "the default port spelt out": "http://testserver:80/eid/oidc/callback/",
    "a host it prefixes": "http://testserver.evil.example/eid/oidc/callback/",
    "userinfo": "http://testserver@evil.example/eid/oidc/callback/",
    "userinfo of the site": "http://evil@testserver/eid/oidc/callback/",
    "backslash": "http://evil.example\\@testserver/eid/oidc/callback/",
    "backslashes for slashes": "http:\\\\evil.example\\eid\\oidc\\callback\\",
    "scheme-relative": "//evil.example/eid/oidc/callback/",
    "relative path": "/eid/oidc/callback/",
    "path traversal": CALLBACK + "../../../admin/",
    "encoded traversal": CALLBACK + "%2e%2e/%2e%2e/%2e%2e/admin/",
    "a longer path": CALLBACK + "evil/",
    "another path of the site": "http://testserver/admin/",
    "without the trailing slash": CALLBACK.rstrip("/"),
    "case on the path": "http://testserver/EID/oidc/callback/",
    "case on the host": "http://TESTSERVER/eid/oidc/callback/",
    "percent-encoded path": "http://testserver/eid/oidc/%63allback/",
    "a query added": CALLBACK + "?next=https://evil.example/",
    "a fragment": CALLBACK + "#https://evil.example/",
    "an empty fragment": CALLBACK + "#",
    "trailing space": CALLBACK + " ",
    "an embedded tab": "http://testserver/eid/oidc/\tcallback/",
    "javascript": "javascript:alert(1)//http://testserver/eid/oidc/callback/",
    "missing": "",
}


@pytest.mark.parametrize("redirect_uri", NOT_REGISTERED.values(), ids=NOT_REGISTERED.keys())
def test_only_the_registered_redirect_uri_is_accepted(
    client: Client, http_op: str, redirect_uri: str
) -> None:
    # RFC 6749 3.1.2.4 and 4.1.2.1: a valid request is not started, an invalid one is not
    # sent back; either way nobody leaves for the redirect_uri, the OP says it itself.
    for fields in ({}, {"scope": "profile"}, {"prompt": "none"}):
        response = authorize(client, "idura", redirect_uri=redirect_uri, **fields)
        assert response.status_code == 400, fields
        assert "Location" not in response
        assert b"redirect_uri" in response.content
    # The same request with the site's own callback is served.
    assert authorize(client, "idura")["Location"].startswith(f"{SANDBOX_URL}/login/")


def test_the_registered_redirect_uri_is_the_sites_oidc_redirect_uri_when_set(
    client: Client, settings: SettingsWrapper
) -> None:
    configured = "https://shop.test/eid/oidc/callback/"
    use(settings, "idura", OIDC_REDIRECT_URI=configured)
    # The callback on the request's host is no longer the registered one ...
    refused = authorize(client, "idura")
    assert refused.status_code == 400
    assert "Location" not in refused
    # ... the configured one is, at the authorization and the token endpoints.
    code = code_for(client, "idura", redirect_uri=configured)
    assert token(client, "idura", code, redirect_uri=configured).status_code == 200
    error = authorize(client, "idura", redirect_uri=configured, scope="profile")["Location"]
    assert error.startswith(configured + "?")
    assert query(error)["error"] == "invalid_scope"


@pytest.mark.parametrize(
    "redirect_uri",
    [NOT_REGISTERED[case] for case in ("another origin", "another port", "userinfo", "missing")],
    ids=["another origin", "another port", "userinfo", "missing"],
)
def test_par_refuses_a_redirect_uri_not_registered(
    client: Client, http_op: str, redirect_uri: str
) -> None:
    pushed = client.post(
        f"{MOUNT}/idura/par",
        urlencode(request_params(redirect_uri=redirect_uri)),
        content_type=FORM,
        headers={"Authorization": BASIC},
    )
    assert pushed.status_code == 400
    assert pushed.json()["error"] == "invalid_request"
    assert "request_uri" not in pushed.json()


def test_a_pushed_request_whose_redirect_uri_is_no_longer_registered_is_not_redirected(
    client: Client, settings: SettingsWrapper, http_op: str
) -> None:
    pushed = client.post(
        f"{MOUNT}/idura/par",
        urlencode(request_params()),
        content_type=FORM,
        headers={"Authorization": BASIC},
    )
    assert pushed.status_code == 201
    use(settings, "idura", OIDC_REDIRECT_URI="https://shop.test/eid/oidc/callback/")
    visit = {"client_id": CLIENT_ID, "request_uri": pushed.json()["request_uri"]}
    response = client.get(f"{MOUNT}/idura/authorize", visit)
    assert response.status_code == 400
    assert "Location" not in response


def test_the_state_comes_back_with_an_error(client: Client, http_op: str) -> None:
    response = authorize(client, "idura", state="s-123", scope="profile")
    assert query(response["Location"]) == {
        "error": "invalid_scope",
        "error_description": "The scope must contain openid.",
        "state": "s-123",
        "iss": f"http://testserver{MOUNT}/idura",  # RFC 9207
    }


def test_par_answers_201_and_its_request_uri_is_single_use(client: Client, http_op: str) -> None:
    pushed = client.post(
        f"{MOUNT}/idura/par",
        urlencode(request_params(login_hint="BID:17029012345")),
        content_type=FORM,
        headers={"Authorization": BASIC},
    )
    assert pushed.status_code == 201
    body = pushed.json()
    assert body["request_uri"].startswith("urn:ietf:params:oauth:request_uri:")
    assert body["expires_in"] == 120
    visit = {"client_id": CLIENT_ID, "request_uri": body["request_uri"]}
    first = client.get(f"{MOUNT}/idura/authorize", visit)
    assert first.status_code == 302
    page = client.get(urlsplit(first["Location"]).path)
    assert page.status_code == 200
    assert b"BID:17029012345" in page.content  # shown as a hint, nothing more
    again = client.get(f"{MOUNT}/idura/authorize", visit)
    assert again.status_code == 400
    assert "Location" not in again


def test_par_refuses_a_bad_request_as_json(client: Client, http_op: str) -> None:
    pushed = client.post(
        f"{MOUNT}/idura/par",
        urlencode(request_params(code_challenge_method="plain")),
        content_type=FORM,
        headers={"Authorization": BASIC},
    )
    assert pushed.status_code == 400
    assert pushed.json()["error"] == "invalid_request"
    unauthenticated = client.post(
        f"{MOUNT}/idura/par", urlencode(request_params()), content_type=FORM
    )
    assert unauthenticated.status_code == 401
    assert unauthenticated.json()["error"] == "invalid_client"


@pytest.mark.parametrize("auth", ["basic", "post"])
def test_token_with_a_client_secret(client: Client, http_op: str, auth: str) -> None:
    response = token(client, "idura", code_for(client, "idura"), auth=auth)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] > 0
    assert response["Cache-Control"] == "no-store"


def test_basic_credentials_are_form_urlencoded_before_base64(client: Client, http_op: str) -> None:
    # RFC 6749 2.3.1: "sandbox-secret" sent as "sandbox%2Dsecret" is the same secret.
    encoded = base64.b64encode(b"sandbox%2Dclient:sandbox%2Dsecret").decode()
    form = {
        "grant_type": "authorization_code",
        "code": code_for(client, "idura"),
        "redirect_uri": CALLBACK,
        "code_verifier": VERIFIER,
    }
    response = client.post(
        f"{MOUNT}/idura/token",
        urlencode(form),
        content_type=FORM,
        headers={"Authorization": f"Basic {encoded}"},
    )
    assert response.status_code == 200, response.content


def test_a_wrong_secret_is_401_invalid_client(client: Client, http_op: str) -> None:
    code = code_for(client, "idura")
    wrong = "Basic " + base64.b64encode(f"{CLIENT_ID}:not-the-secret".encode()).decode()
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": CALLBACK}
    response = client.post(
        f"{MOUNT}/idura/token",
        urlencode({**form, "code_verifier": VERIFIER}),
        content_type=FORM,
        headers={"Authorization": wrong},
    )
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"
    assert "not-the-secret" not in response.content.decode()


def test_a_code_is_single_use(client: Client, http_op: str) -> None:
    code = code_for(client, "idura")
    assert token(client, "idura", code).status_code == 200
    again = token(client, "idura", code)
    assert again.status_code == 400
    assert again.json()["error"] == "invalid_grant"


@pytest.mark.parametrize(
    "fields",
    [
        {"code_verifier": "x" * 43},
        {"code_verifier": ""},
        {"redirect_uri": "https://shop.test/eid/oidc/other/"},
        {"redirect_uri": ""},
        {"redirect_uri": CALLBACK + "?x=1"},
        {"redirect_uri": "http://testserver:80/eid/oidc/callback/"},
    ],
    ids=[
        "wrong verifier",
        "no verifier",
        "wrong redirect_uri",
        "empty redirect_uri",
        "redirect_uri with a query added",
        "redirect_uri with the default port",
    ],
)
def test_a_code_is_bound_to_its_verifier_and_redirect_uri(
    client: Client, http_op: str, fields: dict[str, str]
) -> None:
    code = code_for(client, "idura")
    response = token(client, "idura", code, **fields)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"
    # ... and a refused code is used up.
    assert token(client, "idura", code).json()["error"] == "invalid_grant"


def test_a_code_of_another_preset_is_refused(client: Client, http_op: str) -> None:
    code = code_for(client, "idura")
    assert token(client, "signicat", code).json()["error"] == "invalid_grant"


def _private_key_settings(settings: SettingsWrapper, key: RSAKey | ECKey, kid: str) -> None:
    pem = key.as_pem(private=True).decode()
    use(settings, "idura", TOKEN_AUTH_METHOD="private_key_jwt", OIDC_PRIVATE_KEY=pem,
        OIDC_PRIVATE_KEY_ID=kid)  # fmt: skip


def assertion(key: RSAKey | ECKey, kid: str, alg: str, **claims: Any) -> str:
    now = int(time.time())
    values = {
        "iss": CLIENT_ID,
        "sub": CLIENT_ID,
        "aud": f"{SANDBOX_URL}/oidc/idura/token",
        "jti": secrets.token_hex(8),
        "iat": now,
        "exp": now + 120,
        **claims,
    }
    values = {k: v for k, v in values.items() if v is not None}
    return jwt.encode({"alg": alg, "kid": kid}, values, key, algorithms=[alg])


@pytest.mark.parametrize(
    ("kind", "alg"), [("RSA", "RS256"), ("EC", "ES256")], ids=["RS256", "ES256"]
)
def test_token_with_private_key_jwt(
    client: Client, settings: SettingsWrapper, kind: str, alg: str
) -> None:
    key = RSAKey.generate_key(2048) if kind == "RSA" else ECKey.generate_key("P-256")
    _private_key_settings(settings, key, "client-key-1")
    signed = assertion(key, "client-key-1", alg)
    extra = {"client_assertion_type": ASSERTION_TYPE, "client_assertion": signed}
    response = token(client, "idura", code_for(client, "idura"), auth="none", **extra)
    assert response.status_code == 200, response.content
    # The same assertion again: a replay.
    replay = token(client, "idura", code_for(client, "idura"), auth="none", **extra)
    assert replay.status_code == 401
    assert replay.json()["error"] == "invalid_client"


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": "https://elsewhere.test/token"},
        {"iss": "someone-else"},
        {"exp": int(time.time()) - 3600},
        {"exp": int(time.time()) + 3600},
        {"jti": None},
    ],
    ids=["aud", "iss", "expired", "too long", "no jti"],
)
def test_a_bad_client_assertion_is_401(
    client: Client, settings: SettingsWrapper, claims: dict[str, Any]
) -> None:
    key = RSAKey.generate_key(2048)
    _private_key_settings(settings, key, "client-key-1")
    extra = {
        "client_assertion_type": ASSERTION_TYPE,
        "client_assertion": assertion(key, "client-key-1", "RS256", **claims),
    }
    response = token(client, "idura", code_for(client, "idura"), auth="none", **extra)
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


def test_an_assertion_signed_by_another_key_is_401(
    client: Client, settings: SettingsWrapper
) -> None:
    _private_key_settings(settings, RSAKey.generate_key(2048), "client-key-1")
    stranger = RSAKey.generate_key(2048)
    extra = {
        "client_assertion_type": ASSERTION_TYPE,
        "client_assertion": assertion(stranger, "client-key-1", "RS256"),
    }
    response = token(client, "idura", code_for(client, "idura"), auth="none", **extra)
    assert response.status_code == 401


def test_userinfo_with_a_good_and_a_bad_token(client: Client, settings: SettingsWrapper) -> None:
    use(settings, "signicat")
    code = code_for(client, "signicat", scope="openid profile idp-id nin", acr_values="idp:nbid")
    access = token(client, "signicat", code).json()["access_token"]
    good = client.get(f"{MOUNT}/signicat/userinfo", headers={"Authorization": f"Bearer {access}"})
    assert good.status_code == 200
    assert good["Content-Type"] == "application/json"
    info = good.json()
    assert info["idp"] == "nbid"
    assert info["nin"] == PERSONS.NORWEGIAN.national_identity_number
    assert info["nin_type"] == "BIRTH"
    bad = client.get(f"{MOUNT}/signicat/userinfo", headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401
    assert bad.json()["error"] == "invalid_token"
    assert 'error="invalid_token"' in bad["WWW-Authenticate"]
    # Another preset's OP does not honour this one's tokens.
    other = client.get(f"{MOUNT}/vipps/userinfo", headers={"Authorization": f"Bearer {access}"})
    assert other.status_code == 401


def test_abort_returns_access_denied_with_the_state(client: Client, http_op: str) -> None:
    response = authorize(client, "idura", state="s-abort")
    back = end(client, response["Location"], action="abort")
    assert back.startswith(CALLBACK + "?")
    answer = query(back)
    assert answer["error"] == "access_denied"
    assert answer["state"] == "s-abort"
    assert "code" not in answer


def test_a_failure_returns_its_status_as_the_error(client: Client, http_op: str) -> None:
    response = authorize(client, "idura", state="s-fail")
    back = end(client, response["Location"], action="fail", error_status="PKI_BLOCKED")
    assert query(back)["error"] == "PKI_BLOCKED"
    assert query(back)["state"] == "s-fail"


def test_a_redirect_uri_keeps_its_own_query(client: Client, settings: SettingsWrapper) -> None:
    use(settings, "idura", OIDC_REDIRECT_URI=CALLBACK + "?site=1")
    response = authorize(client, "idura", redirect_uri=CALLBACK + "?site=1", state="s-q")
    back = end(client, response["Location"])
    answer = query(back)
    assert answer["site"] == "1"
    assert answer["state"] == "s-q"
    assert answer["code"]


def test_an_assertion_with_another_kid_is_401(client: Client, settings: SettingsWrapper) -> None:
    key = RSAKey.generate_key(2048)
    _private_key_settings(settings, key, "client-key-1")
    extra = {
        "client_assertion_type": ASSERTION_TYPE,
        "client_assertion": assertion(key, "client-key-2", "RS256"),
    }
    response = token(client, "idura", code_for(client, "idura"), auth="none", **extra)
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


def test_lifetimes_of_a_request_uri_and_a_code(clocked: SandboxBroker, clock: Clock) -> None:
    op = OpenIdProvider(
        clocked, preset="idura", issuer=f"{FIXTURE_ISSUER}/idura", redirect_uris=[CALLBACK]
    )
    body = urlencode(request_params()).encode()

    def visit(request_uri: str) -> Any:
        return op.authorize(urlencode({"client_id": CLIENT_ID, "request_uri": request_uri}))

    fresh = op.par(authorization=BASIC, content_type=FORM, body=body).body["request_uri"]
    stale = op.par(authorization=BASIC, content_type=FORM, body=body).body["request_uri"]
    clock.now += 119
    assert visit(fresh).session is not None
    clock.now += 2
    refused = visit(stale)
    assert refused.location is None
    assert "invalid_request_uri" in refused.error

    def code_after(seconds: float) -> Reply:
        session = op.authorize(body.decode()).session
        assert session is not None
        code = query(clocked.identify(session.request_id, PERSONS.NORWEGIAN))["code"]
        clock.now += seconds
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": CALLBACK,
            "code_verifier": VERIFIER,
        }
        return op.token(authorization=BASIC, content_type=FORM, body=urlencode(form).encode())

    assert code_after(59).status == 200
    late = code_after(61)
    assert late.status == 400
    assert late.body["error"] == "invalid_grant"
