"""Shared by the wire-layer tests: the sandbox over HTTP allowed, a clock, a clocked broker,
the client-credentials grant over HTTP."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from django.test import Client

from django_eid.sandbox.broker import CLIENT_ID, SandboxBroker
from django_eid.sandbox.broker import CLIENT_SECRET as SECRET
from django_eid.sandbox.store import MemoryStore
from tests.fixtures_client import SettingsWrapper, sandbox_settings

FORM = "application/x-www-form-urlencoded"
BASIC = "Basic " + base64.b64encode(f"{CLIENT_ID}:{SECRET}".encode()).decode()
LOGIN = "https://sandbox.test/login/{}/"


def client_credentials(client: Client, url: str, scope: str, *, basic: bool) -> Any:
    """The token request at ``url``: the client authenticated with :data:`BASIC`, or with its
    id and secret in the form (``client_secret_post``)."""
    body = f"grant_type=client_credentials&scope={scope}"
    if basic:
        return client.post(url, body, content_type=FORM, headers={"Authorization": BASIC})
    body += f"&client_id={CLIENT_ID}&client_secret={SECRET}"
    return client.post(url, body, content_type=FORM)


def bearer_of(granted: Any) -> dict[str, str]:
    """The ``Authorization`` header with the access token of the token answer ``granted``."""
    return {"Authorization": "Bearer " + granted.json()["access_token"]}


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1_741_083_300.0  # 2025-03-04T10:15:00Z

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def sandbox_allowed(request: pytest.FixtureRequest, settings: SettingsWrapper) -> None:
    """The site's broker is the sandbox mounted in tests/urls.py (tests/settings.py has DEBUG
    False, as production would); the ``eid_broker`` fixture's tests keep the suite's
    broker, which that fixture serves through ``responses``."""
    if "eid_broker" not in request.fixturenames:
        settings.DJANGO_EID = sandbox_settings()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def clocked(clock: Clock) -> SandboxBroker:
    """The behaviour without HTTP, on the test's clock."""
    return SandboxBroker(
        MemoryStore(clock),
        client_id=CLIENT_ID,
        client_secret=SECRET,
        login_url=LOGIN.format,
        clock=clock,
    )
