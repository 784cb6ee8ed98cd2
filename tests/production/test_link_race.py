"""Linked identities under a race, on PostgreSQL.

Several accounts of one person (the stub answers every session with the same person)
reach their success URLs at the same instant, ``ONE_ACCOUNT_PER_PERSON`` off: every one is
verified, and exactly one of them is linked to the person (the link's unique key: the
other INSERTs wait for the first and then insert nothing, none fails).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from django_eid import flow
from django_eid.models import Identification, LinkedIdentity
from django_eid.person_keys import uid_key
from tests.production.helpers import run_threads, start, success_url
from tests.production.stub import BrokerStub

pytestmark = [pytest.mark.production, pytest.mark.django_db(transaction=True)]

ACCOUNTS = 8
Status = Identification.Status


def test_accounts_of_one_person_verifying_at_once_link_one_of_them(
    eid_on_stub: BrokerStub, django_user_model: Any
) -> None:
    assert connection.vendor == "postgresql"
    browsers, urls = [], []
    for i in range(ACCOUNTS):
        user = django_user_model.objects.create_user(f"kari-{i}", password="pw")
        browser = Client()
        browser.force_login(user)
        browsers.append(browser)
        urls.append(success_url(start(browser), eid_on_stub))
    barrier = threading.Barrier(ACCOUNTS)

    def hit(i: int) -> int:
        barrier.wait(timeout=30)
        return browsers[i].get(urls[i]).status_code

    assert run_threads(hit, ACCOUNTS) == [302] * ACCOUNTS
    rows = list(Identification.objects.all())
    assert {row.status for row in rows} == {Status.SUCCESS}
    (link,) = LinkedIdentity.objects.all()
    assert {uid_key(row) for row in rows} == {link.key}
    linked = [row for row in rows if row.user_id == link.user_id]
    assert len(linked) == 1
    assert [row for row in rows if flow.linked_elsewhere(row)] == [
        row for row in rows if row.user_id != link.user_id
    ]


@pytest.mark.parametrize("round_", range(3))
def test_two_removals_at_once_keep_the_last_way_to_log_in(
    django_user_model: Any, round_: int
) -> None:
    """An account without a password and with two links: two removals at the same instant
    (two tabs) remove one link; the other waits for the first's lock, then finds the
    remaining link the last one and is refused. (Without the lock both pass most rounds.)"""
    user = django_user_model.objects.create_user(f"passwordless-{round_}")
    user.set_unusable_password()
    user.save()
    for scheme in ("no-bankid", "no-buypass"):
        LinkedIdentity.objects.create(user=user, key=f"uid:{scheme}-{round_}", scheme=scheme)
    ids = list(LinkedIdentity.objects.values_list("pk", flat=True))
    barrier = threading.Barrier(2)

    def remove(i: int) -> str:
        barrier.wait(timeout=30)
        try:
            flow.unlink(user, ids[i])
        except flow.Refused as refused:
            return refused.outcome.code
        return "removed"

    assert sorted(run_threads(remove, 2)) == ["last_login_method", "removed"]
    assert LinkedIdentity.objects.filter(user=user).count() == 1
