"""Shared fixtures of the flow tests: users, the mocked broker, a recorder of signals.

The broker is mocked with ``responses`` at its two real addresses. The callbacks are
driven with the return URLs the app actually sent in the create request, with the
placeholders substituted as the broker does it (text replacement of ``[0]``, ``[1]``,
``[2]``; values URL-encoded).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
import responses
from django.contrib.auth.models import User
from django.test import Client
from responses import matchers

import django_eid.transport
from django_eid import signals
from django_eid.models import Identification
from tests.conftest import reset_eid_state

TOKEN_URL = "https://auth.broker.test/oauth/connect/token"
SESSION_URL = "https://api.broker.test/identification/session"
#: Where the broker sends the user (the ``Url`` of the create response).
BROKER_PAGE = "https://id.broker.test/NoBankIDWeb/Start?sessionid=Qm9nZXQ&language=NO"
CLIENT_SECRET = "test-secret-s3cr3t-value"
#: base64("test-client:test-secret-s3cr3t-value"): the Basic credentials.
BASIC_CREDENTIALS = "dGVzdC1jbGllbnQ6dGVzdC1zZWNyZXQtczNjcjN0LXZhbHVl"
ACCESS_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzY29wZSI6WyJpZGVudGlmeSJdfQ.c2lnbmF0dXJlLXNlY3JldA"
SSN = "31127112345"

SIGNAL_NAMES = (
    "identification_started",
    "identification_succeeded",
    "identification_aborted",
    "identification_failed",
)

_ids = itertools.count(1)


def new_request_id() -> str:
    """A long request id in the shape of the public sample (200 characters)."""
    head = f"{3391840571230098455 + next(_ids)}"
    return (head + "xkQJrTgWL4Aq7RsIemzU8umZSsYNWcEFH1PbCVkdfHZjb6tfnyeTo4mDcvOoEP0z" * 4)[:200]


def make_record(request_id: str, status: str = "SUCCESS", **overrides: Any) -> dict[str, Any]:
    """A retrieved record (PascalCase, as on the wire)."""
    record: dict[str, Any] = {
        "RequestId": request_id,
        "Status": status,
        "IdentityProvider": "NO_BANKID_WEB",
        "IdentityProviderUniqueId": "9578-6000-4-12345",
        "Name": "Nordmann, Kari Marie",
        "FirstName": "Kari",
        "MiddleName": "Marie",
        "LastName": "Nordmann",
        "DateOfBirth": "311271",
        "SocialSecurityNumber": SSN,
        "EnvironmentInfo": {
            "UserAgent": "Mozilla/5.0 (X11; Linux x86_64)",
            "IPAddress": "203.0.113.7",
        },
        "Error": None,
        "MetaData": {},
    }
    record.update(overrides)
    return record


class Broker:
    """The mocked broker: register what it answers, then inspect what it was sent."""

    def __init__(self, rsps: responses.RequestsMock) -> None:
        self.rsps = rsps
        body = {"access_token": ACCESS_TOKEN, "expires_in": 3600, "token_type": "Bearer"}
        rsps.add(responses.POST, TOKEN_URL, json=body)

    # -- answers ------------------------------------------------------------
    def will_create(self, request_id: str | None = None, url: str = BROKER_PAGE) -> str:
        """The next create request succeeds; returns the request id it answers."""
        request_id = request_id or new_request_id()
        self.rsps.add(responses.POST, SESSION_URL, json={"Url": url, "RequestId": request_id})
        return request_id

    def will_fail_create(self, status: int = 500, **kwargs: Any) -> None:
        self.rsps.add(responses.POST, SESSION_URL, status=status, **kwargs)

    def will_return(self, request_id: str, status: str = "SUCCESS", **overrides: Any) -> None:
        """The next retrieval of ``request_id`` answers a record (see :func:`make_record`)."""
        self.will_answer(request_id, json=make_record(request_id, status, **overrides))

    def will_answer(self, request_id: str, times: int = 1, **kwargs: Any) -> None:
        """The next ``times`` retrievals of ``request_id`` answer ``kwargs`` (responses.add)."""
        for _ in range(times):
            self.rsps.add(
                responses.GET,
                SESSION_URL,
                match=[matchers.query_param_matcher({"requestId": request_id})],
                **kwargs,
            )

    # -- what was sent --------------------------------------------------------
    def calls(self, method: str, url: str) -> list[Any]:
        return [
            c
            for c in self.rsps.calls
            if c.request.method == method and (c.request.url or "").split("?")[0] == url
        ]

    @property
    def create_calls(self) -> list[Any]:
        return self.calls("POST", SESSION_URL)

    @property
    def get_calls(self) -> list[Any]:
        return self.calls("GET", SESSION_URL)

    def sent(self, index: int = -1) -> dict[str, Any]:
        """The JSON body of a create request."""
        body: dict[str, Any] = json.loads(self.create_calls[index].request.body)
        return body


def substitute(url: str, **values: str) -> str:
    """Replace placeholders as the broker does; returns path and query for the test client.

    ``values`` maps ``p0``/``p1``/``p2`` to the text for ``[0]``/``[1]``/``[2]``.
    """
    for key, value in values.items():
        url = url.replace(f"[{key[1:]}]", quote(value, safe=""))
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc) == ("http", "testserver"), url
    return f"{parts.path}?{parts.query}"


@dataclass
class Started:
    """A session started through the start view, and its return URLs as the broker has them."""

    response: Any  # the test client's response
    sent: dict[str, Any]
    request_id: str
    row: Identification

    @property
    def return_urls(self) -> dict[str, str]:
        urls: dict[str, str] = self.sent["ReturnUrls"]
        return urls

    def success_url(self, **values: str) -> str:
        """The Success URL; ``p1``/``p2`` default to the genuine request and external id."""
        values = {"p1": self.request_id, "p2": self.row.external_id, **values}
        return substitute(self.return_urls["Success"], **values)

    def abort_url(self, **values: str) -> str:
        values = {"p1": self.request_id, "p2": self.row.external_id, **values}
        return substitute(self.return_urls["Abort"], **values)

    def error_url(self, status: str = "TIMEOUT") -> str:
        return substitute(self.return_urls["Error"], p0=status)

    def refresh(self) -> Identification:
        self.row.refresh_from_db()
        return self.row


@pytest.fixture(autouse=True)
def _clean_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Empty caches (shared token), a fresh shared client, no sleeping between retries."""

    monkeypatch.setattr(django_eid.transport, "BACKOFF", 0.0)
    reset_eid_state()
    yield
    reset_eid_state()


@pytest.fixture
def broker() -> Iterator[Broker]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        yield Broker(rsps)


@pytest.fixture
def alice(django_user_model: Any) -> User:
    user: User = django_user_model.objects.create_user("alice", "alice@example.com", "pw-alice")
    return user


@pytest.fixture
def bob(django_user_model: Any) -> User:
    user: User = django_user_model.objects.create_user("bob", "bob@example.com", "pw-bob")
    return user


@pytest.fixture
def alice_client(alice: User) -> Client:
    client = Client()
    client.force_login(alice)
    return client


@pytest.fixture
def bob_client(bob: User) -> Client:
    client = Client()
    client.force_login(bob)
    return client


@pytest.fixture
def start(broker: Broker, alice_client: Client) -> Callable[..., Started]:
    """``start(client=alice_client, request_id=None, **post)``: POST to the start view.

    The broker answers ``request_id`` (a fresh one by default); checks the redirect (or the
    iframe page) and that one create request was sent.
    """

    def run(client: Client = alice_client, request_id: str | None = None, **post: str) -> Started:
        request_id = broker.will_create(request_id)
        before = len(broker.create_calls)
        response = client.post("/eid/start/", post)
        assert len(broker.create_calls) == before + 1
        if post.get("display") == "iframe":
            assert response.status_code == 200
        else:
            assert response.status_code == 302
            assert response["Location"] == BROKER_PAGE
        row = Identification.objects.get(request_id=request_id)
        assert row.status == Identification.Status.PENDING
        return Started(response, broker.sent(), request_id, row)

    return run


@dataclass
class SignalLog:
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def of(self, name: str) -> list[dict[str, Any]]:
        return [kwargs for n, kwargs in self.calls if n == name]


@pytest.fixture
def signal_log() -> Iterator[SignalLog]:
    """Every django-eid signal sent during the test, with its keyword arguments."""
    log = SignalLog()
    receivers = []
    for name in SIGNAL_NAMES:

        def receiver(name: str = name, **kwargs: Any) -> None:
            identification = kwargs["identification"]
            log.calls.append((name, {**kwargs, "status": identification.status}))

        getattr(signals, name).connect(receiver, weak=False, dispatch_uid=f"test-log-{name}")
        receivers.append(name)
    yield log
    for name in receivers:
        getattr(signals, name).disconnect(dispatch_uid=f"test-log-{name}")
