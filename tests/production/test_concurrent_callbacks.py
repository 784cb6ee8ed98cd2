"""(b) Sixteen concurrent hits of one success URL on PostgreSQL.

The same browser (one session cookie) reaches the success URL sixteen times
at once (double clicks, a reload storm, a proxy retrying): one identification
is stored, one transition happens, one ``identification_succeeded`` is sent,
and every hit gets the same answer.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from django_eid import signals
from django_eid.models import Identification
from tests.production.helpers import (
    client_with_session,
    receiving,
    run_threads,
    start,
    success_url,
)
from tests.production.stub import SAMPLE, BrokerStub

pytestmark = [pytest.mark.production, pytest.mark.django_db(transaction=True)]

HITS = 16


@pytest.mark.parametrize("round_", range(3))
def test_sixteen_concurrent_hits_store_one_identification_and_send_one_signal(
    eid_on_stub: BrokerStub, django_user_model: Any, round_: int
) -> None:
    assert connection.vendor == "postgresql"
    user = django_user_model.objects.create_user(f"kari{round_}", password="pw")
    browser = Client()
    browser.force_login(user)
    session_key = browser.cookies["sessionid"].value
    row = start(browser)
    url = success_url(row, eid_on_stub)
    barrier = threading.Barrier(HITS)
    clients = [client_with_session(session_key) for _ in range(HITS)]

    def hit(i: int) -> tuple[int, str]:
        barrier.wait(timeout=30)
        response = clients[i].get(url)
        return response.status_code, response.get("Location", "")

    with (
        receiving(signals.identification_succeeded) as succeeded,
        receiving(signals.identification_failed) as failed,
    ):
        answers = run_threads(hit, HITS)

    assert answers == [(302, "/done/")] * HITS
    assert len(succeeded) == 1
    assert failed == []
    assert succeeded[0]["identification"].pk == row.pk
    rows = Identification.objects.filter(user=user)
    assert rows.count() == 1
    stored = rows.get()
    assert stored.status == Identification.Status.SUCCESS
    assert stored.name == "Nordmann, Kari Marie"
    assert stored.social_security_number == SAMPLE.national_identity_number
    seen = eid_on_stub.snapshot()
    assert seen["creates"] == 1
    assert 1 <= seen["retrieves"] <= HITS
    assert seen["token_requests"] == 1
