"""Helpers of the production tier: drive the real views from many threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.dispatch import Signal
from django.test import Client
from django.urls import reverse

import django_eid.client
from django_eid.models import Identification
from tests.db_threads import close_thread_connections
from tests.production.stub import BrokerStub


def fresh_clients() -> None:
    """Forget the cached broker client, so the next one reads the current settings."""
    django_eid.client.reset_client()


def client_with_session(session_key: str) -> Client:
    """A test client of its own that presents ``session_key`` (the same browser)."""
    client = Client()
    client.cookies[settings.SESSION_COOKIE_NAME] = session_key
    return client


def start(client: Client, next_url: str = "/done/") -> Identification:
    """POST the start form; returns the new pending row."""
    response = client.post(reverse("django_eid:start"), {"display": "redirect", "next": next_url})
    assert response.status_code == 302, (response.status_code, response.content[:500])
    reference = response.url.rsplit("/", 1)[-1]
    assert reference, response.url
    return Identification.objects.get(request_id=reference)


def success_url(row: Identification, stub: BrokerStub) -> str:
    """The Success return URL as the broker fills it in (``[1]``, ``[2]``)."""
    assert row.request_id is not None
    query = urlencode({"requestId": row.request_id, "externalId": row.external_id})
    assert stub.external_reference(row.request_id) == row.external_id
    return reverse("django_eid:success", args=[row.reference]) + "?" + query


def run_threads(target: Callable[[int], Any], count: int, *, timeout: float = 60) -> list[Any]:
    """Run ``target(i)`` in ``count`` threads; re-raise the first failure.

    Each thread closes its own database connections when done, so the test
    database can be flushed and dropped afterwards.
    """
    results: list[Any] = [None] * count
    failures: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = target(i)
        except BaseException as err:
            failures.append(err)
        finally:
            close_thread_connections()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(count)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(timeout=max(0.1, deadline - time.monotonic()))
    alive = sum(t.is_alive() for t in threads)
    if failures:
        raise failures[0]
    assert alive == 0, f"{alive} thread(s) still running after {timeout} s"
    return results


@contextmanager
def receiving(signal: Signal) -> Iterator[list[dict[str, Any]]]:
    """Collect every sending of ``signal`` (from any thread)."""
    received: list[dict[str, Any]] = []
    lock = threading.Lock()

    def receiver(sender: Any, **kwargs: Any) -> None:
        with lock:
            received.append(kwargs)

    signal.connect(receiver, weak=False, dispatch_uid=f"production-{id(received)}")
    try:
        yield received
    finally:
        signal.disconnect(dispatch_uid=f"production-{id(received)}")
