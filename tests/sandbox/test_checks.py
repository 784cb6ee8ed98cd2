"""Where the sandbox answers at all: not without ``DEBUG`` unless allowed, only for a site
whose broker it is, only to its own client; and the system checks that say so."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from django.core import checks
from django.test import Client

from django_eid.sandbox.checks import check_sandbox
from tests.fixtures_client import SANDBOX_URL, SettingsWrapper, eid_settings_with, sandbox_settings
from tests.sandbox.conftest import FORM
from tests.sandbox.oidc_rp import oidc_settings
from tests.sandbox.over_http import SESSION, TOKEN, login_path, token


# -- the DEBUG gate and the system checks ---------------------------------------------------------
def test_refused_without_debug_unless_allowed(client: Client, settings: SettingsWrapper) -> None:
    path, _ = login_path(client)
    settings.DJANGO_EID = sandbox_settings(SANDBOX_ALLOW_WITHOUT_DEBUG=None)
    assert token(client).status_code == 404
    assert client.post(SESSION, "{}", content_type="application/json").status_code == 404
    assert client.get(path).status_code == 404
    settings.DEBUG = True
    assert token(client).status_code == 200
    assert client.get(path).status_code == 200


# -- only the sandbox's own client, only for a site whose broker it is ------------------------------
REAL = {"CLIENT_ID": "real-client", "CLIENT_SECRET": "real-secret-from-the-broker"}


def test_the_token_endpoint_never_confirms_the_sites_credentials(
    client: Client, settings: SettingsWrapper
) -> None:
    # Real credentials next to SANDBOX_ALLOW_WITHOUT_DEBUG: a right guess of the real secret
    # must look exactly like a wrong one.
    settings.DJANGO_EID = sandbox_settings(**REAL)
    real = base64.b64encode(f"{REAL['CLIENT_ID']}:{REAL['CLIENT_SECRET']}".encode()).decode()
    wrong = base64.b64encode(f"{REAL['CLIENT_ID']}:a-wrong-guess".encode()).decode()
    answers = [token(client, auth=f"Basic {basic}") for basic in (real, wrong)]
    assert [a.status_code for a in answers] == [401, 401]
    assert answers[0].json() == answers[1].json()
    form = f"grant_type=client_credentials&scope=identify&client_id={REAL['CLIENT_ID']}"
    posted = client.post(TOKEN, f"{form}&client_secret={REAL['CLIENT_SECRET']}", content_type=FORM)
    assert posted.status_code == 401
    assert token(client).status_code == 200  # the sandbox's own client


@pytest.mark.parametrize(
    "elsewhere",
    [
        {"BASE_URL": "https://api.broker.test", "AUTH_URL": "https://auth.broker.test"},
        {"BASE_URL": "https://api.broker.test"},
        {"AUTH_URL": "https://auth.broker.test"},
        {"BASE_URL": "http://other.test/eid-sandbox"},  # another host's sandbox
        {"AUTH_URL": "http://testserver:8000/eid-sandbox"},  # another port
        {"BASE_URL": "http://testserver/elsewhere"},  # another path
        {"BASE_URL": None},  # v1 has no default
    ],
)
def test_no_answer_unless_the_sites_broker_is_this_sandbox(
    client: Client, settings: SettingsWrapper, elsewhere: dict[str, Any]
) -> None:
    path, _ = login_path(client)
    settings.DJANGO_EID = sandbox_settings(**elsewhere)
    assert token(client).status_code == 404
    assert client.post(SESSION, "{}", content_type="application/json").status_code == 404
    assert client.get(path).status_code == 404
    assert client.get("/eid-sandbox/web-messaging.js").status_code == 404


@pytest.mark.parametrize(
    "url",
    [
        SANDBOX_URL,
        SANDBOX_URL + "/",
        "HTTP://TestServer/eid-sandbox",
        "https://testserver/eid-sandbox",
        "http://testserver:80/eid-sandbox",
    ],
)
def test_the_sandbox_is_recognised_however_its_url_is_written(
    client: Client, settings: SettingsWrapper, url: str
) -> None:
    # A proxy in front may change the scheme the sandbox sees, not where the calls go.
    settings.DJANGO_EID = sandbox_settings(url)
    assert token(client).status_code == 200


def test_checks_of_the_sites_broker(settings: SettingsWrapper) -> None:
    settings.DEBUG = True

    def found(**values: Any) -> set[str | None]:
        settings.DJANGO_EID = sandbox_settings(**values)
        return {m.id for m in checks.run_checks(tags=["django_eid_sandbox"])}

    assert found() == set()
    assert found(BASE_URL="https://api.broker.test") == {"django_eid.W101"}
    assert found(AUTH_URL="http://127.0.0.1:8000/elsewhere") == {"django_eid.W101"}
    assert found(**REAL) == {"django_eid.W102"}
    settings.DJANGO_EID = sandbox_settings(**REAL)
    (message,) = checks.run_checks(tags=["django_eid_sandbox"])
    assert REAL["CLIENT_SECRET"] not in f"{message.msg} {message.hint}"
    # Against a real broker with its credentials: W101 says it all.
    assert found(BASE_URL="https://api.broker.test", **REAL) == {"django_eid.W101"}


def run_checks(settings: SettingsWrapper, *, debug: bool, allow: bool | None) -> set[str | None]:
    settings.DEBUG = debug
    settings.DJANGO_EID = sandbox_settings(SANDBOX_ALLOW_WITHOUT_DEBUG=allow)
    return {m.id for m in checks.run_checks(tags=["django_eid_sandbox"])}


def test_checks(settings: SettingsWrapper) -> None:
    assert run_checks(settings, debug=True, allow=None) == set()
    assert run_checks(settings, debug=False, allow=None) == {"django_eid.E100"}
    assert run_checks(settings, debug=False, allow=True) == {"django_eid.W100"}
    assert run_checks(settings, debug=True, allow=True) == set()


def test_the_checks_are_registered_apart_from_the_apps_settings_checks(
    settings: SettingsWrapper,
) -> None:
    assert check_sandbox in checks.registry.registry.get_checks()
    settings.DEBUG = False
    settings.DJANGO_EID = eid_settings_with(SANDBOX_ALLOW_WITHOUT_DEBUG=None)
    assert "django_eid.E100" not in {m.id for m in checks.run_checks(tags=["django_eid"])}
    # No database: the model checks would ask it about its features (Django 6.1 runs them
    # against every connection unless told which), and this test has none.
    assert "django_eid.E100" in {m.id for m in checks.run_checks(databases=[])}


def test_check_of_the_sandbox_cache(settings: SettingsWrapper) -> None:
    settings.DJANGO_EID = sandbox_settings(SANDBOX_CACHE="nope")
    settings.DEBUG = True
    assert {m.id for m in check_sandbox()} == {"django_eid.E101"}


def test_checks_of_an_oidc_site(settings: SettingsWrapper) -> None:
    settings.DEBUG = True

    def found(**values: Any) -> set[str | None]:
        settings.DJANGO_EID = oidc_settings("idura", **values)
        return {m.id for m in checks.run_checks(tags=["django_eid_sandbox"])}

    assert found() == set()
    assert found(issuer="https://shop-test.idura.broker") == {"django_eid.W101"}
    assert found(issuer="http://testserver/eid-sandbox/oidc/nope") == {"django_eid.W101"}
    assert found(CLIENT_SECRET="real-secret") == {"django_eid.W102"}
    # private_key_jwt needs the sandbox's client id only.
    assert found(CLIENT_SECRET="real-secret", TOKEN_AUTH_METHOD="private_key_jwt") == set()
