"""Site rules are decided before success is visible: checked with a concurrent reader on
PostgreSQL.

A reader polls the row's status from its own connection while the callback runs. A slow
statement after the ``UPDATE ... SET status = 'SUCCESS'`` (an execute wrapper that sleeps)
widens the window in which an uncommitted, or briefly committed, ``SUCCESS`` could be seen.
A minor refused by ``MIN_AGE`` or by an ``identification_verifying`` receiver is never seen
as ``SUCCESS``; the compatibility path (a rejection from ``identification_succeeded``) is,
which shows the reader would catch it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from django_eid import signals
from django_eid.exceptions import IdentificationRejected
from django_eid.models import Identification
from django_eid.sandbox.persons import builtin_persons
from tests.db_threads import close_thread_connections
from tests.production.helpers import (
    client_with_session,
    fresh_clients,
    receiving,
    run_threads,
    start,
    success_url,
)
from tests.production.stub import BrokerStub

pytestmark = [pytest.mark.production, pytest.mark.django_db(transaction=True)]

Status = Identification.Status
#: How long the statement after the SUCCESS update is held up.
HOLD = 0.4


@pytest.fixture
def minor_at_the_broker(settings: Any) -> Iterator[BrokerStub]:
    with BrokerStub(person=builtin_persons().MINOR) as stub:
        settings.DJANGO_EID = stub.settings(GET_SOCIAL_SECURITY_NUMBER=True)
        fresh_clients()
        yield stub
        fresh_clients()


@contextmanager
def slow_after_success() -> Iterator[None]:
    """Sleep after the statement that sets SUCCESS, inside whatever transaction holds it."""

    def wrapper(
        execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        result = execute(sql, params, many, context)
        if sql.startswith("UPDATE") and "SUCCESS" in str(params):
            time.sleep(HOLD)
        return result

    with connection.execute_wrapper(wrapper):
        yield


@contextmanager
def reader(pk: int) -> Iterator[list[str]]:
    """Every status another connection reads for row ``pk`` while the block runs."""
    seen: list[str] = []
    done = threading.Event()

    def poll() -> None:
        try:
            while not done.is_set():
                status = Identification.objects.filter(pk=pk).values_list("status", flat=True)
                seen.append(status.get())
                time.sleep(0.005)
        finally:
            close_thread_connections()

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        time.sleep(0.05)  # a last look after the request committed
        done.set()
        thread.join(timeout=10)


def callback(browser: Client, stub: BrokerStub) -> tuple[Identification, list[str]]:
    row = start(browser)
    with reader(row.pk) as seen, slow_after_success():
        browser.get(success_url(row, stub))
    return Identification.objects.get(pk=row.pk), seen


@pytest.fixture
def browser(django_user_model: Any) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_user("emma", password="pw"))
    return client


def test_a_minor_refused_by_min_age_is_never_seen_verified(
    minor_at_the_broker: BrokerStub, settings: Any, browser: Client
) -> None:
    assert connection.vendor == "postgresql"
    settings.DJANGO_EID = {**settings.DJANGO_EID, "MIN_AGE": 18}
    row, seen = callback(browser, minor_at_the_broker)
    assert (row.status, row.error_code) == (Status.REJECTED, "MIN_AGE")
    assert len(seen) > 20  # the reader looked throughout
    assert Status.SUCCESS not in seen
    assert seen[0] == Status.PENDING
    assert seen[-1] == Status.REJECTED


def test_a_minor_refused_by_a_verifying_receiver_is_never_seen_verified(
    minor_at_the_broker: BrokerStub, browser: Client
) -> None:
    def adults_only(identification: Identification, **kwargs: Any) -> None:
        if identification.age is None or identification.age < 18:
            raise IdentificationRejected("Adults only.")

    signals.identification_verifying.connect(adults_only, weak=False)
    try:
        row, seen = callback(browser, minor_at_the_broker)
    finally:
        signals.identification_verifying.disconnect(adults_only)
    assert (row.status, row.error_message) == (Status.REJECTED, "Adults only.")
    assert len(seen) > 20
    assert Status.SUCCESS not in seen
    assert seen[0] == Status.PENDING
    assert seen[-1] == Status.REJECTED


def test_the_compatibility_path_is_seen_verified_for_a_moment(
    minor_at_the_broker: BrokerStub, browser: Client
) -> None:
    """What identification_verifying fixes: a rejection after the commit is visible."""

    def late(identification: Identification, **kwargs: Any) -> None:
        time.sleep(HOLD)  # a slow receiver after the commit
        raise IdentificationRejected("Adults only.")

    signals.identification_succeeded.connect(late, weak=False)
    try:
        row, seen = callback(browser, minor_at_the_broker)
    finally:
        signals.identification_succeeded.disconnect(late)
    assert row.status == Status.REJECTED
    assert Status.SUCCESS in seen


def test_two_callbacks_at_once_run_the_rules_once(
    eid_on_stub: BrokerStub, django_user_model: Any
) -> None:
    """The second callback waits for the row's lock, then finds it finished."""
    assert connection.vendor == "postgresql"
    browser = Client()
    browser.force_login(django_user_model.objects.create_user("kari", password="pw"))
    row = start(browser)
    url = success_url(row, eid_on_stub)
    tabs = [client_with_session(browser.session.session_key or "") for _ in range(2)]
    calls: list[int] = []
    lock = threading.Lock()

    def slow_rule(identification: Identification, **kwargs: Any) -> None:
        with lock:
            calls.append(identification.pk)
        time.sleep(HOLD)

    barrier = threading.Barrier(2)

    def hit(i: int) -> int:
        barrier.wait(timeout=30)
        return tabs[i].get(url).status_code

    signals.identification_verifying.connect(slow_rule, weak=False)
    try:
        with receiving(signals.identification_succeeded) as succeeded:
            answers = run_threads(hit, 2)
    finally:
        signals.identification_verifying.disconnect(slow_rule)
    assert answers == [302, 302]
    assert calls == [row.pk]
    assert len(succeeded) == 1
    assert Identification.objects.get(pk=row.pk).status == Status.SUCCESS
