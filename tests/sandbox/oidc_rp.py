"""What a relying party sends the sandbox's OpenID provider: the site's settings for a
preset's OP, the parameters of an authorization request, and reading what comes back."""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import parse_qs, urlsplit

from joserfc import jwt
from joserfc.jwk import KeySet

from django_eid.sandbox.persons import builtin_persons
from django_eid.sandbox.wire_oidc import s256
from tests.fixtures_client import SANDBOX_URL, sandbox_settings
from tests.sandbox.conftest import CLIENT_ID

#: The site's own ``django_eid:oidc-callback`` as the test client reaches it: the one
#: redirect URI the sandbox's OP accepts over HTTP (unless ``OIDC_REDIRECT_URI`` is set).
CALLBACK = "http://testserver/eid/oidc/callback/"
PERSONS = builtin_persons()
VERIFIER = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"


def oidc_settings(preset: str, *, issuer: str | None = None, **overrides: Any) -> dict[str, Any]:
    """A site whose broker is the sandbox's OP ``preset`` (by default over HTTP)."""
    return sandbox_settings(
        BROKER_API="oidc",
        OIDC_ISSUER=issuer or f"{SANDBOX_URL}/oidc/{preset}",
        OIDC_PRESET=None if preset == "generic" else preset,
        **overrides,
    )


def request_params(**fields: str) -> dict[str, str]:
    params = {
        "response_type": "code",
        "client_id": CLIENT_ID,
        "redirect_uri": CALLBACK,
        "scope": "openid",
        "state": "state-" + secrets.token_urlsafe(8),
        "nonce": "nonce-" + secrets.token_urlsafe(8),
        "code_challenge": s256(VERIFIER),
        "code_challenge_method": "S256",
        "response_mode": "query",
        "prompt": "login",
    }
    params.update(fields)
    return {name: value for name, value in params.items() if value != ""}


def query(url: str) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(urlsplit(url).query).items()}


def verify(id_token: str, jwks: dict[str, Any], alg: str) -> dict[str, Any]:
    """The claims of ``id_token`` once its signature verifies with ``jwks``."""
    token = jwt.decode(id_token, KeySet.import_key_set(jwks), algorithms=[alg])
    return dict(token.claims)
