"""Fixtures of the hostile-input suite: the sandbox broker with faults, row snapshots, signals.

The broker is the sandbox broker behind ``responses``
(:class:`tests.fixtures_broker.ScriptedBroker`); every answer can be replaced by
a fault (``broker.fault(kind, reply(...) or raises(...))``, once or for every
call; ``broker.heal()``), and a retrieval of one session by a hostile record
(``broker.answer_record``). Every session started here is completed at the
broker by the sample person right away, so retrieving it answers their record
unless a test scripts another. The callbacks are driven with the return URLs
the app actually sent.

Every test checks the exact outcome: the status code, which rows changed
(``snapshot()`` before and after), and which signals fired (``fired``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests
import responses
from django.contrib.auth.models import AbstractBaseUser
from django.db import OperationalError
from django.test import Client

from django_eid.models import Identification
from tests.fixtures_broker import (
    ACCESS_TOKEN,
    BROKER_PAGE,
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
    _no_retry_wait,
    alice,
    alice_client,
    bob,
    bob_client,
    logged_in,
    make_user,
    signals_sent,
    start_session,
    substitute,
)

#: Where hostile redirects point; the client must never request it.
EVIL = "https://evil.example/steal"
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
    "_no_retry_wait",
    "alice",
    "alice_client",
    "bob",
    "bob_client",
    "broker",
    "fired",
    "logged_in",
    "make_user",
    "new_request_id",
    "raises",
    "record",
    "reply",
    "signals_sent",
    "start",
    "substitute",
]


class FakeBroker(ScriptedBroker):
    """The scripted sandbox broker, and a site at :data:`EVIL` that records who comes."""

    def __init__(self) -> None:
        super().__init__()
        self.evil_calls: list[Any] = []
        for method in (responses.GET, responses.POST):
            self.mock.add_callback(method, re.compile(r"https://evil\.example/.*"), self._evil)

    def _evil(self, request: Any) -> tuple[int, dict[str, str], bytes]:
        self.evil_calls.append(request)  # a redirect was followed: the tests say it never is
        return 200, {"Content-Type": "application/json"}, b'{"stolen": true}'


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    with FakeBroker() as fake:
        yield fake


@pytest.fixture
def start(broker: FakeBroker, alice_client: Client) -> Callable[..., Started]:
    """``start(client=alice_client, **post)``: start, then the sample person identifies."""

    def run(client: Client = alice_client, **post: str) -> Started:
        started = start_session(broker, client, **post)
        broker.complete(request_id=started.request_id)
        return started

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
def fired(signals_sent: SignalRecorder) -> Fired:
    return Fired(signals_sent)


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
