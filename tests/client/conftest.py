"""Shared by the client's tests: the broker's URLs mocked with ``wire`` (tests/conftest.py;
``slept`` records the delays between retries), one call of each kind."""

from __future__ import annotations

from typing import Any

from django_eid.client import EidClient, ReturnUrls
from tests.fixtures_client import REQUEST_ID

__all__ = ["CREATED", "URLS", "create", "get"]

#: Return URLs with v1's placeholders, as short as a test of errors wants them.
URLS = ReturnUrls("https://s.test/ok?r=[1]", "https://s.test/abort?r=[1]", "https://s.test/e?s=[0]")
#: A v1 create's answer.
CREATED = {"Url": "https://id.broker.test/start", "RequestId": "r1"}


def get(client: EidClient | None = None) -> Any:
    """Retrieve :data:`tests.fixtures_client.REQUEST_ID`'s record."""
    return (client or EidClient()).get_session(REQUEST_ID)


def create(client: EidClient | None = None) -> Any:
    """Create a session with :data:`URLS`."""
    return (client or EidClient()).create_session(return_urls=URLS, external_reference="ref")
