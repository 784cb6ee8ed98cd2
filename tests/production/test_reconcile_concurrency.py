"""``eid_reconcile`` from two hosts at once, on PostgreSQL: every row settled once, every
signal sent once, nothing lost."""

from __future__ import annotations

import datetime
import threading
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.utils import timezone

from django_eid import signals
from django_eid.models import Identification
from tests.production.helpers import fresh_clients, receiving, run_threads, start
from tests.production.stub import BrokerStub

pytestmark = [pytest.mark.production, pytest.mark.django_db(transaction=True)]

ROWS = 30
RUNS = 3


@pytest.fixture
def broker(settings: Any) -> Any:
    # Slow answers keep the runs overlapping.
    with BrokerStub(latency=0.02) as stub:
        settings.DJANGO_EID = stub.settings(MAX_PENDING_PER_USER=ROWS)
        fresh_clients()
        yield stub
        fresh_clients()


def test_concurrent_runs_settle_every_row_once(broker: BrokerStub, django_user_model: Any) -> None:
    assert connection.vendor == "postgresql"
    user = django_user_model.objects.create_user("kari", password="pw")
    browser = Client()
    browser.force_login(user)
    rows = [start(browser) for _ in range(ROWS)]
    # The stub identifies every session as the sample person, from another device than this
    # test client: abort them at the broker instead, which any run may finish.
    for row in rows:
        assert row.request_id is not None
        with broker.lock:
            session = broker.broker.session(row.request_id)
            assert session is not None
            session.status = "USERABORTED"
            broker.broker._save(session)
    earlier = timezone.now() - datetime.timedelta(minutes=5)
    Identification.objects.update(created_at=earlier)
    barrier = threading.Barrier(RUNS)

    def run(i: int) -> str:
        barrier.wait(timeout=30)
        out = StringIO()
        call_command("eid_reconcile", "--batch-size", "4", stdout=out)
        return out.getvalue()

    with receiving(signals.identification_aborted) as aborted:
        outputs = run_threads(run, RUNS, timeout=120)
    assert set(Identification.objects.values_list("status", flat=True)) == {"ABORTED"}
    assert sorted(s["identification"].pk for s in aborted) == sorted(r.pk for r in rows)
    checked = sum(int(out.split(": ")[1].split(" ")[0]) for out in outputs)
    assert checked == ROWS  # no row handled by two runs
    assert Identification.objects.filter(claimed_until__isnull=False).count() == 0
