"""Fixtures of the production tier: a real broker stub, real threads, real processes.

Tests marked ``production`` need PostgreSQL and Redis (``DATABASE_URL`` and
``EID_TEST_REDIS_URL``, see ``.ci/services.sh``). ``tests/conftest.py`` skips
them when those are not configured; the guard below does the same for this
package on its own, so running ``pytest tests/production`` never fails for want
of services.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings

import django_eid.client
from tests.production.stub import BrokerStub


def production_configured() -> bool:
    engine = settings.DATABASES["default"]["ENGINE"]
    backend = settings.CACHES["default"]["BACKEND"]
    return "postgresql" in engine and backend.endswith("RedisCache")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if production_configured():
        return
    skip = pytest.mark.skip(
        reason="production tier: set DATABASE_URL (PostgreSQL) and EID_TEST_REDIS_URL "
        '(eval "$(.ci/services.sh env)")'
    )
    for item in items:
        if item.get_closest_marker("production") and "tests/production" in str(item.path):
            item.add_marker(skip)


def fresh_clients() -> None:
    """Forget this thread's cached client, so the next one reads the current settings."""
    client = getattr(django_eid.client._local, "client", None)
    if client is not None:
        client.close()
        django_eid.client._local.client = None


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
