"""``django_eid.contrib.drf.EidVerified``: the gate as a REST framework permission
(tests/gates/views.py)."""

from __future__ import annotations

import datetime

import pytest
from django.test import Client
from django.utils import timezone

from django_eid import state
from django_eid.contrib.drf import EidVerified
from django_eid.models import Identification
from django_eid.testing import EidBroker
from tests.gates.helpers import JSON, verified_at, verify

pytestmark = pytest.mark.django_db


def test_an_unverified_user_gets_403_with_the_start_url(alice_client: Client) -> None:
    response = alice_client.get("/gated/api/payout/", headers=JSON)
    assert response.status_code == 403
    assert response.json() == {
        "code": "eid_required",
        "message": "Please verify your identity to continue.",
        "reasons": ["not_verified"],
        "start_url": "/eid/start/?next=%2Fapp%2Fpayout",
    }
    # The start page will know why, for the front end's next.
    assert "/app/payout" in alice_client.session[state.DEMANDS_KEY]


def test_a_recently_verified_user_passes_and_a_stale_one_does_not(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    verify(alice_client, eid_broker)
    assert alice_client.get("/gated/api/payout/", headers=JSON).json() == {"ok": True}
    Identification.objects.update(completed_at=timezone.now() - datetime.timedelta(seconds=301))
    response = alice_client.get("/gated/api/payout/", headers=JSON)
    assert (response.status_code, response.json()["reasons"]) == (403, ["too_old"])


def test_the_permissions_own_message_and_conditions(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    verify(alice_client, eid_broker, eid_broker.persons.MINOR)
    response = alice_client.get("/gated/api/adults/", headers=JSON)
    assert response.status_code == 403
    body = response.json()
    assert (body["message"], body["reasons"], body["start_url"]) == (
        "Adults only.",
        ["too_young"],
        "/eid/start/",
    )
    verify(alice_client, eid_broker, eid_broker.persons.NORWEGIAN)
    assert alice_client.get("/gated/api/adults/", headers=JSON).json() == {"adult": True}


@pytest.mark.parametrize(
    ("level", "passes"), [("high", True), ("substantial", True), ("low", False), ("", False)]
)
def test_a_level_at_or_above_min_loa_passes_and_one_below_or_none_gets_403(
    alice_client: Client, eid_broker: EidBroker, level: str, passes: bool
) -> None:
    verified_at(alice_client, eid_broker, level)
    response = alice_client.get("/gated/api/substantial/", headers=JSON)
    if passes:
        assert response.json() == {"level": level}
        return
    assert response.status_code == 403
    assert response.json() == {
        "code": "eid_required",
        "message": "Please verify your identity again with an eID of a higher level of assurance.",
        "reasons": ["loa_too_low"],
        "start_url": "/eid/start/",
    }


def test_authentication_is_left_to_rest_framework(client: Client) -> None:
    response = client.get("/gated/api/payout/", headers=JSON)
    assert response.status_code == 403
    assert response.json() == {"detail": "Authentication credentials were not provided."}


def test_class_attributes_are_checked_when_the_class_is_defined() -> None:
    with pytest.raises(ValueError, match="max_age"):

        class Broken(EidVerified):
            max_age = -5

    with pytest.raises(ValueError, match="min_loa"):

        class Typo(EidVerified):
            min_loa = "High"
