"""Settings of the test OpenID provider: read from the JSON file ``OP_CONFIG`` names.

``tests/interop/provider.py`` writes it: ``issuer``, ``database`` (an SQLite file in the
run's temporary directory), ``signing_key`` and ``inactive_keys`` (PEM files: the key that
signs, and the retired ones the JWKS still publishes), ``clients`` (client id -> the claim
layout of :mod:`.claims` it gets), ``client_secret``, ``redirect_uri``, ``user`` and
``person``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CONFIG: dict[str, Any] = json.loads(Path(os.environ["OP_CONFIG"]).read_text(encoding="utf-8"))

SECRET_KEY = CONFIG["secret_key"]
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
USE_TZ = True
LANGUAGE_CODE = "en"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.interop.op_project.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [HERE / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": CONFIG["database"]}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# A test server: fast hashing of the user's password and the client's secret (the default
# hasher takes a third of a second per check, several times per login).
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGIN_URL = "/accounts/login/"
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {
        "django.server": {"handlers": ["stderr"], "level": "INFO"},
        "oauth2_provider": {"handlers": ["stderr"], "level": "DEBUG"},
        "oauthlib": {"handlers": ["stderr"], "level": "DEBUG"},
    },
}


def _pem(path: str) -> str:
    return Path(path).read_text(encoding="ascii")


OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_ISS_ENDPOINT": CONFIG["issuer"],
    # RS256 id_tokens; a rotation moves the old key here, where the JWKS still shows it.
    "OIDC_RSA_PRIVATE_KEY": _pem(CONFIG["signing_key"]),
    "OIDC_RSA_PRIVATE_KEYS_INACTIVE": [_pem(path) for path in CONFIG["inactive_keys"]],
    "PKCE_REQUIRED": True,
    # The scopes of every preset's layout (see claims.py): the RP asks for its preset's.
    "SCOPES": {
        "openid": "OpenID Connect",
        "profile": "Your name and date of birth",
        "ssn": "Your national identity number (Idura)",
        "nin": "Your national identity number (Signicat, Vipps)",
        "nnin_altsub": "Your national identity number (BankID)",
        "idp-id": "Your id at the eID (Signicat)",
        "name": "Your name (Vipps)",
        "birthDate": "Your date of birth (Vipps)",
    },
    "OAUTH2_VALIDATOR_CLASS": "tests.interop.op_project.claims.InteropValidator",
    # RFC 9700's recommendations, in force: S256 only, tokens in headers only, and ``iss`` in
    # the authorization response (RFC 9207), which the discovery document then announces.
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
}

#: Client id -> the claim layout (:data:`.claims.LAYOUTS`) its tokens carry.
INTEROP_LAYOUTS: dict[str, str] = CONFIG["clients"]
#: The person behind the OP's one user, as each layout names them.
INTEROP_PERSON: dict[str, str] = CONFIG["person"]
