"""Fixtures of the production tier: a real broker stub, real threads, real processes.

Tests marked ``production`` need PostgreSQL and Redis (``DATABASE_URL`` and
``EID_TEST_REDIS_URL``, see ``.ci/services.sh``); ``tests/conftest.py`` skips
them when those are not configured (and fails the run when CI requires them).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.production.helpers import fresh_clients
from tests.production.stub import BrokerStub


@pytest.fixture
def stub() -> Iterator[BrokerStub]:
    with BrokerStub() as running:
        yield running


@pytest.fixture
def eid_on_stub(settings: Any, stub: BrokerStub) -> Iterator[BrokerStub]:
    """DJANGO_EID pointed at the stub (its port is part of the token's cache key)."""
    settings.DJANGO_EID = stub.settings()
    fresh_clients()
    yield stub
    fresh_clients()
