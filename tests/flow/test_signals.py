"""The signals: their arguments, that they follow the commit, rejections and crashing receivers
(logged, undoing nothing)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.http import HttpRequest
from django.test import Client

from django_eid import signals as eid_signals
from django_eid.exceptions import IdentificationRejected
from django_eid.models import Identification
from tests.db_threads import close_thread_connections
from tests.fixtures_broker import ScriptedBroker
from tests.fixtures_views import SIGNAL_NAMES, Signals, Started
from tests.flow.returns import CALLBACK_OUTCOME

pytestmark = pytest.mark.django_db

Status = Identification.Status


@pytest.fixture
def connect() -> Iterator[Callable[[str, Callable[..., Any]], None]]:
    """``connect(signal_name, receiver)`` for the duration of the test."""
    connected: list[tuple[str, str]] = []

    def run(name: str, receiver: Callable[..., Any]) -> None:
        uid = f"test-{name}-{len(connected)}"
        getattr(eid_signals, name).connect(receiver, weak=False, dispatch_uid=uid)
        connected.append((name, uid))

    yield run
    for name, uid in connected:
        getattr(eid_signals, name).disconnect(dispatch_uid=uid)


def finish(
    callback: str,
    started: Started,
    broker: ScriptedBroker,
    client: Client,
    record_status: str = "SUCCESS",
) -> Any:
    if callback == "success":
        broker.will_return(started.request_id, record_status)
        return client.get(started.success_url())
    if callback == "abort":
        return client.get(started.abort_url())
    broker.will_return(started.request_id, "ERROR")
    return client.get(started.error_url())


@pytest.mark.parametrize(
    ("callback", "record_status", "signal", "status"),
    [
        ("success", "SUCCESS", "identification_succeeded", Status.SUCCESS),
        ("success", "TIMEOUT", "identification_failed", Status.ERROR),
        ("abort", "", "identification_aborted", Status.ABORTED),
        ("error", "", "identification_failed", Status.ERROR),
    ],
)
def test_each_signal_is_sent_once_with_its_arguments(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    alice: Any,
    signals: Signals,
    callback: str,
    record_status: str,
    signal: str,
    status: str,
) -> None:
    started = start()
    finish(callback, started, broker, alice_client, record_status or "SUCCESS")
    assert signals.names == ["identification_started", signal]
    kwargs = signals.of(signal)[0]
    assert set(kwargs) == {
        "signal",
        "sender",
        "identification",
        "user",
        "request",
        "status",
        "purpose",
    }
    assert kwargs["purpose"] == "verify"
    assert kwargs["signal"] is getattr(eid_signals, signal)
    assert kwargs["sender"] is Identification
    assert isinstance(kwargs["identification"], Identification)
    assert kwargs["identification"].pk == started.row.pk
    assert kwargs["user"] == alice
    assert isinstance(kwargs["request"], HttpRequest)
    assert kwargs["request"].path == started.path(callback)
    assert kwargs["status"] == status


def test_every_signal_is_documented() -> None:
    doc = eid_signals.__doc__ or ""
    source = Path(eid_signals.__file__).read_text(encoding="utf-8")
    assert "sender=Identification" in doc
    for name in SIGNAL_NAMES:
        assert f"\n{name} = Signal()" in source


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("callback", "signal", "status"),
    [
        ("success", "identification_succeeded", Status.SUCCESS),
        ("abort", "identification_aborted", Status.ABORTED),
        ("error", "identification_failed", Status.ERROR),
    ],
)
def test_signals_are_sent_after_the_commit(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    connect: Callable[[str, Callable[..., Any]], None],
    callback: str,
    signal: str,
    status: str,
) -> None:
    seen: list[tuple[bool, str | None]] = []

    def committed_status(pk: int) -> str | None:
        """The row as another connection sees it: only committed data."""
        out: list[str | None] = []

        def read() -> None:
            try:
                row = Identification.objects.filter(pk=pk).first()
                out.append(row.status if row else None)
            finally:
                close_thread_connections()

        thread = threading.Thread(target=read)
        thread.start()
        thread.join(10)
        return out[0] if out else None

    def receiver(identification: Identification, **kwargs: Any) -> None:
        seen.append((connection.in_atomic_block, committed_status(identification.pk)))

    connect("identification_started", receiver)
    connect(signal, receiver)
    started = start()
    finish(callback, started, broker, alice_client)
    assert seen == [(False, Status.PENDING), (False, status)]


# -- a receiver that rejects ------------------------------------------------------------------


@pytest.mark.parametrize("display", ["redirect", "iframe"])
def test_a_receiver_may_reject_the_identity(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    signals: Signals,
    connect: Callable[[str, Callable[..., Any]], None],
    display: str,
    eid: Callable[..., None],
) -> None:
    eid(GET_SOCIAL_SECURITY_NUMBER=True)

    def must_be_adult(identification: Identification, **kwargs: Any) -> None:
        assert identification.age is not None
        if identification.age < 100:
            raise IdentificationRejected("You must be 100 or older to use this service.")

    connect("identification_succeeded", must_be_adult)
    started = start(display=display, next="/account/")
    broker.will_return(started.request_id)
    response = alice_client.get(started.success_url())
    row = started.refresh()
    assert row.status == Status.REJECTED
    assert row.error_code == "REJECTED"
    assert row.error_message == "You must be 100 or older to use this service."
    assert row.social_security_number is not None  # what was received stays stored
    assert signals.names == [
        "identification_started",
        "identification_succeeded",
        "identification_failed",
    ]
    assert signals.calls[1:] == [
        ("identification_succeeded", row.pk, Status.SUCCESS, row.user_id),
        ("identification_failed", row.pk, Status.REJECTED, row.user_id),
    ]
    assert response.status_code == 200
    if display == "iframe":
        response = alice_client.get(f"/eid/result/{row.reference}/")
    content = response.content.decode()
    assert "You must be 100 or older to use this service." in content
    assert "Identification not accepted" in content
    assert "/account/" not in content
    # A reload shows the same, sends nothing.
    assert alice_client.get(started.success_url()).status_code == 200
    assert len(signals.names) == 3
    assert Identification.objects.verified_for(row.user) is None


def test_a_rejection_without_a_reason(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    connect: Callable[[str, Callable[..., Any]], None],
) -> None:
    def reject(**kwargs: Any) -> None:
        raise IdentificationRejected()

    connect("identification_succeeded", reject)
    started = start()
    broker.will_return(started.request_id)
    response = alice_client.get(started.success_url())
    assert "Your identification was not accepted." in response.content.decode()
    assert started.refresh().status == Status.REJECTED


@pytest.mark.parametrize("kind", ["abort", "error"])
def test_a_rejection_from_another_signal_changes_nothing(
    start: Callable[..., Started],
    alice_client: Client,
    signals: Signals,
    connect: Callable[[str, Callable[..., Any]], None],
    kind: str,
) -> None:
    """Only a success can be refused: a rejection from a receiver of another signal changes
    neither the row nor the page."""

    def reject(**kwargs: Any) -> None:
        raise IdentificationRejected("no")

    code, _, status, signal = CALLBACK_OUTCOME[kind]
    connect(signal, reject)
    started = start(ends=kind)
    response = alice_client.get(started.url(kind))
    assert (response.status_code, started.row.status) == (code, status)
    assert signals.names == ["identification_started", signal]


# -- a receiver that crashes -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("crashing", "callback", "signal", "status", "page_status"),
    [
        # A start goes to the broker all the same (start() checks the redirect).
        ("identification_started", "success", "identification_succeeded", Status.SUCCESS, 302),
        ("identification_succeeded", "success", "identification_succeeded", Status.SUCCESS, 302),
        ("identification_aborted", "abort", "identification_aborted", Status.ABORTED, 302),
        ("identification_failed", "error", "identification_failed", Status.ERROR, 200),
    ],
    ids=["started", "succeeded", "aborted", "failed"],
)
def test_a_crashing_receiver_is_logged_and_loses_nothing(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    signals: Signals,
    connect: Callable[[str, Callable[..., Any]], None],
    caplog: pytest.LogCaptureFixture,
    crashing: str,
    callback: str,
    signal: str,
    status: str,
    page_status: int,
) -> None:
    def crash(**kwargs: Any) -> None:
        raise RuntimeError("receiver bug")

    connect(crashing, crash)
    caplog.set_level(logging.ERROR, logger="django_eid")
    started = start(next="/account/")
    response = finish(callback, started, broker, alice_client)
    assert response.status_code == page_status
    if callback == "success":
        assert response["Location"] == "/account/"
    assert started.refresh().status == status
    assert signals.names == ["identification_started", signal]  # the other receiver ran
    errors = [r for r in caplog.records if r.name == "django_eid" and r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "RuntimeError" in errors[0].getMessage()
    assert str(started.row.pk) in errors[0].getMessage()


def test_a_rejection_is_not_logged_as_a_receiver_error(
    start: Callable[..., Started],
    broker: ScriptedBroker,
    alice_client: Client,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def reject(**kwargs: Any) -> None:
        raise IdentificationRejected("Under 18: born 2015")

    eid_signals.identification_succeeded.connect(reject)
    try:
        started = start()
        broker.will_return(started.request_id)
        with caplog.at_level(logging.DEBUG):
            alice_client.get(started.success_url())
    finally:
        eid_signals.identification_succeeded.disconnect(reject)
    assert started.refresh().status == Status.REJECTED
    assert "born 2015" not in caplog.text
    assert not [r for r in caplog.records if r.name == "django.dispatch"]
