"""An identification's change and its audit event are one: a worker killed at the worst
moment leaves both or neither, on PostgreSQL.

A spawned worker (its own interpreter and connection, as a web worker) aborts a pending
identification. The test holds a lock on the events' table, so the worker's statement has
changed the row and waits to insert the event; then the worker is killed and its server
process terminated (what a killed worker behind a cut connection amounts to). Were the
change and its event two statements in autocommit, the row's change would stay without its
event. The second case kills a worker holding the change and its event in an open
transaction: neither stays.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import pytest
from django.db import connection, connections

from django_eid.models import AuditEvent, Identification
from tests.production.workers import change_and_hang

pytestmark = [pytest.mark.production, pytest.mark.django_db(transaction=True)]

Status = Identification.Status
#: The longest any wait here may take, in seconds: a failure, never a pace.
WAIT = 30.0


def _waiting_on_a_lock(backend: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [backend])
        found = cursor.fetchone()
    return bool(found) and found[0] == "Lock"


def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


def _gone(backend: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [backend])
        return cursor.fetchone() is None


def _kill(process: Any, backend: int) -> None:
    process.kill()
    process.join(WAIT)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [backend])
    _until(lambda: _gone(backend), "the killed worker's server process to end")


def _worker(pk: int, *, in_transaction: bool) -> tuple[Any, Any, int]:
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Queue()
    name = connection.settings_dict["NAME"]
    process = ctx.Process(
        target=change_and_hang, args=(name, pk, in_transaction, ready), daemon=True
    )
    process.start()
    return process, ready, int(ready.get(timeout=WAIT))


def _pending() -> Identification:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("atomic", password=None)
    return Identification.objects.create(user=user, request_id="atomic-1")


def _assert_both_or_neither(pk: int) -> None:
    row = Identification.objects.get(pk=pk)
    events = list(AuditEvent.objects.filter(identification_id=pk).values_list("kind", "status"))
    if row.status == Status.PENDING:
        assert events == [], "an event without its change"
    else:
        assert events == [("finished", row.status)], "a change without its event"


def test_a_worker_killed_between_the_change_and_its_event_leaves_neither() -> None:
    pk = _pending().pk
    locker = connections.create_connection("default")
    try:
        locker.set_autocommit(False)
        with locker.cursor() as cursor:
            # Inserts into the events' table wait; the identifications' table is free.
            cursor.execute(f"LOCK TABLE {AuditEvent._meta.db_table} IN SHARE ROW EXCLUSIVE MODE")
        process, _ready, backend = _worker(pk, in_transaction=False)
        _until(lambda: _waiting_on_a_lock(backend), "the worker to wait for the events' table")
        _kill(process, backend)
        locker.rollback()
    finally:
        locker.close()
    assert Identification.objects.get(pk=pk).status == Status.PENDING
    _assert_both_or_neither(pk)


def test_a_worker_killed_inside_its_transaction_leaves_neither() -> None:
    pk = _pending().pk
    process, ready, backend = _worker(pk, in_transaction=True)
    assert ready.get(timeout=WAIT) == "changed"
    _kill(process, backend)
    assert Identification.objects.get(pk=pk).status == Status.PENDING
    _assert_both_or_neither(pk)


def test_an_unhindered_worker_leaves_the_change_with_its_event() -> None:
    """The control: the same worker, not killed, leaves both (so the others show a kill)."""
    pk = _pending().pk
    process, ready, _backend = _worker(pk, in_transaction=False)
    assert ready.get(timeout=WAIT) == "changed"
    process.kill()
    process.join(WAIT)
    assert Identification.objects.get(pk=pk).status == Status.ABORTED
    _assert_both_or_neither(pk)
