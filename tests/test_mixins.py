"""``EidRequiredMixin``: the decorator's gate for class-based views (tests/gated_views.py)."""

from __future__ import annotations

import datetime

import pytest
from django.test import Client
from django.utils import timezone

from django_eid.models import Identification
from django_eid.testing import EidBroker

pytestmark = pytest.mark.django_db


def verify(client: Client, eid_broker: EidBroker, person_key: str = "NORWEGIAN") -> None:
    client.post("/eid/start/")
    client.get(eid_broker.complete(eid_broker.persons.get(person_key)))


def test_a_logged_out_user_goes_to_the_login_page(client: Client) -> None:
    response = client.get("/gated/class/adults/")
    assert (response.status_code, response["Location"]) == (
        302,
        "/login/?next=/gated/class/adults/",
    )


def test_the_class_attributes_are_the_conditions(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    verify(alice_client, eid_broker, "MINOR")
    response = alice_client.get("/gated/class/adults/")
    assert response.status_code == 302
    assert response["Location"] == "/eid/start/?next=%2Fgated%2Fclass%2Fadults%2F"
    verify(alice_client, eid_broker, "NORWEGIAN")
    assert alice_client.get("/gated/class/adults/").content == b"adults (class)"


@pytest.mark.parametrize(("level", "passes"), [("high", True), ("substantial", False), ("", False)])
def test_eid_min_loa_is_a_condition(
    alice_client: Client, eid_broker: EidBroker, level: str, passes: bool
) -> None:
    verify(alice_client, eid_broker)
    Identification.objects.update(level_of_assurance=level)
    response = alice_client.get("/gated/class/high/", headers={"accept": "application/json"})
    if passes:
        assert response.content == b"high (class)"
    else:
        assert (response.status_code, response.json()["reasons"]) == (403, ["loa_too_low"])


def test_a_bad_eid_min_loa_fails_when_the_class_is_defined() -> None:
    from django.views import View

    from django_eid.mixins import EidRequiredMixin

    with pytest.raises(ValueError, match="min_loa"):

        class Typo(EidRequiredMixin, View):
            eid_min_loa = "hihg"


def test_get_eid_requirements_decides_per_request(
    alice_client: Client, eid_broker: EidBroker
) -> None:
    verify(alice_client, eid_broker)
    Identification.objects.update(completed_at=timezone.now() - datetime.timedelta(minutes=5))
    assert alice_client.get("/gated/class/chosen/").status_code == 200
    assert alice_client.get("/gated/class/chosen/?fresh=1").status_code == 302


def test_a_json_client_gets_json(alice_client: Client) -> None:
    response = alice_client.get("/gated/class/adults/", headers={"accept": "application/json"})
    assert response.status_code == 403
    assert response.json()["reasons"] == ["not_verified"]
