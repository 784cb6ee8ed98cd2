"""The door under races, on PostgreSQL: a flood of anonymous starts at the same instant
stays within the caps (the counter's row lock), and two sign-ups of one person at the same
instant make one account (the link's unique key rolls the second back)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth import SESSION_KEY, get_user_model
from django.db import connection
from django.test import Client
from django.urls import reverse

from django_eid.models import Identification, LinkedIdentity, StartCounter
from tests.production.helpers import client_with_session, run_threads, success_url
from tests.production.stub import BrokerStub

pytestmark = [pytest.mark.production, pytest.mark.django_db(transaction=True)]

FLOOD = 12


def door_start(client: Client, purpose: str = "login") -> Any:
    return client.post(reverse("django_eid:login"), {"purpose": purpose})


def flood(clients: list[Client]) -> list[int]:
    barrier = threading.Barrier(len(clients))

    def hit(i: int) -> int:
        barrier.wait(timeout=30)
        return int(door_start(clients[i]).status_code)

    return run_threads(hit, len(clients))


def test_a_flood_from_one_address_starts_login_rate(eid_on_stub: BrokerStub, settings: Any) -> None:
    assert connection.vendor == "postgresql"
    settings.DJANGO_EID = {
        **settings.DJANGO_EID,
        "LOGIN_RATE": "4/h",
        "LOGIN_MAX_PENDING_PER_SESSION": None,
    }
    statuses = flood([Client(REMOTE_ADDR="203.0.113.5") for _ in range(FLOOD)])
    assert sorted(statuses) == [302] * 4 + [429] * (FLOOD - 4)
    assert Identification.objects.count() == 4
    assert StartCounter.objects.get().count == FLOOD


def test_a_flood_from_one_browser_session_starts_its_share(
    eid_on_stub: BrokerStub, settings: Any
) -> None:
    settings.DJANGO_EID = {
        **settings.DJANGO_EID,
        "LOGIN_RATE": None,
        "LOGIN_MAX_PENDING_PER_SESSION": 3,
    }
    first = Client()
    assert door_start(first).status_code == 302  # the session keeps its browser key now
    key = first.session.session_key
    assert key
    statuses = flood([client_with_session(key) for _ in range(FLOOD)])
    assert sorted(statuses) == [302] * 2 + [429] * (FLOOD - 2)
    assert Identification.objects.count() == 3


@pytest.mark.parametrize("mode", ["form", "auto"])
def test_two_sign_ups_of_one_person_at_once_make_one_account(
    eid_on_stub: BrokerStub, settings: Any, mode: str
) -> None:
    """Two browsers of one person (the stub identifies everyone as the same person) sign up
    at the same instant: one account, linked; the other is refused and makes none."""
    settings.DJANGO_EID = {**settings.DJANGO_EID, "SIGNUP": mode}
    browsers = [Client(), Client()]
    urls = []
    for browser in browsers:
        response = door_start(browser, "signup")
        assert response.status_code == 302
        row = Identification.objects.get(request_id=response.url.rsplit("/", 1)[-1])
        urls.append(success_url(row, eid_on_stub))
    barrier = threading.Barrier(2)

    def sign_up(i: int) -> int:
        if mode == "auto":
            barrier.wait(timeout=30)
            return int(browsers[i].get(urls[i]).status_code)
        assert browsers[i].get(urls[i])["Location"] == reverse("django_eid:signup")
        form = {"username": f"kari-{i}", "email": f"kari-{i}@example.com"}
        barrier.wait(timeout=30)
        return int(browsers[i].post(reverse("django_eid:signup"), form).status_code)

    statuses = run_threads(sign_up, 2)
    (user,) = get_user_model().objects.all()
    assert LinkedIdentity.objects.get().user_id == user.pk
    logged_in = [b.session.get(SESSION_KEY) for b in browsers]
    # The second is refused; or, its return finishing after the first sign-up committed,
    # the person's link opens the account just made: a login, not a second account.
    assert sorted(statuses) in ([302, 409], [302, 302])
    assert {pk for pk in logged_in if pk} == {str(user.pk)}
    if sorted(statuses) == [302, 409]:
        assert Identification.objects.filter(user__isnull=True, status="SUCCESS").count() == 1
