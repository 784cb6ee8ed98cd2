"""Fixtures of the hostile-input suite: a scriptable fake broker, users, row snapshots, signals.

The broker is mocked with ``responses`` at its two real addresses; every answer can be
replaced by a fault (an HTTP status with a body, or a raised transport error), once or for
every call. The callbacks are driven with the return URLs the app actually sent in the
create request, placeholders substituted as the broker does (text replacement, URL-encoded).

Every test checks the exact outcome: the status code, which rows changed (``snapshot()``
before and after), and which signals fired (``fired``).
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
import requests
import responses
from django.contrib.auth.models import AbstractBaseUser
from django.db import OperationalError, connection
from django.http import HttpResponse
from django.test import Client

import django_eid.transport
from django_eid import signals
from django_eid.models import Identification
from tests.conftest import reset_eid_state

TOKEN_URL = "https://auth.broker.test/oauth/connect/token"
SESSION_URL = "https://api.broker.test/identification/session"
BROKER_PAGE = "https://id.broker.test/NoBankIDWeb/Start?sessionid=Qm9nZXQ"
#: Where hostile redirects point; the client must never request it.
EVIL = "https://evil.example/steal"
SECRET = "test-secret-s3cr3t-value"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJjbGllbnRfaWQiOiJob3N0aWxlIn0.aG9zdGlsZS1zaWduYXR1cmUtN1F4"
SSN = "31127112345"
UNIQUE_ID = "9578-6000-4-12345"
SIGNAL_NAMES = ("started", "succeeded", "aborted", "failed")
Status = Identification.Status

#: A reply of the fake broker: returns (status, headers, body) or raises a transport error.
Reply = Callable[[], tuple[int, dict[str, str], bytes]]
_ids = itertools.count(1)


def reply(
    status: int = 200,
    body: Any = None,
    *,
    raw: bytes | str | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """An HTTP answer: ``body`` is sent as JSON, ``raw`` as is."""
    data = raw if raw is not None else (b"" if body is None else json.dumps(body))
    payload = data.encode() if isinstance(data, str) else data
    hdrs = {"Content-Type": "application/json" if raw is None else "text/html", **(headers or {})}
    return lambda: (status, dict(hdrs), payload)


def raises(factory: Callable[[], BaseException]) -> Reply:
    """A transport failure: the client sees ``factory()`` raised by ``requests``."""

    def play() -> tuple[int, dict[str, str], bytes]:
        raise factory()

    return play


def record(request_id: str, status: str = "SUCCESS", **overrides: Any) -> dict[str, Any]:
    """A retrieved record as on the wire; an override of ``...`` removes the property."""
    body: dict[str, Any] = {
        "RequestId": request_id,
        "Status": status,
        "IdentityProvider": "NO_BANKID_WEB",
        "IdentityProviderUniqueId": UNIQUE_ID,
        "Name": "Nordmann, Kari Marie",
        "FirstName": "Kari",
        "MiddleName": "Marie",
        "LastName": "Nordmann",
        "DateOfBirth": "311271",
        "SocialSecurityNumber": SSN,
        "EnvironmentInfo": {"UserAgent": "Mozilla/5.0 (X11)", "IPAddress": "203.0.113.7"},
        "Error": None,
        "MetaData": {},
    }
    for key, value in overrides.items():
        if value is ...:
            body.pop(key, None)
        else:
            body[key] = value
    return body


def new_request_id() -> str:
    """A request id in the shape of the public sample (200 characters, unique)."""
    tail = f"{next(_ids):012d}"
    return ("3391840571230098455xkQJrTgWL4Aq7RsIemzU8umZSsYNWcEFH1PbCVkdfHZjb6tfny" * 3)[
        :188
    ] + tail


class FakeBroker:
    """The broker: token, create and retrieve answer the contract unless told to fail."""

    KINDS = ("token", "create", "retrieve")

    def __init__(self, rsps: responses.RequestsMock) -> None:
        self.rsps = rsps
        self.queued: dict[str, list[Reply]] = {k: [] for k in self.KINDS}
        self.always: dict[str, Reply | None] = dict.fromkeys(self.KINDS)
        #: request id -> the record (a dict) or reply that retrieving it answers.
        self.records: dict[str, Any] = {}
        self.created: list[dict[str, Any]] = []
        self.counts: Counter[str] = Counter()
        self.evil_calls: list[Any] = []
        rsps.add_callback(responses.POST, TOKEN_URL, callback=self._on("token"))
        rsps.add_callback(responses.POST, SESSION_URL, callback=self._on("create"))
        rsps.add_callback(responses.GET, SESSION_URL, callback=self._on("retrieve"))
        for method in (responses.GET, responses.POST):
            rsps.add_callback(method, re.compile(r"https://evil\.example/.*"), callback=self._evil)

    # -- scripting --------------------------------------------------------
    def fail(self, kind: str, answer: Reply, *, once: bool = False) -> None:
        """Answer ``kind`` calls with ``answer``: the next one (``once``) or all of them."""
        if once:
            self.queued[kind].append(answer)
        else:
            self.always[kind] = answer

    def heal(self) -> None:
        self.queued = {k: [] for k in self.KINDS}
        self.always = dict.fromkeys(self.KINDS)

    # -- answering --------------------------------------------------------
    def _on(self, kind: str) -> Callable[[Any], tuple[int, dict[str, str], bytes]]:
        def answer(request: Any) -> tuple[int, dict[str, str], bytes]:
            self.counts[kind] += 1
            fault = self.queued[kind].pop(0) if self.queued[kind] else self.always[kind]
            if fault is not None:
                return fault()
            return getattr(self, f"_{kind}")(request)

        return answer

    def _token(self, request: Any) -> tuple[int, dict[str, str], bytes]:
        return reply(body={"access_token": TOKEN, "expires_in": 3600, "token_type": "Bearer"})()

    def _create(self, request: Any) -> tuple[int, dict[str, str], bytes]:
        self.created.append(json.loads(request.body))
        request_id = new_request_id()
        return reply(body={"Url": f"{BROKER_PAGE}&n={request_id[-4:]}", "RequestId": request_id})()

    def _retrieve(self, request: Any) -> tuple[int, dict[str, str], bytes]:
        request_id = parse_qs(urlsplit(request.url).query)["requestId"][0]
        answer = self.records[request_id] if request_id in self.records else record(request_id)
        return answer() if callable(answer) else reply(body=answer)()

    def _evil(self, request: Any) -> tuple[int, dict[str, str], bytes]:
        self.evil_calls.append(request)
        return reply(body={"stolen": True})()

    # -- inspection --------------------------------------------------------
    def calls(self, kind: str) -> list[Any]:
        url = {"token": TOKEN_URL, "create": SESSION_URL, "retrieve": SESSION_URL}[kind]
        method = "GET" if kind == "retrieve" else "POST"
        return [
            c
            for c in self.rsps.calls
            if c.request.method == method and c.request.url.split("?")[0] == url
        ]


def substitute(template: str, **values: str) -> str:
    """Replace ``[0]``/``[1]``/``[2]`` (keys ``p0``/``p1``/``p2``) as the broker does."""
    for key, value in values.items():
        template = template.replace(f"[{key[1:]}]", quote(value, safe=""))
    parts = urlsplit(template)
    assert (parts.scheme, parts.netloc) == ("http", "testserver"), template
    return f"{parts.path}?{parts.query}"


@dataclass
class Started:
    """A session started through the start view; its return URLs as the broker has them."""

    response: HttpResponse
    sent: dict[str, Any]
    pk: int
    reference: str
    request_id: str
    external_id: str

    @property
    def row(self) -> Identification:
        return Identification.objects.get(pk=self.pk)

    def template(self, kind: str) -> str:
        urls: dict[str, str] = self.sent["ReturnUrls"]
        return urls[kind]

    def success_url(self, **values: str) -> str:
        return substitute(
            self.template("Success"), **{"p1": self.request_id, "p2": self.external_id, **values}
        )

    def abort_url(self, **values: str) -> str:
        return substitute(
            self.template("Abort"), **{"p1": self.request_id, "p2": self.external_id, **values}
        )

    def error_url(self, status: str = "TIMEOUT") -> str:
        return substitute(self.template("Error"), p0=status)

    def url(self, kind: str) -> str:
        """The genuine callback URL of ``kind`` (success, abort or error)."""
        return {"success": self.success_url, "abort": self.abort_url, "error": self.error_url}[
            kind
        ]()

    def path(self, kind: str) -> str:
        return f"/eid/return/{self.reference}/{kind}/"


# -- state ---------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _clean_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Empty caches (the shared token), a fresh shared client, no sleep between retries."""
    monkeypatch.setattr(django_eid.transport, "BACKOFF", 0.0)
    reset_eid_state()
    yield
    reset_eid_state()


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        yield FakeBroker(rsps)


def make_user(django_user_model: Any, name: str) -> AbstractBaseUser:
    user: AbstractBaseUser = django_user_model.objects.create_user(
        name, f"{name}@example.com", f"pw-{name}"
    )
    return user


def logged_in(user: AbstractBaseUser, **kwargs: Any) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


@pytest.fixture
def alice(django_user_model: Any) -> AbstractBaseUser:
    return make_user(django_user_model, "alice")


@pytest.fixture
def bob(django_user_model: Any) -> AbstractBaseUser:
    return make_user(django_user_model, "bob")


@pytest.fixture
def alice_client(alice: AbstractBaseUser) -> Client:
    return logged_in(alice)


@pytest.fixture
def bob_client(bob: AbstractBaseUser) -> Client:
    return logged_in(bob)


@pytest.fixture
def start(broker: FakeBroker, alice_client: Client) -> Callable[..., Started]:
    """``start(client=alice_client, **post)``: POST to the start view, expect the broker."""

    def run(client: Client = alice_client, **post: str) -> Started:
        before = len(broker.created)
        response = client.post("/eid/start/", post)
        assert len(broker.created) == before + 1, response.status_code
        assert response.status_code == (200 if post.get("display") == "iframe" else 302)
        sent = broker.created[-1]
        reference = urlsplit(sent["ReturnUrls"]["Success"]).path.split("/")[3]
        row = Identification.objects.get(reference=reference)
        assert row.status == Status.PENDING
        assert row.request_id
        return Started(response, sent, row.pk, reference, row.request_id, row.external_id)

    return run


# -- observation -----------------------------------------------------------------
def snapshot() -> dict[int, dict[str, Any]]:
    """Every row with every field, to compare before and after a request."""
    return {values["id"]: values for values in Identification.objects.order_by("pk").values()}


def changed(before: dict[int, dict[str, Any]], after: dict[int, dict[str, Any]]) -> set[int]:
    """Rows created, deleted or modified between two snapshots."""
    return {pk for pk in before.keys() | after.keys() if before.get(pk) != after.get(pk)}


@dataclass
class Fired:
    """The django-eid signals sent: ``(name, identification pk, status, user pk)``."""

    calls: list[tuple[str, int, str, int]] = field(default_factory=list)
    in_atomic: list[bool] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [name for name, *_ in self.calls]

    def clear(self) -> None:
        self.calls.clear()
        self.in_atomic.clear()


@pytest.fixture
def fired() -> Iterator[Fired]:
    log = Fired()
    for name in SIGNAL_NAMES:

        def receiver(name: str = name, **kwargs: Any) -> None:
            row = kwargs["identification"]
            log.calls.append((name, row.pk, row.status, kwargs["user"].pk))
            log.in_atomic.append(connection.in_atomic_block)

        getattr(signals, f"identification_{name}").connect(
            receiver, weak=False, dispatch_uid=f"hostile-{name}"
        )
    yield log
    for name in SIGNAL_NAMES:
        getattr(signals, f"identification_{name}").disconnect(dispatch_uid=f"hostile-{name}")


def connection_reset() -> requests.ConnectionError:
    return requests.ConnectionError(ConnectionResetError(104, "Connection reset by peer"))


# -- shared assertions and faults ------------------------------------------------------
#: What the genuine callback of each kind does once nothing hostile got in the way.
CALLBACK_OUTCOME = {
    "success": (302, "/", Status.SUCCESS, "succeeded"),
    "abort": (302, "/eid/start/", Status.ABORTED, "aborted"),
    "error": (200, None, Status.ERROR, "failed"),
}


def assert_untouched(
    response: Any, status: int, before: dict[int, Any], fired: Fired, broker: FakeBroker
) -> None:
    assert response.status_code == status
    assert snapshot() == before
    assert fired.names == []
    assert broker.counts["retrieve"] == 0


def assert_genuine_completes(
    client: Client, started: Started, kind: str, fired: Fired, alice: AbstractBaseUser
) -> None:
    """The real callback still works: nothing was consumed by the refused one."""
    code, location, status, signal = CALLBACK_OUTCOME[kind]
    before = snapshot()
    response = client.get(started.url(kind))
    assert response.status_code == code
    if location:
        assert response["Location"] == location
    assert changed(before, snapshot()) == {started.pk}
    assert started.row.status == status
    assert fired.calls == [(signal, started.pk, status, alice.pk)]


class FailingStatement:
    """An ``execute_wrapper`` that makes the first matching statement fail, as a database does."""

    def __init__(self, prefix: str, table: str = "django_eid_identification") -> None:
        self.prefix, self.table, self.failed = prefix, table, 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if not self.failed and sql.lstrip().upper().startswith(self.prefix) and self.table in sql:
            self.failed += 1
            raise OperationalError("could not serialize access due to concurrent update")
        return execute(sql, params, many, context)
