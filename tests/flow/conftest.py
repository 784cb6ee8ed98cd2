"""Fixtures of the flow tests: the shared ones (tests.fixtures_views), and a signal log.

Every test runs once per broker API (``BROKER_API`` v1, v2, eid-hub and OpenID Connect with
each preset, ``oidc-idura`` ...: ``broker_api``), but those marked ``@pytest.mark.apis(...)``
(a test of one API's wire, or of what only the REST APIs do: ``REST_APIS``, with a reason).

The broker is the sandbox broker behind ``responses``
(:class:`tests.fixtures_broker.ScriptedBroker`); a test scripts what a
retrieval answers with ``broker.will_return(request_id, status, **fields)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.fixtures_broker import (
    ACCESS_TOKEN,
    BASIC_CREDENTIALS,
    BROKER_PAGE,
    SSN,
    ScriptedBroker,
    new_request_id,
    record,
)
from tests.fixtures_client import SECRET as CLIENT_SECRET
from tests.fixtures_client import SESSION_URL, TOKEN_URL
from tests.fixtures_views import (
    SIGNAL_NAMES,
    SignalRecorder,
    Started,
    substitute,
)

#: The broker double of these tests, under the name the tests annotate it with.
Broker = ScriptedBroker
#: A retrieved record (PascalCase, as on the wire) of the sample person.
make_record = record

__all__ = [
    "ACCESS_TOKEN",
    "BASIC_CREDENTIALS",
    "BROKER_PAGE",
    "CLIENT_SECRET",
    "SESSION_URL",
    "SIGNAL_NAMES",
    "SSN",
    "TOKEN_URL",
    "Broker",
    "SignalLog",
    "Started",
    "make_record",
    "new_request_id",
    "signal_log",
    "substitute",
]


@pytest.fixture(autouse=True)
def _each_api(broker_api: str) -> str:
    """Every test of the suite runs with each broker API."""
    return broker_api


@dataclass
class SignalLog:
    """The signals sent, as ``(name, kwargs)`` with the row's status at the time in kwargs."""

    recorder: SignalRecorder

    @property
    def calls(self) -> list[tuple[str, dict[str, Any]]]:
        return [(s.name, {**s.kwargs, "status": s.status}) for s in self.recorder.sent]

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def of(self, name: str) -> list[dict[str, Any]]:
        return [kwargs for n, kwargs in self.calls if n == name]


@pytest.fixture
def signal_log(signals: SignalRecorder) -> SignalLog:
    """Every django-eid signal sent during the test, with its keyword arguments."""
    return SignalLog(signals)
