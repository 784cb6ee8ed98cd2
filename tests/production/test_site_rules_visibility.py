"""Site rules are decided before success is visible: checked with a concurrent reader on
PostgreSQL.

A reader polls the row's status from its own connection while the callback runs. Right after
the ``UPDATE ... SET status = 'SUCCESS'`` (an execute wrapper) the callback is held until the
reader has looked :data:`LOOKS` more times: the window in which an uncommitted, or briefly
committed, ``SUCCESS`` could be seen is as wide as the reader needs, on a loaded machine too,
and no wider. A minor refused by ``MIN_AGE`` or by an ``identification_verifying`` receiver
is never seen as ``SUCCESS``; the compatibility path (a rejection from
``identification_succeeded``) is, which shows the reader would catch it.
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
#: How many times the reader looks while the callback is held after its SUCCESS update.
LOOKS = 25
#: The longest any wait of these tests may take, in seconds: a failure, never a pace.
WAIT = 10.0


@pytest.fixture
def minor_at_the_broker(settings: Any) -> Iterator[BrokerStub]:
    with BrokerStub(person=builtin_persons().MINOR) as stub:
        settings.DJANGO_EID = stub.settings(GET_SOCIAL_SECURITY_NUMBER=True)
        fresh_clients()
        yield stub
        fresh_clients()


class Reader:
    """Row ``pk``'s status as another connection reads it, over and over, while running."""

    def __init__(self, pk: int) -> None:
        self.pk = pk
        self.seen: list[str] = []
        self._looked = threading.Condition()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        try:
            while not self._done.is_set():
                status = Identification.objects.filter(pk=self.pk).values_list("status", flat=True)
                with self._looked:
                    self.seen.append(status.get())
                    self._looked.notify_all()
                time.sleep(0.002)
        finally:
            close_thread_connections()

    def wait_until(self, condition: Callable[[list[str]], bool]) -> None:
        """Block the calling thread until what the reader has seen meets ``condition``."""
        with self._looked:
            assert self._looked.wait_for(lambda: condition(self.seen), timeout=WAIT), self.seen

    def more_looks(self, count: int = LOOKS) -> None:
        """Block until the reader has looked ``count`` more times."""
        looked = len(self.seen)
        self.wait_until(lambda seen: len(seen) >= looked + count)

    def __enter__(self) -> Reader:
        self._thread.start()
        self.wait_until(bool)  # it has the row before the callback starts
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.more_looks(1)  # a last look after the request committed
        self._done.set()
        self._thread.join(timeout=WAIT)


@contextmanager
def held_after_success(reader: Reader) -> Iterator[None]:
    """Hold the statement that sets SUCCESS, inside whatever transaction holds it, until the
    reader has looked :data:`LOOKS` more times."""

    def wrapper(
        execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        result = execute(sql, params, many, context)
        # The UPDATE, on PostgreSQL one statement with its audit event (WITH changed AS ...).
        changes = sql.startswith(("UPDATE", "WITH changed AS (UPDATE"))
        if changes and "SUCCESS" in str(params):
            reader.more_looks()
        return result

    with connection.execute_wrapper(wrapper):
        yield


def callback(
    browser: Client, stub: BrokerStub, late_receiver: Callable[..., None] | None = None
) -> tuple[Identification, list[str]]:
    """The success callback of a new start, watched by a :class:`Reader`; ``late_receiver``
    (given the reader) is connected to ``identification_succeeded`` meanwhile."""
    row = start(browser)
    with Reader(row.pk) as reader, held_after_success(reader):
        if late_receiver is None:
            browser.get(success_url(row, stub))
        else:

            def receiver(**kwargs: Any) -> None:
                late_receiver(reader, **kwargs)

            signals.identification_succeeded.connect(receiver, weak=False)
            try:
                browser.get(success_url(row, stub))
            finally:
                signals.identification_succeeded.disconnect(receiver)
    return Identification.objects.get(pk=row.pk), reader.seen


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
    assert len(seen) > LOOKS  # the reader looked throughout
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
    assert len(seen) > LOOKS
    assert Status.SUCCESS not in seen
    assert seen[0] == Status.PENDING
    assert seen[-1] == Status.REJECTED


def test_the_compatibility_path_is_seen_verified_for_a_moment(
    minor_at_the_broker: BrokerStub, browser: Client
) -> None:
    """What identification_verifying fixes: a rejection after the commit is visible."""

    def late(reader: Reader, **kwargs: Any) -> None:
        # A receiver after the commit, slow enough for the reader to see its success.
        reader.wait_until(lambda seen: Status.SUCCESS in seen)
        raise IdentificationRejected("Adults only.")

    row, seen = callback(browser, minor_at_the_broker, late_receiver=late)
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
    waited: list[bool] = []

    def slow_rule(identification: Identification, **kwargs: Any) -> None:
        with lock:
            calls.append(identification.pk)
        # Held until the other callback waits for the row's lock, which this one holds.
        waited.append(another_waits_for_a_lock())

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
    assert waited == [True]
    assert calls == [row.pk]
    assert len(succeeded) == 1
    assert Identification.objects.get(pk=row.pk).status == Status.SUCCESS


def another_waits_for_a_lock() -> bool:
    """Whether another session of this database comes to wait for a lock within
    :data:`WAIT` seconds (PostgreSQL's view of its sessions)."""
    deadline = time.monotonic() + WAIT
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                " AND pid <> pg_backend_pid()"
            )
            if cursor.fetchone()[0]:
                return True
            time.sleep(0.005)
    return False
