"""``eid_reconcile`` from several hosts at once, on PostgreSQL: every row asked about by one
run, settled once, every signal sent once, nothing lost, no run undoing another's lease."""

from __future__ import annotations

import datetime
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.utils import timezone

from django_eid import flow, signals
from django_eid.management.commands import eid_reconcile
from django_eid.models import Identification
from tests.db_threads import close_thread_connections
from tests.production.helpers import fresh_clients, receiving, run_threads, start
from tests.production.stub import BrokerStub

pytestmark = [pytest.mark.production, pytest.mark.django_db(transaction=True)]

ROWS = 30
RUNS = 3
WAIT = 60  # seconds a thread waits for another before the test fails (never reached)


@pytest.fixture
def broker(settings: Any) -> Iterator[BrokerStub]:
    # Nobody identifies: each test ends the sessions it needs ended. Slow answers keep the
    # runs overlapping.
    with BrokerStub(latency=0.02, person=None) as stub:
        settings.DJANGO_EID = stub.settings(MAX_PENDING_PER_USER=ROWS)
        fresh_clients()
        yield stub
        fresh_clients()


@pytest.fixture
def rows(broker: BrokerStub, django_user_model: Any) -> Callable[[int], list[Identification]]:
    """``rows(n)``: ``n`` identifications started five minutes ago, pending at the broker."""
    assert connection.vendor == "postgresql"
    user = django_user_model.objects.create_user("kari", password="pw")
    browser = Client()
    browser.force_login(user)

    def make(n: int) -> list[Identification]:
        made = [start(browser) for _ in range(n)]
        earlier = timezone.now() - datetime.timedelta(minutes=5)
        Identification.objects.filter(pk__in=[r.pk for r in made]).update(created_at=earlier)
        return made

    return make


def abort_at_broker(broker: BrokerStub, *rows: Identification) -> None:
    """The user cancelled these sessions at the broker: any run may finish them."""
    for row in rows:
        assert row.request_id is not None
        with broker.lock:
            session = broker.broker.session(row.request_id)
            assert session is not None
            session.status = "USERABORTED"
            broker.broker._save(session)


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> Counter[int]:
    """How many times each row was handed to ``flow.settle`` (asked about), by any run."""
    counts: Counter[int] = Counter()
    lock = threading.Lock()
    settle = flow.settle

    def counting(row: Identification, **kwargs: Any) -> flow.Settled:
        with lock:
            counts[row.pk] += 1
        return settle(row, **kwargs)

    monkeypatch.setattr(flow, "settle", counting)
    return counts


def reconcile(*args: str) -> str:
    out = StringIO()
    call_command("eid_reconcile", *args, stdout=out)
    return out.getvalue()


def checked(output: str) -> int:
    return int(output.split(": ")[1].split(" ")[0])


@pytest.mark.parametrize("skip_locked", [True, False], ids=["skip-locked", "plain-select"])
def test_concurrent_runs_settle_every_row_once(
    broker: BrokerStub,
    rows: Callable[[int], list[Identification]],
    asked: Counter[int],
    monkeypatch: pytest.MonkeyPatch,
    skip_locked: bool,
) -> None:
    # Without SKIP LOCKED (SQLite, MySQL < 8, MariaDB < 10.6) the runs read the same
    # candidates: the conditional claim alone must keep them apart.
    features = type(connection.features)
    monkeypatch.setattr(features, "has_select_for_update_skip_locked", skip_locked)
    made = rows(ROWS)
    abort_at_broker(broker, *made)
    barrier = threading.Barrier(RUNS)

    def run(i: int) -> str:
        barrier.wait(timeout=WAIT)
        return reconcile("--batch-size", "4")

    with receiving(signals.identification_aborted) as aborted:
        outputs = run_threads(run, RUNS, timeout=120)
    assert set(Identification.objects.values_list("status", flat=True)) == {"ABORTED"}
    assert sorted(s["identification"].pk for s in aborted) == sorted(r.pk for r in made)
    assert sum(checked(out) for out in outputs) == ROWS, outputs
    assert asked == Counter({r.pk: 1 for r in made})  # no row asked about by two runs
    # Finished rows are given back: nothing held, nothing resting.
    assert list(Identification.objects.values_list("claimed_until", "claim_token").distinct()) == [
        (None, "")
    ]


def test_rows_still_at_the_broker_are_not_asked_again_by_the_other_runs(
    broker: BrokerStub, rows: Callable[[int], list[Identification]], asked: Counter[int]
) -> None:
    # Run A gives back rows still at the broker while run B is busy: B's next batches must
    # not take them again at once (they rest for RECHECK), nor may a third run.
    made = rows(ROWS)
    abort_at_broker(broker, *made[::3])
    barrier = threading.Barrier(RUNS)

    def run(i: int) -> str:
        barrier.wait(timeout=WAIT)
        return reconcile("--batch-size", "2")

    outputs = run_threads(run, RUNS, timeout=120)
    assert sum(checked(out) for out in outputs) == ROWS, outputs
    assert asked == Counter({r.pk: 1 for r in made}), outputs
    still = Identification.objects.filter(status="PENDING")
    assert still.count() == ROWS - len(made[::3])
    now = timezone.now()
    for row in still:
        assert row.claim_token == ""
        assert row.claimed_until is not None
        assert now < row.claimed_until <= now + eid_reconcile.RECHECK
    assert reconcile() == "eid_reconcile: 0 row(s) checked: none.\n"


def test_a_run_that_lost_its_lease_skips_the_rows_and_leaves_the_new_lease_alone(
    broker: BrokerStub, rows: Callable[[int], list[Identification]], asked: Counter[int]
) -> None:
    """Run B holds five rows and is slow on the first; the leases on the other four run out
    and run C takes them. B must skip them and give back only its own row; run D, meanwhile,
    must find every row held."""
    made = rows(5)
    abort_at_broker(broker, *made)
    first = made[0]
    in_row = {"run-B": threading.Event(), "run-C": threading.Event()}
    go_on = {"run-B": threading.Event(), "run-C": threading.Event()}
    settle = flow.settle  # the counting one

    def slow_first(row: Identification, **kwargs: Any) -> flow.Settled:
        name = threading.current_thread().name
        if name in in_row and not in_row[name].is_set():
            in_row[name].set()
            assert go_on[name].wait(timeout=WAIT)
        return settle(row, **kwargs)

    outputs: dict[str, str] = {}

    def run_in_thread(name: str) -> threading.Thread:
        def target() -> None:
            try:
                outputs[name] = reconcile("--batch-size", "10")
            finally:
                close_thread_connections()

        thread = threading.Thread(target=target, name=name, daemon=True)
        threads.append(thread)
        thread.start()
        return thread

    threads: list[threading.Thread] = []
    with (
        pytest.MonkeyPatch.context() as patch,
        receiving(signals.identification_aborted) as sent,
        _finally_released(go_on, threads),
    ):
        patch.setattr(flow, "settle", slow_first)
        b = run_in_thread("run-B")
        assert in_row["run-B"].wait(timeout=WAIT)
        (b_token,) = (
            Identification.objects.exclude(claim_token="")
            .values_list("claim_token", flat=True)
            .distinct()
        )
        # B's leases on the rows it has not reached run out (a broker call hanging for
        # minutes would do it).
        past = timezone.now() - datetime.timedelta(seconds=1)
        Identification.objects.filter(claim_token=b_token).exclude(pk=first.pk).update(
            claimed_until=past
        )
        c = run_in_thread("run-C")
        assert in_row["run-C"].wait(timeout=WAIT)
        held = dict(Identification.objects.values_list("pk", "claim_token"))
        c_token = held[made[1].pk]
        assert c_token not in ("", b_token)
        assert held == {first.pk: b_token, **{r.pk: c_token for r in made[1:]}}
        leases = dict(Identification.objects.values_list("pk", "claimed_until"))
        # Run D starts meanwhile: every row is held.
        assert reconcile() == "eid_reconcile: 0 row(s) checked: none.\n"
        # B goes on: its first row, then four rows it no longer holds.
        go_on["run-B"].set()
        b.join(timeout=WAIT)
        assert not b.is_alive()
        assert outputs["run-B"].startswith("eid_reconcile: 1 row(s) checked: 1 aborted; 4 skipped")
        # B gave back its own row only: C's leases are as C wrote them.
        after_b = Identification.objects.in_bulk([r.pk for r in made[1:]])
        for row in made[1:]:
            assert after_b[row.pk].claim_token == c_token
            assert after_b[row.pk].claimed_until == leases[row.pk]
        assert reconcile() == "eid_reconcile: 0 row(s) checked: none.\n"
        go_on["run-C"].set()
        c.join(timeout=WAIT)
        assert not c.is_alive()
    assert outputs["run-C"].startswith("eid_reconcile: 4 row(s) checked: 4 aborted;")
    assert asked == Counter({r.pk: 1 for r in made})
    assert sorted(s["identification"].pk for s in sent) == sorted(r.pk for r in made)
    assert set(Identification.objects.values_list("status", "claimed_until", "claim_token")) == {
        ("ABORTED", None, "")
    }


@contextmanager
def _finally_released(
    events: dict[str, threading.Event], threads: list[threading.Thread]
) -> Iterator[None]:
    """However the test ends, no run stays blocked (its connection would outlive the test)."""
    try:
        yield
    finally:
        for event in events.values():
            event.set()
        for thread in threads:
            thread.join(timeout=WAIT)
