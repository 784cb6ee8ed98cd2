"""``manage.py eid_check``: one fresh token request, a clear report, never the secrets."""

from __future__ import annotations

import socket
from io import StringIO
from typing import Any

import pytest
import requests
import responses
from django.core.cache import caches
from django.core.management import call_command, execute_from_command_line
from django.core.management.base import CommandError

from django_eid.client import EidClient
from tests.fixtures_client import (
    BASIC,
    SECRET,
    TOKEN_URL,
    SettingsWrapper,
    add_token,
    eid_settings_with,
    token_calls,
)

# The command also tries the encryption keys on the stored numbers (tests/models/test_lost_key.py).
pytestmark = pytest.mark.django_db

TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJjbGllbnRfaWQiOiJ0ZXN0In0.c2lnbmF0dXJlLXZhbHVl"


def run() -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("eid_check", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def fail() -> str:
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError) as info:
        call_command("eid_check", stdout=out, stderr=err)
    message = str(info.value)
    for text in (message, out.getvalue(), err.getvalue()):
        assert SECRET not in text
        assert TOKEN not in text
    assert "\n" not in message
    return message


def test_a_working_setup_is_reported(wire: responses.RequestsMock) -> None:
    add_token(wire, TOKEN, expires_in=3600)
    out, err = run()
    assert "Broker API: v1" in out
    assert "Token endpoint: https://auth.broker.test/oauth/connect/token" in out
    assert "Scopes asked: identify" in out
    assert "Token type: Bearer" in out
    assert "Lifetime: 3600 s" in out
    assert "OK" in out
    for text in (out, err):
        assert TOKEN not in text
        assert SECRET not in text
    (call,) = wire.calls
    assert call.request.headers["Authorization"] == BASIC


def test_a_fresh_token_is_fetched_even_when_one_is_cached(wire: responses.RequestsMock) -> None:
    add_token(wire, "tok-cached")
    add_token(wire, TOKEN)
    client = EidClient()
    client.get_token()
    run()
    assert len(token_calls(wire)) == 2
    # The check does not replace the token the site is using.
    assert caches["default"].get(client.tokens.key)["access_token"] == "tok-cached"


def test_all_scopes_are_listed(settings: SettingsWrapper, wire: responses.RequestsMock) -> None:
    settings.DJANGO_EID = eid_settings_with(SCOPES=["identify", "event"], TOKEN_AUTH_METHOD="post")
    add_token(wire)
    out, _ = run()
    assert "Scopes asked: identify event" in out
    assert "Client authentication: post" in out
    assert "Authorization" not in wire.calls[0].request.headers


def test_invalid_scope_names_the_scopes(
    settings: SettingsWrapper, wire: responses.RequestsMock
) -> None:
    settings.DJANGO_EID = eid_settings_with(SCOPES=["identify", "document_file"])
    wire.add(
        responses.POST,
        TOKEN_URL,
        status=400,
        json={"error": "invalid_scope", "error_description": "document_file not allowed"},
    )
    message = fail()
    assert message.startswith("invalid_scope")
    assert "identify document_file" in message
    assert "document_file not allowed" in message


@pytest.mark.parametrize(
    ("status", "answer"),
    [
        (401, {"json": {"error": "invalid_client"}}),
        (400, {"json": {"error": "invalid_client", "error_description": f"bad {SECRET}"}}),
        (401, {"body": ""}),
    ],
)
def test_bad_credentials_say_so(
    wire: responses.RequestsMock, status: int, answer: dict[str, Any]
) -> None:
    wire.add(responses.POST, TOKEN_URL, status=status, **answer)
    message = fail()
    assert message.startswith("Bad credentials")
    assert "test-client" in message


@pytest.mark.parametrize(
    "failure",
    [
        {"body": requests.ConnectionError("Name or service not known")},
        {"body": requests.ConnectTimeout()},
        {"status": 503},
    ],
)
def test_an_unreachable_broker_says_so(
    wire: responses.RequestsMock, failure: dict[str, Any]
) -> None:
    wire.add(responses.POST, TOKEN_URL, **failure)
    message = fail()
    assert message.startswith("Broker unreachable")
    assert TOKEN_URL in message
    assert len(wire.calls) == 3


def test_a_refused_connection_on_loopback(settings: SettingsWrapper) -> None:
    with socket.socket() as sock:  # a port that nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings.DEBUG = True
    settings.DJANGO_EID = eid_settings_with(AUTH_URL=f"http://127.0.0.1:{port}", TIMEOUT=2)
    message = fail()
    assert message.startswith("Broker unreachable")
    assert "could not connect" in message
    assert "sandbox" not in message  # not this site's own sandbox


def test_the_site_s_own_sandbox_needs_its_running_server(settings: SettingsWrapper) -> None:
    with socket.socket() as sock:  # the development server is not running
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings.DEBUG = True
    sandbox = f"http://127.0.0.1:{port}/eid-sandbox"  # where tests/urls.py mounts it
    settings.DJANGO_EID = eid_settings_with(AUTH_URL=sandbox, BASE_URL=sandbox, TIMEOUT=2)
    message = fail()
    assert message.startswith("Broker unreachable")
    assert "sandbox, which answers only while the development server runs" in message
    assert "python manage.py runserver" in message


@pytest.mark.parametrize(
    ("answer", "start"),
    [
        ({"status": 400, "json": {"error": "unsupported_grant_type"}}, "No token issued"),
        ({"status": 404, "body": "<html>nope</html>", "content_type": "text/html"}, "No token"),
        ({"status": 200, "body": "<html>login</html>"}, "Unexpected answer"),
        ({"status": 200, "json": {"access_token": TOKEN}}, "Unexpected answer"),
        ({"status": 302, "headers": {"Location": "https://evil.test/"}}, "Unexpected answer"),
    ],
)
def test_other_failures(wire: responses.RequestsMock, answer: dict[str, Any], start: str) -> None:
    wire.add(responses.POST, TOKEN_URL, **answer)
    assert fail().startswith(start)


@pytest.mark.parametrize(
    ("overrides", "check_id"),
    [
        ({"CLIENT_SECRET": None}, "E002"),
        ({"AUTH_URL": "auth.broker.test"}, "E004"),
        ({"TOKEN_AUTH_METHOD": "jwt"}, "E005"),
    ],
)
def test_configuration_errors(
    settings: SettingsWrapper,
    wire: responses.RequestsMock,
    overrides: dict[str, Any],
    check_id: str,
) -> None:
    settings.DJANGO_EID = eid_settings_with(**overrides)
    message = fail()
    assert message.startswith("Configuration error")
    assert check_id in message
    assert len(wire.calls) == 0


def test_warnings_are_shown_but_do_not_fail(wire: responses.RequestsMock, settings: Any) -> None:
    # http:// outside DEBUG is a warning (W001), whatever cache the suite runs on.
    settings.DJANGO_EID = {**settings.DJANGO_EID, "BASE_URL": "http://api.broker.test"}
    add_token(wire)
    out, err = run()
    assert "django_eid.W001" in err
    assert "Bearer" in out


def test_exit_status_from_the_command_line(
    wire: responses.RequestsMock, capsys: pytest.CaptureFixture[str]
) -> None:
    wire.add(responses.POST, TOKEN_URL, status=400, json={"error": "invalid_scope"})
    with pytest.raises(SystemExit) as info:
        execute_from_command_line(["manage.py", "eid_check"])
    assert info.value.code != 0
    captured = capsys.readouterr()
    error_lines = [line for line in captured.err.splitlines() if "Error" in line]
    assert len(error_lines) == 1
    assert "invalid_scope" in error_lines[0]
    assert SECRET not in captured.err + captured.out


def test_success_from_the_command_line(
    wire: responses.RequestsMock, capsys: pytest.CaptureFixture[str]
) -> None:
    add_token(wire, TOKEN)
    execute_from_command_line(["manage.py", "eid_check"])
    captured = capsys.readouterr()
    assert "Lifetime: 3600 s" in captured.out
    assert TOKEN not in captured.out + captured.err


def test_the_eid_hub_s_own_token_endpoint_and_scope(
    wire: responses.RequestsMock, settings: Any
) -> None:
    settings.DJANGO_EID = {
        **settings.DJANGO_EID,
        "BROKER_API": "eid-hub",
        "ACCOUNT_ID": "a-spge-1",
        "AUTH_URL": "https://auth.broker.test",
        "SCOPES": None,
    }
    wire.add(
        responses.POST,
        "https://auth.broker.test/auth/open/connect/token",
        json={"access_token": TOKEN, "expires_in": 600, "token_type": "Bearer"},
    )
    out, _err = run()
    assert "Broker API: eid-hub" in out
    assert "Token endpoint: https://auth.broker.test/auth/open/connect/token" in out
    assert "Client authentication: post" in out
    assert "Scopes asked: signicat-api" in out


# -- an OpenID provider (BROKER_API "oidc") ---------------------------------------------
OIDC_ISSUER = "https://shop-test.idura.broker"


@pytest.fixture
def oidc_site(settings: SettingsWrapper) -> None:
    settings.DJANGO_EID = {
        **settings.DJANGO_EID,
        "BROKER_API": "oidc",
        "OIDC_PRESET": "idura",
        "OIDC_ISSUER": OIDC_ISSUER,
        "OIDC_REDIRECT_URI": "https://shop.example/eid/oidc/callback/",
        "SCOPES": None,
        "BASE_URL": None,
        "AUTH_URL": None,
    }


@pytest.fixture
def provider(oidc_site: None) -> Any:
    from django_eid.sandbox.fake import EidBroker

    with EidBroker.from_settings() as served:
        yield served


def test_an_openid_provider_is_checked_with_a_pushed_request(provider: Any) -> None:
    out, _err = run()
    assert "Issuer: https://shop-test.idura.broker" in out
    assert "Pushed authorization requests: yes" in out
    assert "id_token algorithms: RS256" in out
    assert "OK: the provider accepted the client and its redirect URI" in out
    (pushed,) = provider.authorization_requests
    assert pushed["redirect_uri"] == "https://shop.example/eid/oidc/callback/"


def test_an_openid_provider_refusing_the_client_is_a_clear_failure(
    provider: Any, settings: SettingsWrapper
) -> None:
    # The provider knows the configured secret; the site now sends another.
    settings.DJANGO_EID = {**settings.DJANGO_EID, "CLIENT_SECRET": "not-the-secret"}
    message = fail()
    assert message.startswith("Bad credentials: the provider did not accept client id")
    assert "not-the-secret" not in message


def test_an_openid_provider_out_of_reach_is_a_clear_failure(
    provider: Any,
) -> None:
    provider.fail_next("discovery", exception=requests.ConnectionError("refused"), times=None)
    message = fail()
    assert message.startswith("Provider unreachable:")


def test_without_a_redirect_uri_the_metadata_is_checked_alone(
    provider: Any, settings: SettingsWrapper
) -> None:
    settings.DJANGO_EID = {**settings.DJANGO_EID, "OIDC_REDIRECT_URI": None}
    out, _err = run()
    assert "Signing keys: 2" in out
    assert "OIDC_REDIRECT_URI is not set" in out
    assert provider.authorization_requests == []
