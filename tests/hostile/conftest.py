"""Fixtures of the hostile-input suite: the sandbox broker with faults, row snapshots, signals.

The broker is the sandbox broker behind ``responses``
(:class:`tests.fixtures_broker.ScriptedBroker`); every answer can be replaced by
a fault (``broker.fault(kind, reply(...) or raises(...))``, once or for every
call; ``broker.heal()``), and a retrieval of one session by a hostile record
(``broker.answer_record``). Every session started here ends at the broker right
away: by default the sample person identifies (on the sample person's own device,
not the test client's), so retrieving it answers their record unless a test
scripts another; ``start(ends="abort" | "error" | "pending")`` cancels it, fails
it (``TIMEOUT``) or leaves the person at the broker. The callbacks are driven with
the return URLs the app actually sent.

Every test checks the exact outcome: the status code, which rows changed
(``snapshot()`` before and after), and which signals fired (``fired``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from django.contrib.auth.models import AbstractBaseUser
from django.db import OperationalError
from django.test import Client

from django_eid.models import Identification
from tests.fixtures_broker import (
    ACCESS_TOKEN,
    BROKER_PAGE,
    EVIL,
    SAMPLE,
    SSN,
    UNIQUE_ID,
    Scripted,
    ScriptedBroker,
    new_request_id,
    raises,
    record,
    reply,
)
from tests.fixtures_client import SECRET
from tests.fixtures_views import (
    SignalRecorder,
    Started,
    changed,
    logged_in,
    make_user,
    snapshot,
    start_session,
    substitute,
)

TOKEN = ACCESS_TOKEN
Status = Identification.Status
Reply = Scripted

__all__ = [
    "BROKER_PAGE",
    "EVIL",
    "SECRET",
    "SSN",
    "TOKEN",
    "UNIQUE_ID",
    "FakeBroker",
    "Fired",
    "Reply",
    "Started",
    "Status",
    "fired",
    "logged_in",
    "make_user",
    "new_request_id",
    "raises",
    "record",
    "reply",
    "substitute",
]


#: The scripted sandbox broker, which records who comes to :data:`EVIL`.
FakeBroker = ScriptedBroker


@pytest.fixture
def start(broker: FakeBroker, alice_client: Client) -> Callable[..., Started]:
    """``start(client=alice_client, *, ends="success", **post)``: start, then the person at
    the broker ends the session (see :data:`AT_BROKER`; by default the sample person
    identifies)."""

    def run(client: Client = alice_client, *, ends: str = "success", **post: str) -> Started:
        return start_session(broker, client, ends=ends, **post)

    return run


# -- observation -----------------------------------------------------------------
@dataclass
class Fired:
    """The django-eid signals sent: ``(name, identification pk, status, user pk)``."""

    recorder: SignalRecorder

    @property
    def calls(self) -> list[tuple[str, int, str, int]]:
        return [
            (s.name.removeprefix("identification_"), s.kwargs["identification"].pk, s.status,
             s.kwargs["user"].pk)
            for s in self.recorder.sent
        ]  # fmt: skip

    @property
    def in_atomic(self) -> list[bool]:
        return [s.in_atomic for s in self.recorder.sent]

    @property
    def names(self) -> list[str]:
        return [name for name, *_ in self.calls]

    def clear(self) -> None:
        self.recorder.sent.clear()


@pytest.fixture
def fired(signals: SignalRecorder) -> Fired:
    return Fired(signals)


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
    response: Any, status: int, before: dict[int, Any], fired: Fired, broker: ScriptedBroker
) -> None:
    assert response.status_code == status
    assert snapshot() == before
    assert fired.names == []
    assert (broker.counts["status"], broker.counts["retrieve"]) == (0, 0)  # nothing asked


def assert_genuine_completes(
    client: Client, started: Started, kind: str, fired: Fired, alice: AbstractBaseUser
) -> None:
    """The real callback still works: nothing was consumed by the refused one.

    The broker's record must say what ``kind`` means (``start(ends=kind)``): an Error
    return ends the row only when the record confirms the failure.
    """
    code, location, status, signal = CALLBACK_OUTCOME[kind]
    before = snapshot()
    response = client.get(started.url(kind))
    assert response.status_code == code
    if location:
        assert response["Location"] == location
    assert changed(before, snapshot()) == {started.pk}
    assert started.row.status == status
    if kind == "error":
        assert started.row.error_status == "TIMEOUT"  # the URL's [0]
    assert fired.calls == [(signal, started.pk, status, alice.pk)]


# -- the app switch: a genuine return in a browser without the one-time state --------------
#: What the "go back" page says whatever happened (django_eid/elsewhere.html, its heading).
GO_BACK = "Go back to where you started"
#: A browser's User-Agent, for tests of the same-device rule; the test client sends none
#: unless given, and REMOTE_ADDR 127.0.0.1.
USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) HostileSuite/1.0"
TEST_CLIENT_IP = "127.0.0.1"
#: Where a return reaches a browser that does not hold the one-time state.
ELSEWHERE = (
    "the owner in another browser",
    "no session, after the interstitial",
    "no session, without the interstitial",
)


def come_back_elsewhere(
    how: str, url: str, user: AbstractBaseUser, broker: ScriptedBroker, eid: Callable[..., None]
) -> Any:
    """GET ``url`` as ``how`` (one of :data:`ELSEWHERE`) says; the final response.

    The interstitial (a browser without the session cookie gets our own page, which
    requests the URL once more) asks the broker nothing and changes nothing.
    """
    if how == "the owner in another browser":
        return logged_in(user).get(url)
    if how == "no session, without the interstitial":
        eid(CALLBACK_INTERSTITIAL=False)
        return Client().get(url)
    assert how == "no session, after the interstitial", how
    before, calls = snapshot(), dict(broker.counts)
    browser = Client()
    first = browser.get(url)
    assert first.status_code == 200
    assert "eid_retry=1" in first.context["retry_url"]
    assert (snapshot(), dict(broker.counts)) == (before, calls)
    return browser.get(first.context["retry_url"])


def assert_go_back_page(response: Any) -> None:
    """The app switch's page: 200, "go back", and nothing of the identity."""
    assert response.status_code == 200
    assert response.templates[0].name == "django_eid/elsewhere.html"
    page = response.content.decode()
    assert GO_BACK in page
    for value in (SSN, UNIQUE_ID, SAMPLE.first_name, SAMPLE.last_name, SAMPLE.date_of_birth):
        assert str(value) not in page


class FailingStatement:
    """An ``execute_wrapper`` that makes the first matching statement fail, as a database does."""

    def __init__(self, prefix: str, table: str = "django_eid_identification") -> None:
        self.prefix, self.table, self.failed = prefix, table, 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if not self.failed and sql.lstrip().upper().startswith(self.prefix) and self.table in sql:
            self.failed += 1
            raise OperationalError("could not serialize access due to concurrent update")
        return execute(sql, params, many, context)
