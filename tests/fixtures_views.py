"""Fixtures shared by the view-level suites (flow, hostile): state, the broker, users, signals.

A suite's conftest imports what it uses (``from tests.fixtures_views import *``
style, by name). The broker is :class:`tests.fixtures_broker.ScriptedBroker`,
the sandbox behind ``responses``. The callbacks are driven with the return URLs
the app actually sent in the create request, placeholders filled as the broker
does it (:func:`substitute`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.test import Client

import django_eid.transport
from django_eid import signals
from django_eid.models import Identification
from django_eid.sandbox.broker import SessionError
from django_eid.sandbox.wire import fill_placeholders
from tests.fixtures_broker import BROKER_PAGE, ScriptedBroker

SIGNAL_NAMES = (
    "identification_started",
    "identification_succeeded",
    "identification_aborted",
    "identification_failed",
)


def substitute(url: str, **values: str) -> str:
    """Fill placeholders as the broker does; returns path and query for the test client.

    ``values`` maps ``p0``/``p1``/``p2`` to the text for ``[0]``/``[1]``/``[2]``.
    """
    url = fill_placeholders(url, {f"[{key[1:]}]": value for key, value in values.items()})
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc) == ("http", "testserver"), url
    return f"{parts.path}?{parts.query}"


@dataclass
class Started:
    """A session started through the start view; its return URLs as the broker has them."""

    response: Any  # the test client's response
    sent: dict[str, Any]
    pk: int
    reference: str
    request_id: str
    external_id: str
    broker: ScriptedBroker | None = None

    @property
    def row(self) -> Identification:
        return Identification.objects.get(pk=self.pk)

    def refresh(self) -> Identification:
        return self.row

    @property
    def return_urls(self) -> dict[str, str]:
        urls: dict[str, str] = self.sent["ReturnUrls"]
        return urls

    def template(self, kind: str) -> str:
        return self.return_urls[kind]

    def success_url(self, **values: str) -> str:
        """The Success URL; ``p1``/``p2`` default to the genuine request and external id."""
        values = {"p1": self.request_id, "p2": self.external_id, **values}
        return substitute(self.return_urls["Success"], **values)

    def abort_url(self, **values: str) -> str:
        values = {"p1": self.request_id, "p2": self.external_id, **values}
        return substitute(self.return_urls["Abort"], **values)

    def error_url(self, status: str = "TIMEOUT", **values: str) -> str:
        """The Error URL, as the broker sends the person there once the session failed with
        ``status`` (the broker's record says so); ``p1``/``p2`` default to the genuine ids.

        When the broker's session is over already, or ``values`` change an id, the URL is
        filled in without the broker (a replay, or a forged return).
        """
        if self.broker is not None and not values:
            try:
                url = self.broker.fail(status, request_id=self.request_id)
            except (SessionError, ValueError):  # over, or a status the broker never sends
                pass
            else:
                return substitute(url)
        values = {"p0": status, "p1": self.request_id, "p2": self.external_id, **values}
        return substitute(self.return_urls["Error"], **values)

    def url(self, kind: str) -> str:
        """The genuine callback URL of ``kind`` (success, abort or error)."""
        if kind == "success":
            return self.success_url()
        if kind == "abort":
            return self.abort_url()
        assert kind == "error", kind
        return self.error_url()

    def path(self, kind: str) -> str:
        return f"/eid/return/{self.reference}/{kind}/"


# -- state and the broker ----------------------------------------------------------
@pytest.fixture(autouse=True)
def _no_retry_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """No sleep between retries (caches and the client are reset by tests/conftest.py)."""
    monkeypatch.setattr(django_eid.transport, "BACKOFF", 0.0)


@pytest.fixture
def broker() -> Iterator[ScriptedBroker]:
    with ScriptedBroker() as scripted:
        yield scripted


# -- users -------------------------------------------------------------------------
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


def start_session(
    broker: ScriptedBroker, client: Client, request_id: str | None = None, **post: str
) -> Started:
    """POST to the start view; the broker answers ``request_id`` (a fresh one by default).

    Checks the redirect to the broker (or, for iframe display, the redirect to the page
    embedding it, which it then GETs) and that one create request was sent.
    """
    if request_id is not None:
        broker.will_create(request_id)
    before = len(broker.create_requests)
    response = client.post("/eid/start/", post)
    assert len(broker.create_requests) == before + 1, response.status_code
    sent = broker.sent()
    reference = urlsplit(sent["ReturnUrls"]["Success"]).path.split("/")[3]
    if post.get("display") == "iframe":
        # Post/Redirect/Get: the page embedding the broker is a GET (a reload starts nothing).
        assert response.status_code == 303
        assert response["Location"] == f"/eid/frame/{reference}/"
        response = client.get(response["Location"])
        assert response.status_code == 200
    else:
        assert response.status_code == 302
        assert response["Location"] == BROKER_PAGE
    row = Identification.objects.get(reference=reference)
    assert row.status == Identification.Status.PENDING
    assert row.request_id == (request_id or broker.sessions[-1].request_id)
    return Started(response, sent, row.pk, reference, row.request_id, row.external_id, broker)


@pytest.fixture
def start(broker: ScriptedBroker, alice_client: Client) -> Callable[..., Started]:
    """``start(client=alice_client, request_id=None, **post)``: see :func:`start_session`."""

    def run(client: Client = alice_client, request_id: str | None = None, **post: str) -> Started:
        return start_session(broker, client, request_id, **post)

    return run


# -- signals -----------------------------------------------------------------------
@dataclass
class Sent:
    """One django-eid signal: its name, keyword arguments, and the row's status then."""

    name: str
    kwargs: dict[str, Any]
    status: str
    in_atomic: bool


@dataclass
class SignalRecorder:
    """Every django-eid signal sent while connected, oldest first."""

    sent: list[Sent] = field(default_factory=list)

    def connect(self, uid: str) -> None:
        for name in SIGNAL_NAMES:

            def receiver(name: str = name, **kwargs: Any) -> None:
                status = kwargs["identification"].status
                self.sent.append(Sent(name, kwargs, status, connection.in_atomic_block))

            getattr(signals, name).connect(receiver, weak=False, dispatch_uid=f"{uid}-{name}")

    @staticmethod
    def disconnect(uid: str) -> None:
        for name in SIGNAL_NAMES:
            getattr(signals, name).disconnect(dispatch_uid=f"{uid}-{name}")


@pytest.fixture
def signals_sent() -> Iterator[SignalRecorder]:
    recorder = SignalRecorder()
    recorder.connect("test-signals")
    yield recorder
    recorder.disconnect("test-signals")
