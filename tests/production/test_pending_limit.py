"""MAX_PENDING_PER_USER is a guarantee, on PostgreSQL: sixty start POSTs of one account at
the same instant, against a broker that takes a fifth of a second to create a session, create
exactly the limit of broker sessions; the others get 429."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from django_eid.models import Identification
from tests.production.helpers import client_with_session, fresh_clients, run_threads
from tests.production.stub import BrokerStub

pytestmark = [pytest.mark.production, pytest.mark.django_db(transaction=True)]

STARTS = 60
LIMIT = 5


@pytest.fixture
def slow_broker(settings: Any) -> Any:
    with BrokerStub(latency=0.2) as stub:
        settings.DJANGO_EID = stub.settings(MAX_PENDING_PER_USER=LIMIT)
        fresh_clients()
        yield stub
        fresh_clients()


def test_sixty_parallel_starts_create_at_most_the_limit(
    slow_broker: BrokerStub, django_user_model: Any
) -> None:
    assert connection.vendor == "postgresql"
    from django.test import Client

    browser = Client()
    browser.force_login(django_user_model.objects.create_user("kari", password="pw"))
    key = browser.session.session_key or ""
    tabs = [client_with_session(key) for _ in range(STARTS)]
    barrier = threading.Barrier(STARTS)

    def post(i: int) -> int:
        barrier.wait(timeout=60)
        return tabs[i].post("/eid/start/", {"display": "redirect"}).status_code

    answers = run_threads(post, STARTS, timeout=120)
    assert sorted(answers) == [302] * LIMIT + [429] * (STARTS - LIMIT)
    assert slow_broker.counters.creates == LIMIT
    assert Identification.objects.count() == LIMIT
    assert set(Identification.objects.values_list("status", flat=True)) == {"PENDING"}
