"""Constants and helpers shared by the broker-client tests.

The broker's URLs are mocked with ``responses`` by the root fixture ``wire``
(``tests/conftest.py``), on which :func:`add_token`, :func:`token_calls` and
:func:`api_calls` work; caches and the shared client are reset around every test there
too, and ``slept`` records the delays between retries.
"""

from __future__ import annotations

import base64
import json
from typing import Any, TypeAlias

import responses

#: pytest-django's ``settings`` fixture (its class name differs between versions).
SettingsWrapper: TypeAlias = Any

CLIENT_ID = "test-client"
SECRET = "test-secret-s3cr3t-value"
TOKEN_URL = "https://auth.broker.test/oauth/connect/token"
SESSION_URL = "https://api.broker.test/identification/session"
#: base64("test-client:test-secret-s3cr3t-value"), written out so a change of encoding shows.
BASIC = "Basic dGVzdC1jbGllbnQ6dGVzdC1zZWNyZXQtczNjcjN0LXZhbHVl"
assert base64.b64decode(BASIC.split()[1]).decode() == f"{CLIENT_ID}:{SECRET}"

#: Realistic, long request id with characters that must be query-encoded.
REQUEST_ID = "3391840571230098455xkQJ+rTgWL4Aq7/RsIemzU8umZ=SsYNWcEFH1PbCVkdfHZjb6tfny"

#: The sample record of wire-format.md, verbatim: the client's parser is checked against the
#: spec's own example. (Tests of the views use the sandbox's records: tests/fixtures_broker.py.)
RECORD: dict[str, Any] = {
    "RequestId": REQUEST_ID,
    "Status": "SUCCESS",
    "IdentityProvider": "NO_BANKID_WEB",
    "IdentityProviderUniqueId": "9578-6000-4-12345",
    "Name": "Nordmann, Kari Marie",
    "FirstName": "Kari",
    "MiddleName": "Marie",
    "LastName": "Nordmann",
    "DateOfBirth": "311271",
    "SocialSecurityNumber": "31127112345",
    "EnvironmentInfo": {"UserAgent": "Mozilla/5.0 (X11; Linux x86_64)", "IPAddress": "203.0.113.7"},
    "Error": None,
    "MetaData": {},
}


def eid_settings_with(**overrides: Any) -> dict[str, Any]:
    """The test suite's ``DJANGO_EID`` with some keys replaced (``None`` deletes a key)."""
    from django.conf import settings

    values = dict(settings.DJANGO_EID)
    for key, value in overrides.items():
        if value is None:
            values.pop(key, None)
        else:
            values[key] = value
    return values


#: The sandbox of tests/urls.py as Django's test client reaches it.
SANDBOX_URL = "http://testserver/eid-sandbox"


def sandbox_settings(url: str = SANDBOX_URL, **overrides: Any) -> dict[str, Any]:
    """``DJANGO_EID`` of a site whose broker is the sandbox at ``url``, with the sandbox's
    own client, serving although the suite's ``DEBUG`` is False."""
    from django_eid.sandbox import broker

    values: dict[str, Any] = {
        "CLIENT_ID": broker.CLIENT_ID,
        "CLIENT_SECRET": broker.CLIENT_SECRET,
        "BASE_URL": url,
        "AUTH_URL": url,
        "SANDBOX_ALLOW_WITHOUT_DEBUG": True,
    }
    return eid_settings_with(**{**values, **overrides})


def add_token(
    rsps: responses.RequestsMock,
    token: str = "tok-1",
    expires_in: int = 3600,
    **kwargs: Any,
) -> None:
    body = {"access_token": token, "expires_in": expires_in, "token_type": "Bearer"}
    rsps.add(responses.POST, TOKEN_URL, json=body, **kwargs)


def token_calls(rsps: responses.RequestsMock) -> list[Any]:
    return [c for c in rsps.calls if c.request.url == TOKEN_URL]


def api_calls(rsps: responses.RequestsMock) -> list[Any]:
    return [c for c in rsps.calls if c.request.url.startswith(SESSION_URL)]


def json_body(call: Any) -> Any:
    return json.loads(call.request.body)
