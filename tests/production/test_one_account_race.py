"""(b') ONE_ACCOUNT_PER_PERSON under a race, on PostgreSQL.

Several accounts of one person (the stub answers every session with the same person) reach
their success URLs at the same instant. The claims' unique key makes the check hold: one
account is verified, every other one is REJECTED with ``ONE_ACCOUNT_PER_PERSON``, one
``identification_succeeded`` is sent, and the person's claims belong to the one success.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from django_eid import signals
from django_eid.models import Identification, PersonClaim
from tests.production.helpers import fresh_clients, receiving, run_threads, start, success_url
from tests.production.stub import BrokerStub

pytestmark = [pytest.mark.production, pytest.mark.django_db(transaction=True)]

ACCOUNTS = 8
Status = Identification.Status


@pytest.fixture
def one_account(settings: Any, eid_on_stub: BrokerStub) -> BrokerStub:
    settings.DJANGO_EID = eid_on_stub.settings(
        ONE_ACCOUNT_PER_PERSON=True, GET_SOCIAL_SECURITY_NUMBER=True
    )
    fresh_clients()
    return eid_on_stub


@pytest.mark.parametrize("round_", range(3))
def test_accounts_of_one_person_finishing_at_once_verify_one_of_them(
    one_account: BrokerStub, django_user_model: Any, round_: int
) -> None:
    assert connection.vendor == "postgresql"
    browsers, urls = [], []
    for i in range(ACCOUNTS):
        user = django_user_model.objects.create_user(f"kari{round_}-{i}", password="pw")
        browser = Client()
        browser.force_login(user)
        browsers.append(browser)
        urls.append(success_url(start(browser), one_account))
    barrier = threading.Barrier(ACCOUNTS)

    def hit(i: int) -> int:
        barrier.wait(timeout=30)
        return browsers[i].get(urls[i]).status_code

    with (
        receiving(signals.identification_succeeded) as succeeded,
        receiving(signals.identification_failed) as failed,
    ):
        answers = run_threads(hit, ACCOUNTS)

    assert sorted(answers) == [200] * (ACCOUNTS - 1) + [302]
    rows = Identification.objects.all()
    assert sorted(rows.values_list("status", flat=True)) == sorted(
        [Status.SUCCESS] + [Status.REJECTED] * (ACCOUNTS - 1)
    )
    winner = rows.get(status=Status.SUCCESS)
    assert set(rows.filter(status=Status.REJECTED).values_list("error_code", flat=True)) == {
        "ONE_ACCOUNT_PER_PERSON"
    }
    assert [s["identification"].pk for s in succeeded] == [winner.pk]
    assert len(failed) == ACCOUNTS - 1
    assert winner.pk not in {f["identification"].pk for f in failed}
    assert dict(PersonClaim.objects.values_list("key", "identification_id")) == dict.fromkeys(
        PersonClaim.keys_for(winner), winner.pk
    )
