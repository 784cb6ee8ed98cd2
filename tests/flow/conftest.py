"""What only the flow's tests use beside the suite's vocabulary (``tests/conftest.py``): the
browser that starts, for the same-device rule; a session the person ended at the broker, for
the tests of its returns (refused, genuine, or in another browser)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from tests.fixtures_broker import ScriptedBroker
from tests.fixtures_views import Signals, Started, snapshot
from tests.flow.returns import Ended, starting_browser


@pytest.fixture
def phone(alice: AbstractBaseUser) -> Client:
    """Alice's phone browser, which starts the identification: the device (its address and
    user agent, :data:`tests.flow.returns.USER_AGENT`) the broker's record is compared with."""
    return starting_browser(alice)


@pytest.fixture
def ended_at_the_broker(
    start: Callable[..., Started],
    alice_client: Client,
    alice: AbstractBaseUser,
    broker: ScriptedBroker,
    signals: Signals,
    eid: Callable[..., None],
) -> Callable[..., Ended]:
    """``ended_at_the_broker(kind, client=alice_client)``: alice starts in ``client`` and ends
    the session at the broker as ``kind`` says; the start's signal is forgotten and the rows
    are snapshotted (:class:`tests.flow.returns.Ended`)."""

    def run(kind: str, client: Client = alice_client) -> Ended:
        started = start(client=client, ends=kind)
        signals.clear()
        return Ended(started, kind, snapshot(), client, alice, signals, broker, eid)

    return run
