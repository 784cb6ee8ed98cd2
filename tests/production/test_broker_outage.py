"""A broker that stops answering holds no worker longer than ``TIMEOUT``.

Real threads, a real (hanging) broker on loopback and the shared Redis cache:
while the token has to be renewed, one worker fetches and the others wait for
it; when the broker does not answer, the waiters must not then spend another
``TIMEOUT`` fetching themselves. Users get the error page, and the flow works
again as soon as the broker answers, without a restart.
"""

from __future__ import annotations

import datetime
import threading
import time
from typing import Any

import pytest
from django.test import Client
from time_machine import TimeMachineFixture

from django_eid.client import EidClient
from django_eid.exceptions import EidUnavailable
from django_eid.models import Identification
from tests.production.helpers import (
    client_with_session,
    fresh_clients,
    run_threads,
    start,
    success_url,
)
from tests.production.stub import BrokerStub

TIMEOUT = 1.0
#: Scheduling slack on a loaded two-core machine.
SLACK = 0.6
THREADS = 6


@pytest.mark.parametrize("shared", [True, False], ids=["one-client", "client-per-thread"])
def test_waiters_for_a_hanging_token_request_give_up_within_the_timeout(
    settings: Any, stub: BrokerStub, shared: bool
) -> None:
    """Threads of one process (one client, as get_client() gives) or of several (a client each).

    The token cache is the suite's: local memory on SQLite, Redis in the production tier.
    """
    settings.DJANGO_EID = stub.settings(TIMEOUT=TIMEOUT)
    clients = [EidClient()] * THREADS if shared else [EidClient() for _ in range(THREADS)]
    stub.hang()
    barrier = threading.Barrier(THREADS)

    def fetch(i: int) -> tuple[str, float]:
        barrier.wait(timeout=10)
        started = time.monotonic()
        try:
            clients[i].get_token()
        except EidUnavailable:
            return "unavailable", time.monotonic() - started
        return "token", time.monotonic() - started

    try:
        outcomes = run_threads(fetch, THREADS, timeout=30)
    finally:
        stub.answer_again()
    assert {kind for kind, _ in outcomes} == {"unavailable"}
    assert max(seconds for _, seconds in outcomes) <= TIMEOUT + SLACK, outcomes
    # Back: the next call fetches a token, no restart.
    assert clients[0].get_token().access_token.startswith("stub.")
    for client in set(clients):
        client.close()


@pytest.mark.production
@pytest.mark.django_db(transaction=True)
def test_users_get_the_error_page_during_an_outage_and_the_flow_works_after_it(
    settings: Any, stub: BrokerStub, django_user_model: Any, time_machine: TimeMachineFixture
) -> None:
    # A short-lived token, so that it also runs out while the broker is down.
    settings.DJANGO_EID = stub.settings(TIMEOUT=TIMEOUT)
    stub.token_lifetime = 2
    fresh_clients()
    users = [django_user_model.objects.create_user(f"outage{i}") for i in range(THREADS)]
    keys = []
    for user in users:
        browser = Client()
        browser.force_login(user)
        start(browser)  # warm: a token, a keep-alive connection per thread
        keys.append(browser.cookies["sessionid"].value)
    # The token is now stale: the clock (which the token's lifetime is told by) moves on;
    # the deadlines of the calls are told by the monotonic clock, which does not.
    time_machine.move_to(datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=2))
    stub.hang()

    def start_during_outage(i: int) -> tuple[int, bool, float]:
        browser = client_with_session(keys[i])
        started = time.monotonic()
        response = browser.post("/eid/start/", {"display": "redirect"})
        text = response.content.decode()
        return response.status_code, "could not be reached" in text, time.monotonic() - started

    try:
        during = run_threads(start_during_outage, THREADS, timeout=30)
    finally:
        stub.answer_again()
    assert {(status, page) for status, page, _ in during} == {(503, True)}, during
    assert max(seconds for _, _, seconds in during) <= TIMEOUT + SLACK, during

    # The broker is back: a complete identification works, in the same process.
    browser = client_with_session(keys[0])
    row = start(browser)
    response = browser.get(success_url(row, stub))
    assert response.status_code == 302
    row.refresh_from_db()
    assert row.status == Identification.Status.SUCCESS
    fresh_clients()
